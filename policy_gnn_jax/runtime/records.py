"""The results record of a sweep (what results.json holds), and its one-line summary."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import pathlib
import platform

import jax
import numpy as np

from policy_gnn_jax.runtime import compilation, outputs

_PACKAGES = ("jax", "jaxlib", "flax", "optax", "chex", "jraph", "numpy", "scipy")


def package_versions() -> dict:
    versions = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    versions["jax_backend"] = jax.default_backend()
    versions["device"] = jax.devices()[0].device_kind
    # The user's own XLA flags, if any: they can change kernels and so the bits of a GPU run.
    versions["xla_flags"] = xla_flags()
    return versions


_THIS_PROCESS = object()


def xla_flags(flags=_THIS_PROCESS):
    """The XLA flags `flags` (a recorded value; default: this process's XLA_FLAGS) say, spaces
    normalised: None for none (unset or blank), so flags that differ only in spacing compare
    equal. A recorded value that is not a string (None: none) is returned as it is."""
    flags = os.environ.get("XLA_FLAGS", "") if flags is _THIS_PROCESS else flags
    return (" ".join(flags.split()) or None) if isinstance(flags, str) else flags


def mean_std(values, per: str = "per_seed") -> dict:
    """{"mean", "std", `per`: the values}; `per` names what they are one of (seeds, splits)."""
    values = np.asarray(values, dtype=np.float64)
    return {
        "mean": float(values.mean()),
        "std": float(values.std()),
        per: [float(v) for v in values],
    }


def check_replaced_entries(old: dict, new: dict, path, overwrite: bool) -> None:
    """A results file that runs merge into (one entry per dataset, say) keeps every entry: one
    that a new run would replace by a different one is refused unless `overwrite` (one that
    only adds fields to it loses nothing)."""
    changed = [key for key in new if key in old and not _kept_in(old[key], new[key])]
    if changed and not overwrite:
        raise outputs.CheckpointError(
            f"{path} already holds {', '.join(map(str, changed))} from another run, which this "
            f"one would replace; nothing was written. Pass --overwrite to replace "
            f"{'it' if len(changed) == 1 else 'them'}, or name another file (runs already "
            f"saved are reused: the same command with --overwrite does not train them again)."
        )


def _kept_in(old, new) -> bool:
    """Whether `new` holds all of `old`: the same, or the same with fields added at any level
    (an entry written before a field was recorded; a dataset's rows with the policies added)."""
    return _holds(_as_json(new), _as_json(old))


def _holds(new, old) -> bool:
    if isinstance(old, dict) and isinstance(new, dict):
        return all(key in new and _holds(new[key], value) for key, value in old.items())
    return old == new


def _as_json(value):
    return json.loads(json.dumps(value))


def build(
    ds,
    config,
    method: str,
    num_seeds: int,
    seed: int,
    metrics,
    results,
    wall,
    kernels: str,
    engine: str = "full",
    seed_mode: str = "vmap",
    method_fields: dict | None = None,
    options: dict | None = None,
) -> dict:
    """The results record (docs/usage.md, "Results") of one finished sweep: the fields every
    method has, then `method_fields` (the method's own, `Method.record_fields`). `options`: the
    XLA compile options the run used."""
    record = {
        "dataset": ds.name,
        "method": method,
        "config": dataclasses.asdict(config),
        "seed": seed,
        "seeds": num_seeds,
        "test_metric": mean_std(results["test_metric"]),
        "val_metric": mean_std(results["val_metric"]),
        "wall_time_s": wall,
        "versions": package_versions(),
        "dataset_summary": ds.summary(),
        "dataset_fingerprint": ds.fingerprint(),
        # The folder(s) the dataset's files were read from ("" for a graph built in memory).
        "data_source": getattr(ds, "source", ""),
        # Which fixed split of a benchmark that has several (None where there is one).
        "split": getattr(ds, "split", None),
        # What test_metric and val_metric measure: "accuracy", or "roc_auc" (two classes).
        "metric": getattr(ds, "metric", "accuracy"),
        # "gather": every float sum in a fixed order; "scatter": segment sums (atomics on a GPU
        # unless compiled with deterministic ops).
        "kernels": kernels,
        # The XLA options every program was compiled with (None: XLA's defaults).
        "compiler_options": options,
        # JAX's persistent compilation cache the programs were read from or written to (None:
        # off): a warm cache gives the bits of a cold one.
        "compilation_cache": jax.config.jax_compilation_cache_dir or None,
        # True only for a configuration shown bit-identical across two processes on this kind
        # of backend (`compilation.bit_identical_across_processes` says by what).
        "bit_identical_across_processes": compilation.bit_identical_across_processes(
            options, kernels, engine
        ),
        # "full": each MDP step on the whole graph; "subgraph": on padded neighbourhoods
        # (subgraph.py), the only engine whose step cost does not grow with the graph.
        "engine": engine,
        # "vmap": seeds batched; "map": one after another (bit-identical on any number of seeds
        # and devices). The two round batched reductions differently, so their bits differ.
        "seed_mode": seed_mode,
    }
    record.update(method_fields or {})
    # JSON-native (tuples become lists), so the record equals what results.json reads back.
    return json.loads(json.dumps(record))


def depth_fields(config, results) -> dict:
    """The allowed depths and the share of test nodes the selected policy gives each."""
    counts = results["test_depth_counts"]  # [S, A]
    share = counts / np.maximum(counts.sum(1, keepdims=True), 1)
    return {
        "depths": list(range(config.min_depth, config.max_depth + 1)),
        "test_depth_distribution": {"mean": share.mean(0).tolist(), "per_seed": share.tolist()},
    }


def save(record: dict, out_dir: str | pathlib.Path) -> pathlib.Path:
    """Writes <out_dir>/results.json atomically (a crash never leaves a truncated file)."""
    out = outputs.check_writable_dir(out_dir)
    return outputs.atomic_write_json(out / "results.json", record)


# How a record's metric is named in text.
METRIC_NAMES = {"accuracy": "accuracy", "roc_auc": "ROC AUC"}


def summary_line(record: dict, label: str | None = None) -> str:
    """One line: dataset, method (its `label`, e.g. "gcn depth 2"), test score, time."""
    t = record["test_metric"]
    metric = METRIC_NAMES[record.get("metric", "accuracy")]
    name = label or record["method"]
    backbone = record["config"]["backbone"]
    if backbone != "gcn":
        name += f" ({backbone} backbone)"
    resumed = record.get("resumed")
    time = f"{record['wall_time_s']:.1f} s"
    if resumed:  # this process's time, and every process's since the run began
        time += f"; resumed, {resumed['wall_time_s_total']:.1f} s in all"
    return (
        f"{record['dataset']} {name}: test {metric} {t['mean']:.4f} ± {t['std']:.4f} over "
        f"{record['seeds']} seeds (val {record['val_metric']['mean']:.4f}, {time})"
    )
