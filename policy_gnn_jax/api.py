"""The public entry point: `fit` a method on a `Dataset` over many seeds, get a `Fit` back.

    ds = policy_gnn_jax.from_arrays(features, edges, labels, train, val, test)
    fit = policy_gnn_jax.fit(ds, policy_gnn_jax.Config.tiny(), seeds=3)
    fit.record["test_accuracy"]            # {"mean", "std", "per_seed"}: the honest protocol
    fit.predict_depths(nodes)              # [S, M] each seed's selected policy's depths
    fit.predict(nodes)                     # [S, M] class ids at those depths
    fit.predict_logits(nodes)              # [S, M, C] their logits
    fit.save("out"); policy_gnn_jax.load("out")

A `Fit` holds each seed's validation-selected snapshot (backbone parameters and policy, leading
seed axis), the config, the dataset and the results record."""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import time
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import data, graph, methods
from policy_gnn_jax.agents.base import Agent
from policy_gnn_jax.backbones import base as backbone_lib
from policy_gnn_jax.backbones.base import Backbone
from policy_gnn_jax.graph import host
from policy_gnn_jax.mdp import host_prediction, loop
from policy_gnn_jax.runtime import (
    arguments,
    checkpoint,
    compilation,
    outputs,
    processes,
    records,
    runner,
    saved_fit,
)
from policy_gnn_jax.runtime.saved_fit import config_from_dict, run_fingerprint

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
    seed_mode: str = "vmap",
    backbone: Backbone | None = None,
    agent: Agent | None = None,
) -> Fit:
    """Trains `method` on `dataset` for `seeds` seeds derived from `seed`, as one jit(vmap).

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
        `runner.seed_sharding`).
      seed_mode: "vmap" (default: the seeds batched) or "map" (one after another: a seed's
        result is then bit-identical on any number of seeds and devices; `runner.over_seeds`).
      backbone: your own `Backbone` instead of the one `config.backbone` names.
      agent: your own `Agent` instead of the DQN (the MDP methods only).

    Returns:
      The `Fit`.

    Raises:
      ConfigError, InvalidDatasetError, ResourceError, CheckpointError (all ValueError): bad
      input; DivergenceError (FloatingPointError): training produced NaN/inf.
    """
    config = config_lib.Config.paper() if config is None else config
    seed, seeds, progress = arguments.check_fit_arguments(
        dataset, config, seeds, progress, checkpoint_every, devices, seed_mode, seed
    )
    entry = methods.get(method)
    entry.check_parts(backbone, agent, config)
    config = _prepared(entry, config)
    low, high = processes.seed_block(seeds)  # all of them in one process
    keys = runner.seed_keys(seed, seeds)[low:high]
    g = entry.graph(config, dataset)  # validates the dataset again: nothing unchecked reaches jit
    trainer = entry.make_trainer(config, dataset, g, backbone, agent)
    ckpt = _checkpointer(checkpoint_dir, dataset, config, entry, seeds, seed, seed_mode,
                         backbone, agent)  # fmt: skip
    options = _compiler_options(entry, config, g)
    start = time.perf_counter()
    try:
        state, metrics, results = runner.run_trainer(
            trainer,
            keys,
            desc=f"{entry.describe(config)} on {dataset.name}",
            progress=progress,
            hints=entry.divergence_hints(config, dataset),
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
    fitted = Fit(record, config, entry.name, dataset, *selected)
    fitted._cache.update(custom_backbone=backbone, custom_agent=agent)
    return fitted


def _prepared(entry: methods.Method, config: config_lib.Config) -> config_lib.Config:
    """The config as `entry` runs it, after saying what of it the method will not use."""
    _warn_unread_switches(entry, config)
    return entry.prepare(config)


def _warn_unread_switches(entry: methods.Method, given: config_lib.Config) -> None:
    """A switch turned on that the method never reads, or that it turns off (`prepare`), is
    said: the run is not what the config asked for (the command line says the same of its
    flags). Other fields a method ignores are not: one config serves several methods."""
    default, ran = config_lib.Config(), entry.prepare(given)
    for field in (f.name for f in dataclasses.fields(given)):
        if getattr(given, field) is not True or getattr(default, field) is True:
            continue
        set_by_method = getattr(entry.prepare(dataclasses.replace(given, **{field: False})), field)
        if getattr(ran, field) is not True or (field in entry.ignores and not set_by_method):
            warnings.warn(
                f"Config.{field}=True is not used by method {entry.name!r}: the run goes on "
                f"without it.",
                stacklevel=3,
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
    record["processes"] = processes.count()
    return record


def _checkpointer(directory, dataset, config, entry, seeds, seed, seed_mode, backbone, agent):
    """The run's `Checkpointer` (None without a directory), keyed by what identifies the run."""
    if directory is None:
        return None
    custom = tuple(n for n, part in (("backbone", backbone), ("agent", agent)) if part)
    run = (dataset, config, entry.name, seeds, seed, custom, seed_mode)
    outputs.check_folder_path(directory, "checkpoint folder")  # as given: "" is no folder
    directory = processes.checkpoint_folder(directory)  # one process: `directory` itself
    return checkpoint.Checkpointer(directory, run_fingerprint(*run), saved_fit.run_identity(*run))


def _compiler_options(entry: methods.Method, config, g) -> dict | None:
    scatter_adds = compilation.float_scatter_adds(g.kernels, entry.engine(config, g))
    return compilation.compiler_options(config.reproducible, scatter_adds)


def _every_seed(trainer, entry, state, metrics, results, run: tuple):
    """(metrics, results, (params, policy, eval keys)) of every seed, on the host and in seed
    order: over several processes each has its own block of seeds, joined here if every process
    ran the same `run` (dataset, config, method, seeds, base seed: its fingerprint)."""
    selected = (*trainer.selected(state), _eval_keys(entry, state))
    return processes.gather(_to_host((metrics, results, selected)), lambda: run_fingerprint(*run))


def _eval_keys(entry: methods.Method, state):
    """[S] the key each seed's evaluation drew its depths with (a random policy needs it to
    predict again); None for a method that draws none."""
    if not entry.uses_eval_keys:
        return None
    return jax.random.key_data(jax.vmap(loop.evaluation_key)(state.key))


def _to_host(tree):
    return None if tree is None else jax.tree.map(np.asarray, tree)


@dataclasses.dataclass
class Fit:
    """A finished sweep: the record and each seed's selected snapshot (leading seed axis S)."""

    record: dict
    config: config_lib.Config
    method: str
    dataset: data.Dataset
    params: Any  # backbone parameters, [S, ...] leaves
    policy: Any  # the agent's policy, [S, ...] leaves (None for "gcn")
    eval_keys: np.ndarray | None  # [S, 2] uint32 (None for "gcn")
    _cache: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @property
    def num_seeds(self) -> int:
        return int(self.record["seeds"])

    def _graph(self) -> graph.Graph:
        """The graph the fit trained on: the whole graph, or the host engine's split nodes."""
        if "graph" not in self._cache:
            self._cache["graph"] = self._method().graph(self.config, self.dataset)
        return self._cache["graph"]

    def _method(self) -> methods.Method:
        return methods.get(self.method)

    def _depths_fn(self, g: graph.Graph | None = None):
        """jit(vmap over seeds) of the method's depths on `g` (default: the fit's graph, built
        once per Fit)."""
        if g is None and "depths" in self._cache:
            return self._cache["depths"]
        agent = self._cache.get("custom_agent")
        depth_fn = self._method().depth_fn(self.config, self.dataset, g or self._graph(), agent)
        fn = self._jit(jax.vmap(depth_fn, in_axes=(0, 0, 0, None)))
        return fn if g is not None else self._cache.setdefault("depths", fn)

    def _logits_fn(self):
        """jit(vmap over seeds) of the backbone's logits at given depths, built once per Fit."""
        if "logits" not in self._cache:
            backbone = self._cache.get("custom_backbone") or self._method().backbone(
                self.config, self._graph()
            )
            predict = functools.partial(backbone_lib.predict_logits, backbone)
            self._cache["logits"] = self._jit(jax.vmap(predict, in_axes=(0, None, 0)))
        return self._cache["logits"]

    def _jit(self, fn):
        """Compiled as the fit's training was: the same XLA options and matmul precision."""
        options = _compiler_options(self._method(), self.config, self._graph())
        return compilation.jit(fn, options=options, precision=self.config.matmul_precision)

    def _nodes(self, nodes) -> jax.Array:
        return jnp.asarray(data.arrays.node_ids("nodes", nodes, self.dataset.num_nodes))

    def predict_depths(self, nodes) -> np.ndarray:
        """[S, M] the depth each seed's selected snapshot gives each node."""
        arguments.check_jax_modes()  # settings changed since the fit was made or loaded
        nodes = self._nodes(nodes)
        keys = None
        if self.eval_keys is not None:
            keys = jax.random.wrap_key_data(jnp.asarray(self.eval_keys))
        g = self._graph()
        if g.host is None:
            depths_fn = self._depths_fn()
        else:  # the states: a device graph of these nodes' rows alone
            depths_fn = self._depths_fn(host.rows_graph(g.host, np.asarray(nodes), g))
            nodes = jnp.arange(nodes.shape[0], dtype=jnp.int32)
        return np.asarray(depths_fn(self.params, self.policy, keys, nodes))

    def predict_logits(self, nodes) -> np.ndarray:
        """[S, M, C] each seed's logits for each node at its predicted depth."""
        depths = jnp.asarray(self.predict_depths(nodes))
        g = self._graph()
        if g.host is not None and depths.shape[1] == 0:  # no nodes: no batch to sample
            return np.zeros((self.num_seeds, 0, self.dataset.num_classes), np.float32)
        if g.host is not None:  # on sampled neighbourhoods, as the final evaluation
            backbone = self._cache.get("custom_backbone") or self._method().backbone(self.config, g)
            fn = host_prediction.logits_fn(self.config, backbone, g, np.asarray(nodes))
            keys = jax.random.wrap_key_data(jnp.asarray(self.eval_keys))
            return np.asarray(self._jit(jax.vmap(fn))(self.params, keys, depths))
        return np.asarray(self._logits_fn()(self.params, self._nodes(nodes), depths))

    def predict(self, nodes) -> np.ndarray:
        """[S, M] each seed's class prediction for each node at its predicted depth."""
        return self.predict_logits(nodes).argmax(-1)

    def save(self, directory: str | pathlib.Path, *, overwrite: bool = False) -> pathlib.Path:
        """Writes results.json, the dataset, the snapshots and fit.json (their manifest) into
        `directory` at once (`runtime/saved_fit.py`). A folder that already holds a result is
        refused unless `overwrite`, and then replaced whole."""
        leaves = jax.tree.leaves((self.params, self.policy, self.eval_keys))
        meta = {
            "format": saved_fit.FORMAT,
            "method": self.method,
            "config": dataclasses.asdict(self.config),
            "dataset_fingerprint": self.dataset.fingerprint(),
            "run_fingerprint": self._run_fingerprint(self.config, self.dataset, self.record),
            "num_leaves": len(leaves),
        }
        custom = [part for part in ("backbone", "agent") if self._cache.get(f"custom_{part}")]
        if custom:  # `load` needs them back: they are code, not saved
            meta["custom"] = custom
        return saved_fit.write(directory, self.record, self.dataset, leaves, meta, overwrite)

    def _run_fingerprint(self, config, ds, record, legacy: bool = False) -> str:
        seeds, seed = int(record["seeds"]), int(record["seed"])
        return run_fingerprint(ds, config, self.method, seeds, seed, legacy=legacy)


def load(
    directory: str | pathlib.Path, *, backbone: Backbone | None = None, agent: Agent | None = None
) -> Fit:
    """Reads a `Fit` written by `Fit.save` (or by `policy-gnn --out DIR`), every file checked
    against the fit's manifest. A fit trained with your own `backbone` or `agent` needs the same
    one passed again here."""
    arguments.check_jax_modes()  # predicting runs the library's programs
    meta, record, ds, leaves = saved_fit.read(directory)
    out = pathlib.Path(directory)
    try:
        config = config_from_dict(meta["config"])
    except config_lib.ConfigError as err:
        raise outputs.CheckpointError(
            f"{out}/fit.json holds a config this version cannot use ({err}): save the fit again."
        ) from None
    methods.get(meta["method"]).check_parts(backbone, agent, config)
    given = {"backbone": backbone, "agent": agent}
    for part in set(given) - set(meta.get("custom", ())):  # passed for a built-in one
        if given[part] is not None:
            raise outputs.CheckpointError(f"{out} was trained with the built-in {part}: "
                                             f"load it without {part}=.")  # fmt: skip
    for part in meta.get("custom", ()):
        if given.get(part) is None:
            raise outputs.CheckpointError(
                f"{out} was trained with your own {part}: pass it again, load(..., {part}=...)."
            )
    like = _snapshot_structure(meta["method"], config, ds, int(record["seeds"]), backbone, agent)
    treedef = jax.tree.structure(like)
    shapes = [x.shape for x in jax.tree.leaves(like)]
    if [leaf.shape for leaf in leaves] != shapes:
        raise outputs.CheckpointError(
            f"{out}/snapshots.npz does not match its config: save again."
        )
    params, policy, eval_keys = jax.tree.unflatten(treedef, leaves)
    fitted = Fit(record, config, meta["method"], ds, params, policy, eval_keys)
    expected = meta.get("run_fingerprint")  # fits saved before: no fingerprint
    # The config as saved or as read back: fields added since must not make the fit look foreign.
    # And as saved before the dataset fingerprint held the parts' sizes (`legacy`).
    if expected and expected not in {fitted._run_fingerprint(c, ds, record, legacy)
                                     for c in (meta["config"], config)
                                     for legacy in (False, True)}:  # fmt: skip
        raise outputs.CheckpointError(
            f"{out}/results.json and fit.json describe different runs: save the fit again."
        )
    fitted._cache.update(custom_backbone=backbone, custom_agent=agent)
    return fitted


def _snapshot_structure(method: str, config, ds: data.Dataset, seeds: int, backbone, agent):
    """Shapes of (params, policy, eval_keys) with a leading seed axis, without training."""
    entry = methods.get(method)
    g = entry.graph(config, ds)
    trainer = entry.make_trainer(config, ds, g, backbone, agent)
    keys = jax.random.split(jax.random.key(0), seeds)
    state = jax.eval_shape(jax.vmap(trainer.init), keys)
    params, policy = trainer.selected(state)
    eval_keys = jax.ShapeDtypeStruct((seeds, 2), jnp.uint32) if entry.uses_eval_keys else None
    return params, policy, eval_keys
