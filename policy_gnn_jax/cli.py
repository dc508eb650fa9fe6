"""The `policy-gnn` command (also `python experiments/run.py`): train over many seeds in one go.

policy-gnn --dataset cora                          # Policy-GNN, paper defaults, 10 seeds
policy-gnn --dataset cora --method gcn --depth 2
policy-gnn --dataset csbm --method random --episodes 50
policy-gnn --dataset cora --checkpoint-dir ckpt    # resumable: run the same command again

Writes <out>/results.json and the fitted snapshots (policy_gnn_jax.load(<out>) reads them back).
Bad input of any kind ends with one line `error: ...` and exit status 2.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import functools
import pathlib
import sys
import textwrap

from policy_gnn_jax import api, data, methods
from policy_gnn_jax import config as config_lib
from policy_gnn_jax.runtime import checkpoint, runner

# Everything that is the user's input going wrong (all exit 2 with one `error:` line).
INPUT_ERRORS = (data.DataError, ValueError, FloatingPointError)


def require_at_least_one(**counts: int) -> None:
    """Each named command-line count must be >= 1: `--seeds 0` is an error naming `--seeds`."""
    for name, value in counts.items():
        if value < 1:
            raise config_lib.ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {value}.")


def exit_status(command, *args) -> int:
    """Runs `command(*args)` for a script's `main`: 0, or 2 after one `error:` line when the
    input is bad (the policy-gnn command's convention)."""
    try:
        command(*args)
    except INPUT_ERRORS as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


def tune_malloc() -> None:
    """glibc returns XLA's large scratch buffers to the OS after every call, which doubled the
    time of large programs here (docs/performance.md): raise both thresholds before JAX
    allocates anything."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 30)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    except OSError:  # not glibc: nothing to tune
        pass


def _sections_text() -> str:
    return "".join(
        textwrap.fill(
            f"{section}: {', '.join(names)}", 100, initial_indent="  ", subsequent_indent="    "
        )
        + "\n"
        for section, names in config_lib.SECTIONS.items()
    )


def build_parser() -> argparse.ArgumentParser:
    """The command line: the flags most runs need, in groups, and `--set` for every Config field.

    The flags of earlier versions that only set one Config field (`--q-lr`, `--hidden`, ...)
    are still accepted, hidden from `--help`: `--set` covers them.
    """
    p = argparse.ArgumentParser(
        prog="policy-gnn",
        usage="%(prog)s [--dataset NAME] [--method NAME] [--set FIELD=VALUE ...] [options]",
        description="Train Policy-GNN, the random policy or a fixed-depth GCN over many seeds; "
        "write <out>/results.json and the fitted snapshots. Bad input: one `error:` line, exit 2.",
        epilog=EPILOG.format(sections=_sections_text()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run = p.add_argument_group("what to run")
    run.add_argument(
        "--dataset", default="cora", metavar="NAME", help=", ".join(data.DATASET_NAMES)
    )
    run.add_argument(
        "--method",
        default="policy-gnn",
        choices=methods.choices(),
        metavar="NAME",
        help=f"{', '.join(methods.names())} (gcn: one fixed depth; alias fixed-depth)",
    )
    run.add_argument(
        "--backbone",
        default="gcn",
        choices=config_lib.BACKBONES,
        help="gcn: the paper's shared GCN; decoupled: an MLP, then propagation (depths 0..K); "
        "gcn-readout: the legacy readout GCN",
    )
    run.add_argument("--seeds", type=int, default=10, help="how many seeds (10)")
    run.add_argument("--seed", type=int, default=0, help=f"base seed, 0..{runner.MAX_SEED}")
    length = p.add_argument_group("depths and length")
    length.add_argument("--depths", default=None, help="depths a policy picks from (2-5)")
    length.add_argument("--depth", type=int, default=None, help="gcn: the fixed depth (2)")
    length.add_argument("--episodes", type=int, default=1000, help="MDP episodes (1000)")
    length.add_argument("--epochs", type=int, default=None, help="gcn: training epochs (200)")
    where = p.add_argument_group("how it runs")
    where.add_argument(
        "--engine",
        default="auto",
        choices=config_lib.ENGINES,
        help="MDP step on the whole graph or on padded neighbourhoods "
        f"(auto: subgraph above {config_lib.AUTO_SUBGRAPH_NODES} nodes)",
    )
    where.add_argument(
        "--seed-mode",
        default="vmap",
        choices=runner.SEED_MODES,
        help="seeds batched, or one after another (bit-identical on any seed or device count)",
    )
    where.add_argument("--devices", type=int, default=None, help="use at most N devices (all)")
    io = p.add_argument_group("data and output")
    io.add_argument("--data-dir", default=None, help=f"raw files (else ${data.DATA_ENV})")
    io.add_argument("--no-download", action="store_true", help="never download")
    io.add_argument("--out", default=None, help="output folder (a new one under results/)")
    io.add_argument(
        "--checkpoint-dir", default=None, help="checkpoint there; the same command resumes"
    )
    io.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    io.add_argument(
        "--audit",
        action="store_true",
        help="also report the released code's test metric (never a headline)",
    )
    config = p.add_argument_group("any other setting")
    config.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="set a Config field, e.g. --set q_lr=1e-3 --set fanouts=10,10,5 (repeatable)",
    )
    config.add_argument(
        "--show-config", action="store_true", help="print the resolved config by section, exit"
    )
    _add_hidden_flags(p)
    return p


EPILOG = """\
Config fields by section (--show-config prints their values; docs/usage.md explains each):
{sections}
Generated graphs: --csbm-nodes, --csbm-homophily, --csbm-seed, --csbm-features, --csbm-degree.
Checkpoints: --checkpoint-every N chunks of --set episodes_per_call episodes (5).
"""


def _add_hidden_flags(p: argparse.ArgumentParser) -> None:
    """Flags kept working but not shown: one Config field each (`--set` does the same), the
    generated graphs' parameters and the checkpoint period."""
    hidden = argparse.SUPPRESS
    for flag, kind in (
        ("--steps-per-episode", int),
        ("--buffer-size", int),
        ("--gcn-lr", float),
        ("--q-lr", float),
        ("--hidden", int),
        ("--dropout", float),
        ("--input-dropout", float),
        ("--weight-decay", float),
        ("--teleport", float),
        ("--subgraph-nodes", int),
        ("--subgraph-edges", int),
        ("--episodes-per-call", int),
    ):
        p.add_argument(flag, type=kind, default=None, help=hidden)
    p.add_argument("--transition", default=None, choices=config_lib.TRANSITIONS, help=hidden)
    p.add_argument("--fanouts", default=None, help=hidden)
    p.add_argument("--plus-train-depths", choices=config_lib.PLUS_TRAIN_DEPTHS, help=hidden)
    p.add_argument("--plus-signals", choices=config_lib.PLUS_SIGNALS, help=hidden)
    p.add_argument("--plus-reward", choices=config_lib.PLUS_REWARDS, help=hidden)
    p.add_argument("--csbm-nodes", type=int, default=3000, help=hidden)
    p.add_argument("--csbm-homophily", type=float, default=0.8, help=hidden)
    p.add_argument("--csbm-seed", type=int, default=0, help=hidden)
    p.add_argument("--csbm-features", type=int, default=32, help=hidden)
    p.add_argument("--csbm-degree", type=float, default=5.0, help=hidden)
    p.add_argument("--checkpoint-every", type=int, default=5, help=hidden)


def config_from_args(args) -> config_lib.Config:
    """The backbone's preset (`Config.paper`, or `Config.decoupled`), then every flag given,
    then every `--set FIELD=VALUE` (last, so it wins)."""
    if args.backbone == "decoupled":  # with the regularisation tuned for this dataset, if any
        preset = functools.partial(config_lib.Config.decoupled, dataset=args.dataset)
    else:
        preset = config_lib.Config
    values = dict(
        backbone=args.backbone, num_episodes=args.episodes, audit=args.audit, engine=args.engine
    )
    if args.depths is not None:
        values["min_depth"], values["max_depth"] = config_lib.parse_depths(args.depths)
    optional = dict(
        depth=args.depth,
        epochs=args.epochs,
        steps_per_episode=args.steps_per_episode,
        transition=args.transition,
        buffer_size=args.buffer_size,
        q_lr=args.q_lr,
        episodes_per_call=args.episodes_per_call,
        gcn_lr=args.gcn_lr,
        hidden=args.hidden,
        dropout=args.dropout,
        input_dropout=args.input_dropout,
        weight_decay=args.weight_decay,
        teleport=args.teleport,
        plus_train_depths=args.plus_train_depths,
        plus_signals=args.plus_signals,
        plus_reward=args.plus_reward,
        subgraph_nodes=args.subgraph_nodes,
        subgraph_edges=args.subgraph_edges,
        fanouts=None if args.fanouts is None else parse_fanouts(args.fanouts),
    )
    values.update({k: v for k, v in optional.items() if v is not None})
    values.update(config_lib.parse_overrides(args.set))
    return preset(**values)


def show_config(config: config_lib.Config) -> str:
    """The config's values by section, one `field = value` a line."""
    lines = []
    for section, names in config_lib.SECTIONS.items():
        lines.append(f"[{section}]")
        lines += [f"  {name} = {getattr(config, name)!r}" for name in names]
    return "\n".join(lines)


def parse_fanouts(text: str) -> tuple[int, ...]:
    """ "10,10,5" -> (10, 10, 5); anything else is a ConfigError."""
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise config_lib.ConfigError(
            f"--fanouts must be whole numbers separated by commas, e.g. 10,10,5; got {text!r}."
        ) from None


def _check_args(args) -> None:
    """Everything that can be refused before loading data or training."""
    if not 0 <= args.seed <= runner.MAX_SEED:
        raise runner.ResourceError(f"--seed must be in 0..{runner.MAX_SEED}, got {args.seed}.")
    if args.seeds < 1:
        raise runner.ResourceError(f"--seeds must be >= 1, got {args.seeds}.")
    if args.checkpoint_every < 1:
        raise config_lib.ConfigError(
            f"--checkpoint-every must be >= 1, got {args.checkpoint_every}."
        )
    data.check_name(args.dataset)


def main(argv=None) -> int:
    tune_malloc()
    args = build_parser().parse_args(argv)
    out = None
    try:
        _check_args(args)
        config = config_from_args(args)
        if args.show_config:
            print(show_config(config))
            return 0
        out = pathlib.Path(args.out or _default_out(args, config))
        made_out = not out.exists()
        checkpoint.check_writable_dir(out)
        ds = data.load_dataset(
            args.dataset,
            data_dir=args.data_dir,
            download=not args.no_download,
            **_generator_args(args),
        )
        print(ds.summary(), flush=True)
        fitted = api.fit(
            ds,
            config,
            method=args.method,
            seeds=args.seeds,
            seed=args.seed,
            progress=not args.no_progress,
            checkpoint_dir=args.checkpoint_dir,
            checkpoint_every=args.checkpoint_every,
            devices=args.devices,
            seed_mode=args.seed_mode,
        )
        fitted.save(out)
    except INPUT_ERRORS as err:
        if out is not None and made_out:
            _remove_if_empty(out)  # a failed run leaves no empty timestamped folder behind
        print(f"error: {err}", file=sys.stderr)
        return 2
    record = fitted.record
    print(f"results: {out / 'results.json'}")
    if "audit" in record:
        a = record["audit"]
        print(
            f"audit (reference protocol, NOT a headline): macro accuracy best-of-run "
            f"{a['macro_accuracy_best_of_run']['mean']:.4f} ± "
            f"{a['macro_accuracy_best_of_run']['std']:.4f}; macro accuracy of the selected "
            f"snapshot {a['macro_accuracy_of_selected_snapshot']['mean']:.4f}\n{a['explanation']}"
        )
    print(methods.summary_line(record))
    return 0


def _generator_args(args) -> dict:
    if args.dataset.lower() == "csbm":
        return {
            "num_nodes": args.csbm_nodes,
            "homophily": args.csbm_homophily,
            "seed": args.csbm_seed,
            "num_features": args.csbm_features,
            "avg_degree": args.csbm_degree,
        }
    if args.dataset.lower() == "planted":
        return {"seed": args.csbm_seed}
    return {}


def _remove_if_empty(folder: pathlib.Path) -> None:
    try:
        folder.rmdir()  # refuses (OSError) when anything was written there
    except OSError:
        pass


def _default_out(args, config) -> pathlib.Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    tag = methods.get(args.method).describe(config).replace(" depth ", "-d")
    if args.backbone != "gcn":
        tag = f"{args.backbone}-{tag}"
    return pathlib.Path("results") / f"{args.dataset.lower()}-{tag}-{stamp}"


if __name__ == "__main__":
    sys.exit(main())
