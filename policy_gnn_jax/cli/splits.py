"""`--splits`: one run per fixed split of a benchmark, then the mean ± std over splits.

The heterophilous benchmarks come with ten fixed splits, and their literature reports the mean
and standard deviation over them. Each split is a complete run of the command (all `--seeds`
seeds) saved in `<out>/split-<K>/` as a loadable fit; `<out>/results.json` then summarises them.
A split whose folder already holds the same run (same data, config, method, seeds and base
seed: the saved fit's run fingerprint) is read back instead of trained again, so an interrupted
sweep resumes where it stopped by running the same command.
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

from policy_gnn_jax import config, data, methods
from policy_gnn_jax.runtime import checkpoint, outputs, records, saved_fit


def parse_splits(text: str, available: int) -> list[int]:
    """`all`, `A-B` or `A,B,...` as split indices, each in 0..available-1."""
    text = text.strip()
    if text == "all":
        return list(range(available))
    low = high = 0
    try:
        if "-" in text:
            low, high = (int(part) for part in text.split("-"))
            # never more than one past the splits that exist: the check below names it
            chosen = list(range(low, min(high, max(low, available)) + 1))
        else:
            chosen = [int(part) for part in text.split(",")]
    except ValueError:
        chosen = []
    if low > high:
        raise config.ConfigError(f"--splits {text}: a range A-B needs A <= B, e.g. 0-9.")
    if not chosen or len(set(chosen)) != len(chosen):
        raise config.ConfigError(
            f"--splits must be all, A-B or distinct A,B,..., got {text!r}: e.g. --splits all."
        )
    wrong = [k for k in chosen if not 0 <= k < available]
    if wrong:
        raise config.ConfigError(
            f"--splits names split {wrong[0]}, but the dataset has splits 0..{available - 1}."
        )
    return chosen


def run_splits(args, cfg: config.Config, out: pathlib.Path, load, fit) -> dict:
    """Fits every split of `args.splits` (`load(split)` gives its dataset, `fit(ds)` its fit),
    each saved in `out/split-K`, and writes `out/results.json` over the splits; returns it."""
    chosen = parse_splits(args.splits, data.heterophily.num_splits(args.dataset))
    method = methods.get(args.method).name
    prepared = methods.get(method).prepare(cfg)  # the config as the method runs it
    started = time.perf_counter()
    per_split, reused = [], []
    for k in chosen:
        ds = load(k)
        folder = out / f"split-{k}"
        record = _reusable(folder, ds, prepared, method, args)
        if record is None:
            outputs.check_no_result(folder, args.overwrite, "--overwrite")  # before training
            fitted = fit(ds)
            # Once a split is replaced, what `out` held no longer describes the split folders;
            # a split that failed (diverged, refused, interrupted) replaced nothing.
            _drop_summary(out)
            fitted.save(folder, overwrite=args.overwrite)
            record = fitted.record
        else:
            reused.append(k)
        print(f"split {k}: {records.summary_line(record)}", flush=True)
        per_split.append(_split_row(k, folder, record))
    summary = summarise(per_split, record, method, args)
    summary["reused_splits"] = reused
    summary["wall_time_s"] = time.perf_counter() - started
    _drop_summary(out)
    checkpoint.atomic_write_text(out / "results.json", json.dumps(summary, indent=2))
    return summary


def _reusable(folder: pathlib.Path, ds, prepared, method: str, args) -> dict | None:
    """The record of the fit in `folder` if it is this split's run. A damaged one is trained
    again under --overwrite, else refused with what to do."""
    try:
        return saved_fit.saved_record_of(
            folder, ds, prepared, method, args.seeds, args.seed, args.seed_mode
        )
    except checkpoint.CheckpointError as err:
        if args.overwrite:
            print(f"warning: {folder} is damaged; it is trained again ({err})", file=sys.stderr)
            return None
        raise checkpoint.CheckpointError(
            f"{folder} holds a damaged fit ({err}) Delete {folder}, or pass --overwrite to "
            f"train that split again."
        ) from None


def _drop_summary(out: pathlib.Path) -> None:
    """Removes what `out` held over the split folders: a sweep's results.json, or a single
    run's files (replaced by --overwrite). The manifest first, so that the folder is never
    taken for that fit again."""
    for name in ("fit.json", "snapshots.npz", "dataset.npz", "results.json"):
        (out / name).unlink(missing_ok=True)


def _split_row(k: int, folder: pathlib.Path, record: dict) -> dict:
    return {
        "split": k,
        "folder": folder.name,
        "test": record["test_accuracy"]["mean"],
        "test_std_over_seeds": record["test_accuracy"]["std"],
        "val": record["val_accuracy"]["mean"],
        "wall_time_s": record["wall_time_s"],
    }


def summarise(per_split: list[dict], last: dict, method: str, args) -> dict:
    """The sweep's record: each split's mean over seeds, then their mean ± std over splits."""
    return {
        "kind": "splits",
        "dataset": last["dataset"],
        "method": method,
        "metric": last.get("metric", "accuracy"),
        "config": last["config"],
        "seeds": args.seeds,
        "seed": args.seed,
        "seed_mode": args.seed_mode,
        "splits": [row["split"] for row in per_split],
        # mean ± std over splits of each split's mean over seeds (the literature's protocol)
        "test_accuracy": records.mean_std([row["test"] for row in per_split], per="per_split"),
        "val_accuracy": records.mean_std([row["val"] for row in per_split], per="per_split"),
        "per_split": per_split,
        "versions": last.get("versions"),
    }


def summary_line(summary: dict) -> str:
    t, metric = summary["test_accuracy"], records.METRIC_NAMES[summary["metric"]]
    return (
        f"{summary['dataset']} {summary['method']}: test {metric} {t['mean']:.4f} ± "
        f"{t['std']:.4f} over {len(summary['splits'])} splits ({summary['seeds']} seeds each; "
        f"val {summary['val_accuracy']['mean']:.4f}, {summary['wall_time_s']:.1f} s)"
    )
