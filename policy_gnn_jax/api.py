"""The public entry point: `fit` a method on a `Dataset` over many seeds, get a `Fit` back.

    ds = policy_gnn_jax.from_arrays(features, edges, labels, train, val, test)
    fit = policy_gnn_jax.fit(ds, policy_gnn_jax.Config.tiny(), seeds=3)
    fit.record["test_accuracy"]            # {"mean", "std", "per_seed"}: the honest protocol
    fit.predict_depths(nodes)              # [S, M] each seed's selected policy's depths
    fit.predict(nodes)                     # [S, M] class ids at those depths
    fit.predict_logits(nodes)              # [S, M, C] their logits
    fit.save("out"); policy_gnn_jax.load("out")

A `Fit` holds each seed's validation-selected snapshot (backbone parameters and policy) with a
leading seed axis, the config, the dataset and the results record.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import json
import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from policy_gnn_jax import backbone as backbone_lib
from policy_gnn_jax import (
    backbones,
    baseline,
    checkpoint,
    data,
    graph,
    plus,
    records,
    runner,
    subgraph,
    train,
)
from policy_gnn_jax import config as config_lib

METHODS = records.METHODS
_FORMAT = 1


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise config_lib.ConfigError(f"unknown method {method!r}: choose one of {METHODS}.")


def run_fingerprint(ds: data.Dataset, config, method: str, seeds: int, seed: int) -> str:
    """Identifies a run for its checkpoints: same data, config, method and seeds."""
    blob = json.dumps(
        [ds.fingerprint(), dataclasses.asdict(config), method, seeds, seed], sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _make_trainer(method: str, config, ds: data.Dataset, g: graph.Graph):
    if method == "gcn":
        return baseline.make_baseline(config, g)
    if method == "policy-gnn-plus":
        return plus.make_trainer(config, ds, g)
    return train.make_trainer(config, g, graph.train_hop_distances(ds, config.max_depth))


def fit(
    dataset: data.Dataset,
    config: config_lib.Config | None = None,
    *,
    method: str = "policy-gnn",
    seeds: int = 10,
    seed: int = 0,
    progress: bool = True,
    checkpoint_dir: str | pathlib.Path | None = None,
    checkpoint_every: int = 5,
    devices: int | None = None,
    seed_mode: str = "vmap",
) -> Fit:
    """Trains `method` on `dataset` for `seeds` seeds derived from `seed`, as one jit(vmap).

    Args:
      dataset: a `Dataset` (`from_arrays`, `from_jraph`, `data.load_dataset`).
      config: the run configuration (default: the paper's, `Config.paper()`).
      method: "policy-gnn", "random" (the random policy) or "gcn" (fixed depth `config.depth`).
      seeds: how many seeds; seed: the base seed (0..2**32-1).
      progress: show a progress bar.
      checkpoint_dir: save the whole state there every `checkpoint_every` chunks; a run started
        again with the same arguments resumes from it and ends bit-identical.
      devices: split the seeds over at most this many local devices (default: all of them;
        `runner.seed_sharding`).
      seed_mode: "vmap" (default: the seeds batched) or "map" (one after another: a seed's
        result is then bit-identical on any number of seeds and devices; `runner.over_seeds`).

    Returns:
      The `Fit`.

    Raises:
      ConfigError, InvalidDatasetError, ResourceError, CheckpointError (all ValueError): bad
      input; DivergenceError (FloatingPointError): training produced NaN/inf.
    """
    config = config or config_lib.Config.paper()
    _check_method(method)
    if method in ("policy-gnn", "random"):
        config = dataclasses.replace(config, random_policy=(method == "random"))
    keys = runner.seed_keys(seed, seeds)
    g = graph.from_dataset(dataset)  # validates the dataset again: nothing unchecked reaches jit
    trainer = _make_trainer(method, config, dataset, g)
    ckpt = None
    if checkpoint_dir is not None:
        fingerprint = run_fingerprint(dataset, config, method, seeds, seed)
        ckpt = checkpoint.Checkpointer(checkpoint_dir, fingerprint)
    desc = f"gcn depth {config.depth}" if method == "gcn" else method
    start = time.perf_counter()
    try:
        state, metrics, results = runner.run_trainer(
            trainer,
            keys,
            desc=f"{desc} on {dataset.name}",
            progress=progress,
            hints=runner.learning_rate_hints(config, method),
            checkpoint=ckpt,
            checkpoint_every=checkpoint_every,
            devices=devices,
            seed_mode=seed_mode,
        )
    finally:
        if ckpt is not None:
            ckpt.close()
    wall = time.perf_counter() - start
    engine = (
        "subgraph"
        if method in ("policy-gnn", "random") and subgraph.use_subgraphs(config, g)
        else "full"
    )
    record = records.build(
        dataset, config, method, seeds, seed, metrics, results, wall, g.kernels, engine, seed_mode
    )
    params, policy = trainer.selected(state)
    eval_keys = None
    if method in ("policy-gnn", "random"):
        # The key each seed's evaluation drew its depths with (used by the random policy).
        eval_keys = jax.random.key_data(jax.vmap(train.evaluation_key)(state.key))
    return Fit(
        record, config, method, dataset, _to_host(params), _to_host(policy), _to_host(eval_keys)
    )


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
        if "graph" not in self._cache:
            self._cache["graph"] = graph.from_dataset(self.dataset)
        return self._cache["graph"]

    def _depths_fn(self):
        """jit(vmap over seeds) of the agent's depths, built once per Fit."""
        if "depths" not in self._cache:
            agent = train.make_agent(self.config, self._graph())
            self._cache["depths"] = jax.jit(jax.vmap(agent.depths, in_axes=(0, 0, None)))
        return self._cache["depths"]

    def _plus_depths_fn(self):
        """jit(vmap over seeds) of Policy-GNN+'s depths (the bandit reads the backbone)."""
        if "plus_depths" not in self._cache:
            ctx = plus.make_context(self.config, self.dataset, self._graph())
            depths = functools.partial(plus.depths_of, ctx)
            self._cache["plus_depths"] = jax.jit(jax.vmap(depths, in_axes=(0, 0, None)))
        return self._cache["plus_depths"]

    def _logits_fn(self):
        """jit(vmap over seeds) of the backbone's logits at given depths, built once per Fit."""
        if "logits" not in self._cache:
            make = backbones.for_fixed_depth if self.method == "gcn" else backbones.for_policy
            backbone = make(self.config, self._graph())
            predict = functools.partial(backbone_lib.predict_logits, backbone)
            self._cache["logits"] = jax.jit(jax.vmap(predict, in_axes=(0, None, 0)))
        return self._cache["logits"]

    def _nodes(self, nodes) -> jax.Array:
        array = np.asarray(nodes)
        n = self.dataset.num_nodes
        if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
            raise ValueError(
                f"nodes must be a 1-D array of node ids, got {array.dtype} {array.shape}."
            )
        if array.size and (array.min() < 0 or array.max() >= n):
            raise ValueError(f"nodes must lie in 0..{n - 1}, got {array.min()}..{array.max()}.")
        return jnp.asarray(array, jnp.int32)

    def predict_depths(self, nodes) -> np.ndarray:
        """[S, M] the depth each seed's selected policy gives each node (fixed for "gcn")."""
        nodes = self._nodes(nodes)
        if self.method == "gcn":
            return np.full((self.num_seeds, nodes.shape[0]), self.config.depth, np.int32)
        if self.method == "policy-gnn-plus":
            return np.asarray(self._plus_depths_fn()(self.params, self.policy, nodes))
        keys = jax.random.wrap_key_data(jnp.asarray(self.eval_keys))
        return np.asarray(self._depths_fn()(keys, self.policy, nodes))

    def predict_logits(self, nodes) -> np.ndarray:
        """[S, M, C] each seed's logits for each node at its predicted depth."""
        depths = jnp.asarray(self.predict_depths(nodes))
        return np.asarray(self._logits_fn()(self.params, self._nodes(nodes), depths))

    def predict(self, nodes) -> np.ndarray:
        """[S, M] each seed's class prediction for each node at its predicted depth."""
        return self.predict_logits(nodes).argmax(-1)

    def save(self, directory: str | pathlib.Path) -> pathlib.Path:
        """Writes results.json, the snapshots, the dataset and fit.json (last) atomically."""
        out = records.save(self.record, directory).parent  # checks the folder first
        checkpoint.atomic_write_bytes(out / "dataset.npz", _dataset_bytes(self.dataset))
        leaves = jax.tree.leaves((self.params, self.policy, self.eval_keys))
        buffer = io.BytesIO()
        np.savez(buffer, *leaves)
        checkpoint.atomic_write_bytes(out / "snapshots.npz", buffer.getvalue())
        meta = {
            "format": _FORMAT,
            "method": self.method,
            "config": dataclasses.asdict(self.config),
            "dataset_fingerprint": self.dataset.fingerprint(),
            "num_leaves": len(leaves),
        }
        checkpoint.atomic_write_json(out / "fit.json", meta)
        return out


def _dataset_bytes(ds: data.Dataset) -> bytes:
    buffer = io.BytesIO()
    f = ds.features
    np.savez_compressed(
        buffer,
        name=np.array(ds.name),
        indptr=f.indptr,
        indices=f.indices,
        values=f.data,
        shape=np.array(f.shape),
        labels=ds.labels,
        edges=ds.edges,
        train_index=ds.train_index,
        val_index=ds.val_index,
        test_index=ds.test_index,
        num_classes=np.array(ds.num_classes),
    )
    return buffer.getvalue()


def _load_dataset(path: pathlib.Path) -> data.Dataset:
    with np.load(path) as z:
        features = sp.csr_matrix((z["values"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
        return data.Dataset(
            name=str(z["name"]),
            features=features,
            labels=z["labels"],
            edges=z["edges"],
            train_index=z["train_index"],
            val_index=z["val_index"],
            test_index=z["test_index"],
            num_classes=int(z["num_classes"]),
        )


def config_from_dict(values: dict) -> config_lib.Config:
    """A Config from its saved dict (JSON turns tuples into lists)."""
    fields = {f.name for f in dataclasses.fields(config_lib.Config)}
    unknown = set(values) - fields
    if unknown:
        raise checkpoint.CheckpointError(f"unknown config fields {sorted(unknown)} in a saved fit.")
    values = dict(values)
    # Fits saved before the backbone field existed (2026-11) used the readout structure.
    values.setdefault("backbone", "gcn-readout")
    # JSON turned every tuple field (q_hidden, fanouts) into a list.
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    return config_lib.Config(**values)


def load(directory: str | pathlib.Path) -> Fit:
    """Reads a `Fit` written by `Fit.save` (or by `policy-gnn --out DIR`)."""
    out = pathlib.Path(directory)
    if not (out / "fit.json").is_file():
        raise checkpoint.CheckpointError(
            f"{out} holds no saved fit (no fit.json): pass a folder written by Fit.save or by "
            f"the policy-gnn command's --out."
        )
    meta = checkpoint.read_json(out / "fit.json")
    record = checkpoint.read_json(out / "results.json")
    if meta.get("format") != _FORMAT:
        raise checkpoint.CheckpointError(
            f"{out}/fit.json has an unknown format {meta.get('format')}."
        )
    config = config_from_dict(meta["config"])
    try:
        ds = _load_dataset(out / "dataset.npz")
        with np.load(out / "snapshots.npz") as z:
            leaves = [z[f"arr_{i}"] for i in range(meta["num_leaves"])]
    except (OSError, KeyError, ValueError) as err:
        raise checkpoint.CheckpointError(
            f"{out} is incomplete or corrupt ({err}). Save the fit again."
        ) from None
    if ds.fingerprint() != meta["dataset_fingerprint"]:
        raise checkpoint.CheckpointError(f"{out}/dataset.npz does not match fit.json: save again.")
    like = _snapshot_structure(meta["method"], config, ds, int(record["seeds"]))
    treedef = jax.tree.structure(like)
    shapes = [x.shape for x in jax.tree.leaves(like)]
    if [leaf.shape for leaf in leaves] != shapes:
        raise checkpoint.CheckpointError(
            f"{out}/snapshots.npz does not match its config: save again."
        )
    params, policy, eval_keys = jax.tree.unflatten(treedef, leaves)
    return Fit(record, config, meta["method"], ds, params, policy, eval_keys)


def _snapshot_structure(method: str, config, ds: data.Dataset, seeds: int):
    """Shapes of (params, policy, eval_keys) with a leading seed axis, without training."""
    g = graph.from_dataset(ds)
    trainer = _make_trainer(method, config, ds, g)
    keys = jax.random.split(jax.random.key(0), seeds)
    state = jax.eval_shape(jax.vmap(trainer.init), keys)
    params, policy = trainer.selected(state)
    policy_method = method in ("policy-gnn", "random")
    eval_keys = jax.ShapeDtypeStruct((seeds, 2), jnp.uint32) if policy_method else None
    return params, policy, eval_keys
