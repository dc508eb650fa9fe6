"""`fit_splits`: one method fitted on several splits of a graph as one compiled program.

    fits = policy_gnn_jax.split_sweep.fit_splits(
        [load_dataset("texas", split=k) for k in range(10)], config, method="gcn", seeds=3)

Each split gets the `Fit` that `fit` would give it (its record, its selected snapshots, saveable
and loadable), but the splits run as one program, compiled once: a trainer takes the graph as
data (`Trainer.data`), so the splits' data are stacked along a split axis and the one program
maps over it (`join`). How it maps is `split_map`:
- "map" (default): one after another inside the program. Each split's result is bit-identical to
  `fit` on that split alone, so how splits are grouped never changes a number.
- "vmap": batched like seeds, which an accelerator runs at once. A split's float rounding may then
  depend on the splits beside it (as a seed's does on the seeds beside it under vmap), so each
  record names them (`split_batch`).
- "apart": each split compiled and run on its own (`fit`, one after another).
Splits whose data differ in shape (different split sizes) run apart whatever `split_map` says.
"""

from __future__ import annotations

import functools
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from policy_gnn_jax import api, fits, methods
from policy_gnn_jax import config as config_lib
from policy_gnn_jax.metrics import shapes
from policy_gnn_jax.runtime import arguments, cluster, runner, seed_axis
from policy_gnn_jax.runtime.trainer import Trainer

SPLIT_MAPS = ("map", "vmap", "apart")


def fit_splits(
    datasets: list,
    config: config_lib.Config | None = None,
    *,
    method: str | methods.Method = "policy-gnn",
    seeds: int = 10,
    seed: int = 0,
    progress: bool = True,
    devices: int | None = None,
    seed_mode: str | None = None,
    split_map: str = "map",
) -> list[fits.Fit]:
    """`fit` of `method` on each dataset (`seeds` seeds from `seed`: the same keys on every
    split), as one program where their programs are one (`split_map`, above). No checkpoints: a
    joined sweep that stops saves nothing (fit the splits one by one with `checkpoint_dir` for
    that). Returns one `Fit` per dataset, in order."""
    config = config_lib.Config.paper() if config is None else config
    _check(datasets, split_map)
    for ds in datasets:
        seed, seeds, progress, seed_mode = arguments.check_fit_arguments(
            ds, config, seeds, progress, 1, devices, seed_mode, seed
        )
    entry = methods.get(method)
    prepared = entry.run_config(config)
    keys = seed_axis.seed_keys(seed, seeds)
    graphs = [entry.graph(prepared, ds) for ds in datasets]
    trainers = [entry.make_trainer(prepared, ds, g, None, None)
                for ds, g in zip(datasets, graphs, strict=True)]  # fmt: skip
    joined = None
    if split_map != "apart" and len(datasets) > 1 and same_sizes(datasets):
        joined = join(trainers, split_map)
    if joined is None:  # one after another, each its own program
        if split_map != "apart" and len(datasets) > 1:
            warnings.warn(
                f"split_map={split_map!r}: these splits are not one program (their graphs "
                f"differ in sizes or kind, such as the metric), so they ran one after another, "
                f"as split_map='apart' runs them.",
                stacklevel=2,
            )
        run = dict(method=entry, seeds=seeds, seed=seed, progress=progress, devices=devices,
                   seed_mode=seed_mode)  # fmt: skip
        return [api.fit(ds, config, **run).with_record(split_map="apart") for ds in datasets]
    api._warn_unread_switches(entry, config)  # as `fit` does for a split run alone
    options = fits.compiler_options(entry, prepared, graphs[0])
    start = time.perf_counter()
    outputs = runner.run_trainer(
        joined,
        keys,
        desc=f"{entry.describe(prepared)} on {len(datasets)} splits of {datasets[0].name}",
        progress=progress,
        hints=entry.divergence_hints(prepared, datasets[0]),
        devices=devices,
        seed_mode=seed_mode,
        compiler_options=options,
        matmul_precision=prepared.matmul_precision,
    )
    run = dict(entry=entry, config=prepared, options=options, wall=time.perf_counter() - start,
               seeds=seeds, seed=seed, seed_mode=seed_mode)  # fmt: skip
    batch = None  # under "map" a split's bits are its own run's, whatever ran beside it
    if split_map == "vmap":
        batch = [k if ds.split is None else ds.split for k, ds in enumerate(datasets)]
    return [
        _split_fit(k, trainers[k], datasets[k], graphs[k], outputs, batch, **run)
        for k in range(len(datasets))
    ]


def _check(datasets, split_map) -> None:
    if not isinstance(datasets, list | tuple) or not datasets:
        raise config_lib.ConfigError(
            f"datasets must be a non-empty list of Datasets, got {datasets!r:.80}."
        )
    if split_map not in SPLIT_MAPS:
        raise config_lib.ConfigError(f"split_map must be one of {SPLIT_MAPS}, got {split_map!r}.")
    if cluster.count() > 1:
        raise config_lib.ConfigError("fit_splits runs in one process: fit one split at a time.")


def _split_fit(k, trainer, ds, g, outputs, batch, *, entry, config, options, wall, seeds, seed,
               seed_mode) -> fits.Fit:  # fmt: skip
    """Split k's `Fit`, cut from the joined run's outputs (the split axis after the seeds')."""
    state, metrics, results = outputs
    state = split_state(state, k, axis=1)
    metrics = split_state(metrics, k, axis=2)  # [S, total, splits, ...]
    results = split_state(results, k, axis=1)
    run = (ds, config, entry.name, seeds, seed)
    metrics, results, selected = api._every_seed(trainer, entry, state, metrics, results, run)
    record = api._record(entry, ds, config, g, options, None, metrics, results, wall, seeds, seed,
                         seed_mode)  # fmt: skip
    if batch is not None:  # batched: its rounding may depend on the splits beside it
        record["split_batch"] = batch
    record["split_map"] = "vmap" if batch is not None else "map"
    return fits.Fit.of(record, config, entry.name, ds, *selected)


def same_sizes(datasets) -> bool:
    """Whether the datasets have the same shapes (nodes, features, edges, classes, and the size
    of each split): the precondition for their programs to be one."""

    def sizes(ds):
        return (ds.features.shape, ds.edges.shape, ds.num_classes, len(ds.train_index),
                len(ds.val_index), len(ds.test_index))  # fmt: skip

    return all(sizes(ds) == sizes(datasets[0]) for ds in datasets[1:])


def join(trainers: list[Trainer], split_map: str) -> Trainer | None:
    """One `Trainer` running `trainers[k]` on split k (every leaf of its state [splits, ...],
    a chunk's metrics [length, splits, ...], its results [splits, ...]), each split from the
    same key, as when they run one after another; None where their data differ in structure
    or shape. The trainers come from one config on splits of one graph, so they differ in
    their data alone and the first one's functions serve every split.

    Under "map" a call runs its chunk for each split in turn, so the chunk is the trainers'
    shared out over the splits: a call takes about as long as a split's own, and the run comes
    back to Python (progress, Ctrl-C, a signal) as often."""
    first = trainers[0]
    if any((t.total, t.per_call, t.unit) != (first.total, first.per_call, first.unit)
           for t in trainers):  # fmt: skip
        return None
    datas = [t.data for t in trainers]
    if any(shapes(d) != shapes(datas[0]) for d in datas[1:]):
        return None
    stacked = jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *datas)
    per_call = first.per_call
    if split_map == "map":
        per_call = max(1, per_call // len(trainers))
    over = functools.partial(_over_splits, split_map)
    return first._replace(
        init=lambda data, key: over(lambda d: first.init(d, key), data),
        train_chunk=lambda data, state, length: _metrics_after_length(
            over(lambda d, s: first.train_chunk(d, s, length), data, state)
        ),
        evaluate=lambda data, state: over(first.evaluate, data, state),
        selected=None,
        data=stacked,
        per_call=per_call,
    )


def _over_splits(split_map: str, fn, *stacked):
    """`fn` over the leading split axis of every argument: batched, or one split after another."""
    if split_map == "vmap":
        return jax.vmap(fn)(*stacked)
    return jax.lax.map(lambda row: fn(*row), stacked)


def _metrics_after_length(outputs):
    state, metrics = outputs  # metrics [splits, length, ...]: the runner wants length first
    return state, jax.tree.map(lambda m: jnp.moveaxis(m, 0, 1), metrics)


def split_state(tree, k: int, axis: int = 1):
    """Split k's rows of a tree whose leaves have the split axis at `axis` (after the seeds')."""
    return jax.tree.map(lambda x: jnp.take(x, k, axis=axis) if _is_key(x) else
                        np.take(np.asarray(x), k, axis=axis), tree)  # fmt: skip


def _is_key(x) -> bool:
    return jnp.issubdtype(getattr(x, "dtype", np.float32), jax.dtypes.prng_key)
