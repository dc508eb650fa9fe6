"""What the command refuses, or warns about, before it loads data or trains: paths, seeds,
devices, splits and a generated graph's flags (`check_args`: one `error:` line, exit 2), and the
flags and `--set` fields the run would not read (`warn_unused_flags`: a warning each)."""

from __future__ import annotations

import math
import sys

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import data, methods
from policy_gnn_jax.cli import splits
from policy_gnn_jax.cli.flags import (
    GENERATOR_DEFAULTS,
    flag_fields,
    own_items,
    unread_fields,
    was_given,
)
from policy_gnn_jax.cli.process import require_at_least_one
from policy_gnn_jax.runtime import cluster, memory, outputs, runner, seed_axis


def _check_paths(args) -> None:
    """Folders named on the command line: not empty, and output apart from checkpoints."""
    for flag in ("out", "checkpoint_dir", "data_dir"):
        value = getattr(args, flag)
        if value is not None and not value.strip():
            raise config_lib.ConfigError(
                f"--{flag.replace('_', '-')} is empty: name a folder (leave the flag out for the "
                f"default)."
            )
    if args.out and args.checkpoint_dir:
        out, ckpt = outputs.real_path(args.out), outputs.real_path(args.checkpoint_dir)
        if out == ckpt:
            raise config_lib.ConfigError(
                f"--out and --checkpoint-dir are one folder ({out}): give the checkpoints a "
                f"folder of their own (e.g. {out / 'checkpoints'})."
            )
        if ckpt in out.parents:
            raise config_lib.ConfigError(
                f"--out {out} is inside --checkpoint-dir {ckpt}: keep the checkpoint folder to "
                f"the checkpoints (e.g. --out {ckpt.parent / 'out'})."
            )
    if args.data_dir and data.heterophily.is_npz_path(args.dataset):
        raise config_lib.ConfigError(
            f"--dataset {args.dataset} is a file's path, read from there; --data-dir is not "
            f"searched for it. Pass the full path and leave --data-dir out."
        )
    if args.out and data.heterophily.is_npz_path(args.dataset):
        graph, out = outputs.real_path(args.dataset), outputs.real_path(args.out)
        if out in graph.parents and graph.name in outputs.RESULT_FILES:
            raise config_lib.ConfigError(
                f"--dataset {args.dataset} is {graph}, which would be replaced by the run's own "
                f"{graph.name}: keep the graph outside {out}, or choose another --out."
            )


def check_args(args) -> None:
    """Everything that can be refused before loading data or training."""
    _check_paths(args)
    if not 0 <= args.seed <= seed_axis.MAX_SEED:
        raise runner.ResourceError(f"--seed must be in 0..{seed_axis.MAX_SEED}, got {args.seed}.")
    if not 1 <= args.seeds <= 2**31 - 1:
        raise runner.ResourceError(f"--seeds must be in 1..{2**31 - 1}, got {args.seeds}.")
    if args.checkpoint_every < 1:
        raise config_lib.ConfigError(
            f"--checkpoint-every must be >= 1, got {args.checkpoint_every}."
        )
    if args.devices is not None:
        require_at_least_one(devices=args.devices)
        if not args.show_config:  # the backend has started (it has not for --show-config)
            seed_axis.check_devices(args.devices, "--devices")
    data.check_name(args.dataset)
    if args.splits is not None and not splits.has_splits(args):
        raise config_lib.ConfigError(
            f"--splits needs a benchmark with fixed splits; --dataset {args.dataset} has one."
        )
    if args.splits is not None and cluster.count() > 1:
        raise config_lib.ConfigError(
            "--splits runs in one process: over several processes, run one --split K at a time."
        )
    if args.splits is not None and args.split is not None:
        raise config_lib.ConfigError("pass --split K for one split or --splits for several.")
    if args.splits is not None:  # refused now, before any folder is made
        splits.parse_splits(args.splits, data.heterophily.num_splits(args.dataset))
    if args.dataset.lower() in ("csbm", "planted"):
        _check_generator_args(args)


def _check_generator_args(args) -> None:
    """The generated graph's flags, named when wrong, and its size against host memory before
    numpy tries to allocate it."""
    if not 0 <= args.csbm_seed <= seed_axis.MAX_SEED:
        raise config_lib.ConfigError(
            f"--csbm-seed must be in 0..{seed_axis.MAX_SEED}, got {args.csbm_seed}."
        )
    require_at_least_one(csbm_nodes=args.csbm_nodes, csbm_features=args.csbm_features)
    if not (math.isfinite(args.csbm_degree) and 0 < args.csbm_degree <= args.csbm_nodes - 1):
        raise config_lib.ConfigError(
            f"--csbm-degree must be a number in (0, {args.csbm_nodes - 1}] (--csbm-nodes - 1: "
            f"more makes the same complete graph), got {args.csbm_degree}."
        )
    if not (0.0 <= args.csbm_homophily <= 1.0):  # also refuses nan
        raise config_lib.ConfigError(
            f"--csbm-homophily must be in [0, 1], got {args.csbm_homophily}."
        )
    # Generation holds float64 features and their float32 CSR copy (16 bytes a value) and the
    # int64 edge draws in both directions (about 40 bytes per unit of degree).
    needed = args.csbm_nodes * (16 * args.csbm_features + 40 * max(args.csbm_degree, 1.0))
    available = memory.host_memory_bytes()
    if available is not None and needed > available:
        raise runner.ResourceError(
            f"--csbm-nodes {args.csbm_nodes} with --csbm-features {args.csbm_features} needs "
            f"about {needed / 2**30:.1f} GiB of host memory to generate; "
            f"{available / 2**30:.1f} GiB is available. Generate a smaller graph."
        )


def warn_unused_flags(args) -> None:
    """A flag or `--set` field the run never reads (the method's `Method.ignores`, a generator's
    flag on another dataset, ...), and a flag a `--set` of the same field replaces, are said,
    not silently dropped."""
    entry = methods.get(args.method)
    ignores = unread_fields(entry)
    try:
        overrides = config_lib.parse_overrides(own_items(args.set, ignores), entry.config_type)
    except config_lib.ConfigError:
        overrides = {}  # refused with its own message when the config is built
    unused = []  # in the flags' order, each once (--depths sets two fields)
    for flag, field, value in flag_fields(args):
        if field in ignores:
            unused += [flag] if flag not in unused else []
        elif field in overrides and overrides[field] != value:
            shown = args.depths if flag == "--depths" else value  # as the user wrote it
            _warn(f"--set {field}={overrides[field]} replaces {flag} {shown}.")
    for flag in unused:
        _warn(f"{flag} is not used by --method {args.method}.")
    for field in sorted(ignores & {item.partition("=")[0].strip() for item in args.set or []}):
        _warn(f"--set {field} is not used by --method {args.method}.")
    for flag in _unused_data_flags(args):
        _warn(f"{flag} is not used by --dataset {args.dataset}.")
    if was_given(args, "checkpoint_every") and not args.checkpoint_dir:
        _warn("--checkpoint-every is not used without --checkpoint-dir.")
    if was_given(args, "split_map") and args.splits is None:
        _warn("--split-map is not used without --splits.")
    elif was_given(args, "split_map") and args.checkpoint_dir and args.split_map != "apart":
        _warn(f"--split-map {args.split_map} is not used with --checkpoint-dir: each split runs "
              f"apart, checkpointed in a folder of its own.")  # fmt: skip


def _unused_data_flags(args) -> list[str]:
    name = args.dataset.lower()
    unused = []
    if args.split is not None and not splits.has_splits(args):
        unused.append("--split")
    generated = {"csbm": set(GENERATOR_DEFAULTS), "planted": {"csbm_seed"}}.get(name, set())
    for field in GENERATOR_DEFAULTS:
        if was_given(args, field) and field not in generated:
            unused.append("--" + field.replace("_", "-"))
    if args.data_dir is not None and name in ("csbm", "planted"):
        unused.append("--data-dir")
    return unused


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)
