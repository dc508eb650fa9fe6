"""Every fixed depth 0..K trained on each split of a graph, the runs the headroom analysis and
the heterophily study start from, cached per split beside the study's other runs.

The splits not cached yet train each depth as one compiled program (`split_sweep.fit_splits`):
under "map" each split's result equals its run alone bit for bit, so a cache means the same
however it was made, in the seed mode its tag names.
"""

from __future__ import annotations

import dataclasses
import io
import json
import pathlib

import numpy as np

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import split_sweep
from policy_gnn_jax.runtime import outputs, records, seed_axis, study_files


def fixed_depths(
    ds, cfg: config_lib.Config, seeds: int, folder: pathlib.Path, overwrite: bool = False
) -> dict:
    """Every fixed depth 0..K on one split: class probabilities [D, S, N, C] of every node, and
    each depth's validation and test scores per seed [D, S] (the dataset's metric). Cached in
    `folder` (`cache_path`)."""
    return fixed_depths_of_splits({0: ds}, cfg, seeds, {0: folder}, "apart", overwrite)[0]


def cache_path(folder: pathlib.Path, cfg: config_lib.Config, seeds: int) -> pathlib.Path:
    """A cache per seed count and depth range, so that runs of one never replace another's."""
    return pathlib.Path(folder) / f"fixed-s{seeds}-d{cfg.min_depth}-{cfg.max_depth}.npz"


def fixed_depths_of_splits(
    datasets: dict,
    cfg: config_lib.Config,
    seeds: int,
    folders: dict,
    split_map: str = "map",
    overwrite: bool = False,
) -> dict:
    """`fixed_depths` of every split (split -> dataset, split -> its cache folder). The splits
    not cached yet train each depth as one program (`split_sweep`, `split_map`); under "map"
    each split's result equals its run alone bit for bit, so the caches mean the same. A cache
    of another run (config or data) is refused before any training unless `overwrite`."""
    depths = np.arange(cfg.min_depth, cfg.max_depth + 1)
    result = {}
    for k, ds in datasets.items():
        tag, shapes = _fixed_tag(ds, cfg, seeds), _shapes(len(depths), seeds, ds)
        path = cache_path(folders[k], cfg, seeds)
        result[k] = _cached_fixed(path, tag, shapes, depths, overwrite)
    todo = [k for k in datasets if result[k] is None]
    if not todo:
        return result
    parts = {k: {"probs": [], "val": [], "test": []} for k in todo}
    for depth in depths:
        fits = split_sweep.fit_splits([datasets[k] for k in todo],
                                      dataclasses.replace(cfg, depth=int(depth)), method="gcn",
                                      seeds=seeds, progress=False, split_map=split_map)  # fmt: skip
        for k, fitted in zip(todo, fits, strict=True):
            logits = fitted.predict_logits(np.arange(datasets[k].num_nodes)).astype(np.float64)
            logits -= logits.max(-1, keepdims=True)
            parts[k]["probs"].append(np.exp(logits) / np.exp(logits).sum(-1, keepdims=True))
            parts[k]["val"].append(fitted.record["val_metric"]["per_seed"])
            parts[k]["test"].append(fitted.record["test_metric"]["per_seed"])
    for k in todo:
        result[k] = {"probs": np.stack(parts[k]["probs"]).astype(np.float32),
                     "val": np.array(parts[k]["val"]), "test": np.array(parts[k]["test"]),
                     "depths": depths}  # fmt: skip
        # Which splits shared a batch is kept beside the numbers (under "vmap" it can change
        # their rounding), not in the tag: a cache is reused whatever batching made it.
        batch = np.array(todo if split_map == "vmap" and len(todo) > 1 else [k])
        buffer = io.BytesIO()
        tag = np.array(_fixed_tag(datasets[k], cfg, seeds))
        np.savez_compressed(buffer, tag=tag, split_batch=batch, **result[k])
        folders[k].mkdir(parents=True, exist_ok=True)
        outputs.atomic_write_bytes(cache_path(folders[k], cfg, seeds), buffer.getvalue())
    return result


def _fixed_tag(ds, cfg: config_lib.Config, seeds: int) -> str:
    # The flags and the seed mode change the bits: a cache says them (one that does not is of
    # unknown flags, so not this run's).
    made = [dataclasses.asdict(cfg), seeds, ds.fingerprint(), {"xla_flags": records.xla_flags()}]
    made += [{"seed_mode": seed_axis.seed_mode_for(None)}]
    return json.dumps(made, sort_keys=True)


def _shapes(num_depths: int, seeds: int, ds) -> dict:
    return {"probs": (num_depths, seeds, ds.num_nodes, ds.num_classes),
            "val": (num_depths, seeds), "test": (num_depths, seeds)}  # fmt: skip


def _cached_fixed(
    path: pathlib.Path, tag: str, shapes: dict, depths, overwrite: bool
) -> dict | None:
    """The fixed-depth results cached at `path` for exactly `tag`, else None
    (`study_files.read_cache`: a damaged cache is made again, another run's refused)."""
    expected = {**shapes, "depths": depths}
    return study_files.read_cache(path, tag, expected, overwrite, "the fixed-depth runs")
