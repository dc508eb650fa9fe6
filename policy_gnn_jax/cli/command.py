"""The `policy-gnn` command (also `python experiments/run.py`): train over many seeds in one go.

policy-gnn --dataset cora                          # Policy-GNN, paper defaults, 10 seeds
policy-gnn --dataset cora --method gcn --depth 2
policy-gnn --dataset csbm --method random --episodes 50
policy-gnn --dataset cora --checkpoint-dir ckpt    # resumable: run the same command again

Writes <out>/results.json and the fitted snapshots (policy_gnn_jax.load(<out>) reads them back).
Bad input of any kind ends with one line `error: ...` and exit status 2.
"""

from __future__ import annotations

import functools
import os
import pathlib
import sys

import jax

from policy_gnn_jax import api, data, fits, methods
from policy_gnn_jax import config as config_lib
from policy_gnn_jax.cli import splits
from policy_gnn_jax.cli.checks import check_args, warn_unused_flags
from policy_gnn_jax.cli.flags import (
    build_parser,
    config_from_args,
    show_config,
)
from policy_gnn_jax.cli.interrupts import interrupted_line, result_stamp
from policy_gnn_jax.cli.process import (  # noqa: F401  (the scripts' helpers, as cli.NAME too)
    FAILURES,
    Terminated,
    error_line,
    exit_now,
    exit_status,
    finish,
    guarded,
    require_at_least_one,
    stopped_status,
    tune_malloc,
)
from policy_gnn_jax.runtime import (
    arguments,
    cluster,
    locks,
    outputs,
    processes,
    runner,
    seed_axis,
)


def main(argv=None) -> int:
    tune_malloc()
    with guarded():
        return _main(argv)


def _main(argv) -> int:
    args = build_parser().parse_args(argv)
    out, made_out, before = None, False, None
    try:
        if not args.show_config:  # which needs no device
            _join_processes(args)
            start_backend()
        arguments.check_jax_modes()  # before any data is loaded
        check_args(args)
        config = config_from_args(args)
        warn_unused_flags(args)  # after every refusal: a refused command's one line is its error
        if args.show_config:  # as the method runs it (the random policy sets its own switch)
            print(show_config(methods.get(args.method).run_config(config)))
            return 0
        args.seed_mode = seed_axis.seed_mode_for(args.seed_mode)
        if cluster.index() != 0:  # process 0 writes the results, the others nothing
            return _run_worker(args, config)
        if args.out:
            out = pathlib.Path(args.out).expanduser()
            made_out = not out.exists()
        else:  # a new folder of its own: runs started together never share one
            out, made_out = outputs.new_folder("results", _default_stem(args, config)), True
        outputs.check_no_result(out, args.overwrite, "--overwrite")  # before creating anything
        before = result_stamp(args, out)  # what a result there was before this run
        outputs.check_writable_dir(out)
        with locks.FolderLock(out, "output folder"):
            outputs.check_no_result(out, args.overwrite, "--overwrite")  # again, as the owner
            cluster.agree()  # the other processes start only if this one can write
            if args.splits is not None:  # one saved fit per split, and results.json over them
                result = splits.run_splits(
                    args, config, out, functools.partial(_load, args), _fitter(args, config)
                )
            else:
                fitted = _fitter(args, config)(_load(args))
                fitted.save(out, overwrite=args.overwrite)
                result = fitted.record
        _report(result, out)  # a stop here: `interrupted_line` sees the result saved
    except FAILURES as err:
        return _fail(error_line(err), out if made_out else None, 2)
    except KeyboardInterrupt as stop:
        code = stopped_status(stop)
        return _fail(interrupted_line(args, out, before), out if made_out else None, code)
    return 0


def _join_processes(args) -> None:
    """Joins the other processes of a run over several (the three flags, or a cluster
    launcher's environment); a run of one process does nothing here."""
    flags = (args.coordinator, args.num_processes, args.process_id)
    if args.num_processes is not None and 0 < args.seeds < args.num_processes:  # before waiting
        raise config_lib.ConfigError(
            f"{args.seeds} seeds cannot be shared by {args.num_processes} processes: use at "
            f"least {args.num_processes} seeds, or fewer processes."
        )
    if args.num_processes is not None and args.num_processes > 1 and args.splits is not None:
        raise config_lib.ConfigError(  # before waiting for the others, who refuse it too
            "--splits runs in one process: over several processes, run one --split K at a time."
        )
    if any(f is not None for f in flags) or cluster.launched_by_cluster():
        cluster.connect(*flags)


def _run_worker(args, config) -> int:
    """A process other than process 0: trains its block of the seeds and hands them over."""
    cluster.agree()
    _fitter(args, config)(_load(args))
    low, high = processes.seed_block(args.seeds)
    print(f"process {cluster.index()} of {cluster.count()}: seeds {low}..{high - 1} done; "
          f"process 0 writes the results.")  # fmt: skip
    return 0


def _tell_the_others(message: str) -> None:
    try:
        cluster.agree(refusal=message)
    except Exception:  # the others are gone already: this process's own line is what matters
        pass


def _load(args, split: int | None = None) -> data.Dataset:
    generator = _generator_args(args)
    if split is not None:
        generator["split"] = split
    ds = data.load_dataset(
        args.dataset, data_dir=args.data_dir, download=not args.no_download, **generator
    )
    print(ds.summary() + (f" (read from {ds.source})" if ds.source else ""), flush=True)
    return ds


def _fitter(args, config):
    """`fit(ds)` as the command line asks (each split checkpoints in a folder of its own)."""

    def fit(ds: data.Dataset) -> fits.Fit:
        checkpoint_dir = args.checkpoint_dir
        if checkpoint_dir and args.splits is not None:
            checkpoint_dir = pathlib.Path(checkpoint_dir) / f"split-{ds.split}"
        fitted = api.fit(
            ds,
            config,
            method=args.method,
            seeds=args.seeds,
            seed=args.seed,
            progress=not args.no_progress,
            checkpoint_dir=checkpoint_dir,
            checkpoint_every=args.checkpoint_every,
            devices=args.devices,
            seed_mode=args.seed_mode,
        )
        if args.dataset.lower() in ("csbm", "planted"):  # how to make the same graph again
            fitted = fitted.with_record(generator=_generator_args(args))
        return fitted

    return fit


def _fail(message: str, made: pathlib.Path | None, code: int) -> int:
    """One `error:` line; an output folder this run made and left empty is removed. The other
    processes of a run over several hear of it, if they have not started."""
    if made is not None and made.is_dir() and not any(made.iterdir()):
        made.rmdir()
    _tell_the_others(message)
    print(f"error: {message}", file=sys.stderr)
    return code


def entry() -> int:
    """The `policy-gnn` command as a program: `main`, then an immediate exit, so that tearing
    JAX down half-way (XLA may still be compiling on its threads after a stop) cannot crash the
    process after its last line. Every file was written and closed before `main` returned."""
    code = main()
    cluster.leave()  # the others may still be reading this process's seeds
    exit_now(code)
    return code


def start_backend() -> None:
    """Starts JAX's backend now, so a device that is not there is one clear error."""
    try:
        jax.devices()
    except (RuntimeError, AssertionError) as err:  # jax asserts when JAX_PLATFORMS names none
        # JAX still reads the older JAX_PLATFORM_NAME too: name the variable that was set.
        variables = [v for v in ("JAX_PLATFORMS", "JAX_PLATFORM_NAME") if os.environ.get(v)]
        named = ", ".join(f"{v}={os.environ[v]}" for v in variables)
        detail = str(err).splitlines()[0][:200] if str(err) else "no such backend"
        raise runner.ResourceError(
            f"JAX could not start a backend{' for ' + named if named else ''} ({detail}). "
            f"{'Unset ' + ' and '.join(variables) if variables else 'Set JAX_PLATFORMS=cpu'} to "
            f"use the devices this machine has, or install the jaxlib for that device."
        ) from None


def _report(record: dict, out: pathlib.Path) -> None:
    print(f"results: {out / 'results.json'}")
    if record.get("kind") == "splits":
        print(splits.summary_line(record))
        return
    if "audit" in record:
        a = record["audit"]
        print(
            f"audit (reference protocol, NOT a headline): macro accuracy best-of-run "
            f"{a['macro_accuracy_best_of_run']['mean']:.4f} ± "
            f"{a['macro_accuracy_best_of_run']['std']:.4f}; macro accuracy of the selected "
            f"snapshot {a['macro_accuracy_of_selected_snapshot']['mean']:.4f}\n{a['explanation']}"
        )
    print(methods.summary_line(record))


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
    if splits.has_splits(args):
        return {"split": args.split or 0}
    return {}


def _default_stem(args, config) -> str:
    tag = methods.get(args.method).describe(config).replace(" depth ", "-d")
    if config.backbone != "gcn":  # the config's: --set backbone= names it too
        tag = f"{config.backbone}-{tag}"
    # a file's name without its folder, or the output would land beside the data file
    path = pathlib.Path(args.dataset)
    name = path.stem if data.heterophily.is_npz_path(args.dataset) else path.name
    name = name or outputs.real_path(path).name or "dataset"  # "." or "..": the folder's own name
    split = f"-split{args.split or 0}" if splits.has_splits(args) else ""
    split = "-splits" if args.splits is not None else split
    return f"{name.lower()}{split}-{tag}"
