"""The public entry point: `fit` a method on a `Dataset` over many seeds, get a `Fit` back
(`fits.py`: predict, save; `loading.py`: `load`).

    ds = policy_gnn_jax.from_arrays(features, edges, labels, train, val, test)
    fit = policy_gnn_jax.fit(ds, policy_gnn_jax.Config.tiny(), seeds=3)
    fit.record["test_metric"]            # {"mean", "std", "per_seed"}: the honest protocol
    fit.predict_depths(nodes)              # [S, M] each seed's selected policy's depths
    fit.predict(nodes)                     # [S, M] class ids at those depths
    fit.predict_logits(nodes)              # [S, M, C] their logits
    fit.save("out"); policy_gnn_jax.load("out")

A `Fit` holds each seed's validation-selected snapshot (backbone parameters and policy, leading
seed axis), the config, the dataset and the results record."""

from __future__ import annotations

import dataclasses
import pathlib
import time
import warnings

import jax
import numpy as np

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import custom_parts, data, fits, methods
from policy_gnn_jax.agents.base import Agent
from policy_gnn_jax.backbones.gcn import Backbone
from policy_gnn_jax.mdp import policy_gnn
from policy_gnn_jax.runtime import (
    arguments,
    checkpoint,
    cluster,
    outputs,
    processes,
    records,
    runner,
    seed_axis,
)
from policy_gnn_jax.runtime.fingerprint import checkpoint_key, run_fingerprint

METHODS = methods.names()


def fit(
    dataset: data.Dataset,
    config: config_lib.Config | None = None,
    *,
    method: str | methods.Method = "policy-gnn",
    seeds: int = 10,
    seed: int = 0,
    progress: bool = True,
    checkpoint_dir: str | pathlib.Path | None = None,
    checkpoint_every: int = 5,
    devices: int | None = None,
    seed_mode: str | None = None,
    backbone: Backbone | None = None,
    agent: Agent | None = None,
) -> fits.Fit:
    """Trains `method` on `dataset` for `seeds` seeds derived from `seed`, as one compiled program.

    Args:
      dataset: a `Dataset` (`from_arrays`, `from_jraph`, `data.load_dataset`).
      config: the run configuration (default: the paper's, `Config.paper()`).
      method: a name from `methods.names()` ("policy-gnn", "random", "gcn" = fixed depth
        `config.depth`, "policy-gnn-plus") or a registered `methods.Method`.
      seeds: how many seeds; seed: the base seed (0..2**32-1).
      progress: show a progress bar.
      checkpoint_dir: save the whole state there every `checkpoint_every` chunks; a run started
        again with the same arguments resumes from it and ends bit-identical.
      devices: split the seeds over at most this many local devices (default: all of them;
        `seed_axis.seed_sharding`).
      seed_mode: "vmap" (seeds batched) or "map" (one after another: a seed's bits do not depend
        on the seed or device count); None: the faster, map on a CPU, vmap on an accelerator.
      backbone: your own `Backbone` instead of the one `config.backbone` names.
      agent: your own `Agent` instead of the DQN (the MDP methods only).

    Raises:
      ConfigError, InvalidDatasetError, ResourceError, CheckpointError (all ValueError): bad
      input; DivergenceError (FloatingPointError): training produced NaN/inf.
    """
    config = config_lib.Config.paper() if config is None else config
    seed, seeds, progress, seed_mode = arguments.check_fit_arguments(
        dataset, config, seeds, progress, checkpoint_every, devices, seed_mode, seed
    )
    entry = methods.get(method)
    entry.check_parts(backbone, agent, config)
    _warn_unread_switches(entry, config)
    config = entry.run_config(config)  # as the method runs it
    low, high = processes.seed_block(seeds)  # all of them in one process
    keys = seed_axis.seed_keys(seed, seeds)[low:high]
    g = entry.graph(config, dataset)  # validates the dataset again: nothing unchecked reaches jit
    agent_metrics = custom_parts.check(backbone, agent, g, dataset.num_classes, config, entry)
    trainer = entry.make_trainer(config, dataset, g, backbone, agent)
    ckpt = _checkpointer(checkpoint_dir, dataset, config, entry, seeds, seed, seed_mode,
                         backbone, agent)  # fmt: skip
    options = fits.compiler_options(entry, config, g)
    start = time.perf_counter()
    try:
        state, metrics, results = runner.run_trainer(
            trainer,
            keys,
            desc=f"{entry.describe(config)} on {dataset.name}",
            progress=progress,
            hints=_hints(entry, config, dataset, backbone, agent_metrics),
            checkpoint=ckpt,
            checkpoint_every=checkpoint_every,
            devices=devices,
            seed_mode=seed_mode,
            compiler_options=options,
            matmul_precision=config.matmul_precision,
        )
    finally:
        if ckpt is not None:
            ckpt.close()
    wall = time.perf_counter() - start
    run = (dataset, config, entry.name, seeds, seed)
    metrics, results, selected = _every_seed(trainer, entry, state, metrics, results, run)
    run = (metrics, results, wall, seeds, seed, seed_mode)
    record = _record(entry, dataset, config, g, options, ckpt, *run)
    parts = {"backbone": backbone, "agent": agent}
    return fits.Fit.of(record, config, entry.name, dataset, *selected, **parts)


def _hints(entry, config, ds: data.Dataset, backbone, agent_metrics) -> dict:
    """The divergence fix per network: your own part's optimizer where you passed one (the
    config's learning rates do not reach it)."""
    hints = entry.divergence_hints(config, ds)
    if backbone is not None:
        hints["backbone"] = "Lower the learning rate of your backbone's optimizer (its optimizer)"
    if agent_metrics is not None:
        hints["agent"] = "Lower your agent's learning rate"
        hints["agent_metrics"] = ("agent_finite", *agent_metrics)
    return hints


def _warn_unread_switches(entry: methods.Method, given: config_lib.Config) -> None:
    """A switch turned on that the method never reads, or that it turns off (`prepare`), is
    said: the run is not what the config asked for (the command line says the same of its
    flags). Other fields a method ignores are not: one config serves several methods."""
    default, ran = type(given)(), entry.prepare(given)
    for field in (f.name for f in dataclasses.fields(given)):
        if getattr(given, field) is not True or getattr(default, field) is True:
            continue
        set_by_method = getattr(entry.prepare(dataclasses.replace(given, **{field: False})), field)
        if getattr(ran, field) is not True or (field in entry.ignores and not set_by_method):
            warnings.warn(
                f"Config.{field}=True is not used by method {entry.name!r}: the run goes on "
                f"without it.",
                stacklevel=3,  # the caller of fit
            )


def _record(entry, ds, config, g, options, ckpt, metrics, results, wall, seeds, seed, seed_mode):
    """The results record of a finished run (`records.build` with the method's own fields), and
    whether it was resumed from a checkpoint."""
    record = records.build(
        ds,
        config,
        entry.name,
        seeds,
        seed,
        metrics,
        results,
        wall,
        g.kernels,
        entry.engine(config, g),
        seed_mode,
        method_fields=entry.record_fields(config, metrics, results),
        options=options,
    )
    record["resumed"] = ckpt.resumed(wall) if ckpt is not None else None
    record["processes"] = cluster.count()
    return record


def _checkpointer(directory, dataset, config, entry, seeds, seed, seed_mode, backbone, agent):
    """The run's `Checkpointer` (None without a directory), keyed by what identifies the run."""
    if directory is None:
        return None
    custom = tuple(n for n, part in (("backbone", backbone), ("agent", agent)) if part)
    run = (dataset, config, entry.name, seeds, seed, custom, seed_mode)
    directory = outputs.check_folder_path(directory, "checkpoint folder")  # "" is no folder
    directory = processes.checkpoint_folder(directory)  # one process: `directory` itself
    return checkpoint.Checkpointer(directory, *checkpoint_key(*run))


def _every_seed(trainer, entry, state, metrics, results, run: tuple):
    """(metrics, results, (params, policy, eval keys)) of every seed, on the host and in seed
    order: over several processes each has its own block of seeds, joined here if every process
    ran the same `run` (dataset, config, method, seeds, base seed: its fingerprint)."""
    selected = (*trainer.selected(state), _eval_keys(entry, state))
    on_host = jax.tree.map(np.asarray, (metrics, results, selected))
    return processes.gather(on_host, lambda: run_fingerprint(*run))


def _eval_keys(entry: methods.Method, state):
    """[S] the key each seed's evaluation drew its depths with (a random policy needs it to
    predict again); None for a method that draws none."""
    if not entry.uses_eval_keys:
        return None
    return jax.random.key_data(jax.vmap(policy_gnn.evaluation_key)(state.key))

