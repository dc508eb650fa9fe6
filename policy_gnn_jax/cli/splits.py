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
import re
import time

from policy_gnn_jax import config, data, methods, split_sweep
from policy_gnn_jax.runtime import outputs, records, reuse


def has_splits(args) -> bool:
    """Whether the dataset is a benchmark with fixed splits (`--split`, `--splits`)."""
    return args.dataset.lower() in data.HETEROPHILY_NAMES or data.heterophily.is_npz_path(
        args.dataset
    )


def parse_splits(text: str, available: int) -> list[int]:
    """`all`, `A-B` or `A,B,...` as split indices, each in 0..available-1."""
    text = text.strip()
    if text == "all":
        return list(range(available))
    if not re.fullmatch(r"[0-9]+-[0-9]+|[0-9]+(,[0-9]+)*", text):  # int() also reads 0_1, ٣
        raise config.ConfigError(
            f"--splits must be all, A-B or distinct A,B,... of plain digits, got {text!r}: "
            f"e.g. --splits all."
        )
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
    each saved in `out/split-K`, and writes `out/results.json` over the splits; returns it.

    The splits not saved already are compiled and run as one program (`split_sweep`), unless
    `--split-map apart` or `--checkpoint-dir` (each split checkpoints in a folder of its own)."""
    chosen = parse_splits(args.splits, data.heterophily.num_splits(args.dataset))
    method = methods.get(args.method).name
    prepared = methods.get(method).run_config(cfg)  # the config as the method runs it
    started = time.perf_counter()
    for k in chosen:  # refused before anything loads
        if (out / f"split-{k}").exists() and not (out / f"split-{k}").is_dir():
            raise outputs.CheckpointError(
                f"{out / f'split-{k}'} is a file where split {k}'s folder goes: move it away, "
                f"or choose another --out."
            )
    datasets = {k: load(k) for k in chosen}
    batch = _batch_of(args, list(datasets.values()))
    saved = {k: _reusable(out / f"split-{k}", datasets[k], prepared, method, args, batch)
             for k in chosen}  # fmt: skip
    missing = [k for k in chosen if saved[k] is None]
    for k in missing:  # refused before anything trains
        outputs.check_no_result(out / f"split-{k}", args.overwrite, "--overwrite")
    # Under vmap a split's bits depend on its batch, which is every chosen split (`batch`): a
    # missing split is trained with all of them, as the first sweep did (the saved ones come out
    # the same again), and uneven splits are not joined.
    joins = missing and (batch is not None or _split_map(args) != "vmap")
    trained = _fit_missing(args, cfg, datasets, chosen if batch else missing) if joins else {}
    per_split = []
    for k in chosen:
        record = saved[k]
        if record is None:
            fitted = trained[k] if k in trained else fit(datasets[k])
            # Once a split is replaced, what `out` held no longer describes the split folders;
            # a split that failed (diverged, refused, interrupted) replaced nothing.
            _drop_summary(out)
            fitted.save(out / f"split-{k}", overwrite=args.overwrite)
            record = fitted.record
        print(f"split {k}: {records.summary_line(record)}", flush=True)
        per_split.append(_split_row(k, record))
    summary = summarise(per_split, record, method, args)
    summary["reused_splits"] = [k for k in chosen if saved[k] is not None]
    summary["wall_time_s"] = time.perf_counter() - started
    _drop_summary(out)
    outputs.atomic_write_text(out / "results.json", json.dumps(summary, indent=2))
    return summary


def _split_map(args) -> str:
    """How the splits run (`split_sweep.SPLIT_MAPS`): apart where each checkpoints."""
    return "apart" if args.checkpoint_dir else args.split_map


def _batch_of(args, datasets) -> list[int] | None:
    """The `split_batch` this command's fits record: the splits batched together under vmap
    (their bits depend on the batch); None where a split's bits are those of a run of its own."""
    if _split_map(args) != "vmap" or len(datasets) < 2 or not split_sweep.same_sizes(datasets):
        return None
    return [ds.split for ds in datasets]


def _fit_missing(args, cfg, datasets: dict, splits: list[int]) -> dict:
    """split -> its `Fit` for `splits` run as one program, where the command joins them; {}
    where they run one by one (`fit`, as each is saved)."""
    joined = [datasets[k] for k in splits]
    if _split_map(args) == "apart" or len(splits) < 2 or not split_sweep.same_sizes(joined):
        return {}
    fits = split_sweep.fit_splits(
        joined,
        cfg,
        method=args.method,
        seeds=args.seeds,
        seed=args.seed,
        progress=not args.no_progress,
        devices=args.devices,
        seed_mode=args.seed_mode,
        split_map=args.split_map,
    )
    return dict(zip(splits, fits, strict=True))


def _reusable(folder: pathlib.Path, ds, prepared, method: str, args, batch) -> dict | None:
    """The record of the fit in `folder` if it is this split's run (and was run with the same
    splits, where its bits depend on them). A damaged one is trained again under --overwrite,
    else refused with what to do."""
    record = reuse.reusable_record(
        folder, ds, prepared, method, args.seeds, args.seed, args.seed_mode, args.overwrite, "fit"
    )
    if record is None or record.get("split_batch") == batch:
        return record
    if args.overwrite:
        return None
    made = record.get("split_batch")
    made = f"--split-map vmap with splits {made}" if made else "--split-map map or apart"
    raise outputs.CheckpointError(
        f"{folder} holds this split's run made with {made}; under vmap a split's rounding "
        f"depends on the splits batched with it, so it is not this command's result. Run it as "
        f"it was made, choose another --out, or pass --overwrite to train it again."
    )


def _drop_summary(out: pathlib.Path) -> None:
    """Removes what `out` held over the split folders: a sweep's results.json, or a single
    run's files (replaced by --overwrite). The manifest first, so that the folder is never
    taken for that fit again."""
    for name in ("fit.json", "snapshots.npz", "dataset.npz", "results.json"):
        (out / name).unlink(missing_ok=True)


def _split_row(k: int, record: dict) -> dict:
    return {
        "split": k,
        "folder": f"split-{k}",
        "test": record["test_metric"]["mean"],
        "test_std_over_seeds": record["test_metric"]["std"],
        "val": record["val_metric"]["mean"],
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
        "test_metric": records.mean_std([row["test"] for row in per_split], per="per_split"),
        "val_metric": records.mean_std([row["val"] for row in per_split], per="per_split"),
        "per_split": per_split,
        "versions": last.get("versions"),
    }


def summary_line(summary: dict) -> str:
    t, metric = summary["test_metric"], records.METRIC_NAMES[summary["metric"]]
    return (
        f"{summary['dataset']} {summary['method']}: test {metric} {t['mean']:.4f} ± "
        f"{t['std']:.4f} over {len(summary['splits'])} splits ({summary['seeds']} seeds each; "
        f"val {summary['val_metric']['mean']:.4f}, {summary['wall_time_s']:.1f} s)"
    )
