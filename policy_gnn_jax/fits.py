"""A finished sweep, `Fit`: predict, save (`loading.py` reads a saved one back).

A `Fit` holds each seed's validation-selected snapshot (backbone parameters and policy, leading
seed axis), the config, the dataset and the results record. It is frozen and built from
read-only arrays, so what it predicts always comes from the data and snapshots its record
describes."""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import data, graph, methods
from policy_gnn_jax.agents.base import Agent
from policy_gnn_jax.backbones import gcn as backbone_lib
from policy_gnn_jax.backbones.gcn import Backbone
from policy_gnn_jax.graph import host
from policy_gnn_jax.mdp import subgraph_engine
from policy_gnn_jax.runtime import arguments, compilation, outputs, saved_fit
from policy_gnn_jax.runtime.fingerprint import run_fingerprint


def compiler_options(entry: methods.Method, config, g) -> dict | None:
    """The XLA options a run of `entry` on `g` compiles with (`compilation.compiler_options`)."""
    scatter_adds = compilation.float_scatter_adds(g.kernels, entry.engine(config, g))
    return compilation.compiler_options(config.reproducible, scatter_adds)


def read_only_tree(tree):
    """The tree's leaves as read-only NumPy arrays (copied where anyone could write them): a
    fit's snapshots cannot be edited."""

    def frozen(leaf):
        if isinstance(leaf, np.ndarray) and not data.dataset._writable(leaf):
            return leaf
        leaf = np.array(leaf)
        leaf.flags.writeable = False
        return leaf

    return jax.tree.map(frozen, tree)


def _as_json_value(value):
    """NumPy scalars and arrays as the numbers and lists JSON holds."""
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not a JSON value")


@dataclasses.dataclass(frozen=True, eq=False)
class Fit:
    """A finished sweep: the record and each seed's selected snapshot (leading seed axis S).

    Frozen, and built only from read-only arrays (the dataset's and the snapshots'), so what it
    predicts always comes from the data and snapshots its record describes; `record` returns a
    copy. Pickles and deep-copies at any time (compiled functions are made again on demand).
    """

    record_text: str  # the record, as JSON (`record` reads it)
    config: config_lib.Config
    method: str
    dataset: data.Dataset
    params: Any  # backbone parameters, [S, ...] leaves
    policy: Any  # the agent's policy, [S, ...] leaves (None for "gcn")
    eval_keys: np.ndarray | None  # [S, 2] uint32 (None for "gcn")
    custom_backbone: Backbone | None = dataclasses.field(default=None, repr=False)
    custom_agent: Agent | None = dataclasses.field(default=None, repr=False)
    _cache: dict = dataclasses.field(default_factory=dict, repr=False)

    def __post_init__(self):
        # Every way a Fit is made (`of`, `dataclasses.replace`, a copy) ends with read-only
        # host arrays: nothing can edit what a fit predicts from.
        for field in ("params", "policy", "eval_keys"):
            object.__setattr__(self, field, read_only_tree(getattr(self, field)))

    @classmethod
    def of(cls, record: dict, config, method, dataset, params, policy, eval_keys, *,
           backbone=None, agent=None) -> Fit:  # fmt: skip
        """A Fit of a run's record and snapshots."""
        text = json.dumps(record)
        return cls(text, config, method, dataset, params, policy, eval_keys, backbone, agent)

    @property
    def record(self) -> dict:
        """The results record (docs/usage.md, "Results"): a copy, so editing it changes nothing."""
        return json.loads(self.record_text)

    def with_record(self, **fields) -> Fit:
        """This fit with `fields` added to its record (notes of your own, NumPy values as
        numbers and lists); the fields the run recorded cannot be replaced."""
        record = self.record
        taken = sorted(set(fields) & set(record))
        if taken:
            raise config_lib.ConfigError(
                f"the record already holds {taken}, which the run recorded: name your fields "
                f"otherwise."
            )
        for name, value in fields.items():
            try:
                fields[name] = json.loads(json.dumps(value, default=_as_json_value))
            except (TypeError, ValueError) as err:
                raise config_lib.ConfigError(
                    f"with_record: {name} cannot be kept in results.json ({err}): pass numbers, "
                    f"text, lists or dicts of them."
                ) from None
        return dataclasses.replace(self, record_text=json.dumps({**record, **fields}), _cache={})

    # A fit cannot change: a copy is the fit itself (your own backbone or agent shared, as code).
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        # A pickled fit is made again through the constructor, read-only, and without compiled
        # functions. Your own backbone or agent is code: pickle's own error says if it cannot.
        fields = ("record_text", "config", "method", "dataset", "params", "policy", "eval_keys",
                  "custom_backbone", "custom_agent")  # fmt: skip
        return Fit, tuple(getattr(self, name) for name in fields)

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
        """jit(vmap over seeds) of the method's depths, its agent built for `g`'s shapes
        (default: the fit's graph; built once per Fit)."""
        if g is None and "depths" in self._cache:
            return self._cache["depths"]
        agent = self.custom_agent
        depth_fn = self._method().depth_fn(self.config, self.dataset, g or self._graph(), agent)
        fn = self._jit(jax.vmap(depth_fn, in_axes=(0, 0, 0, None, None)))
        return fn if g is not None else self._cache.setdefault("depths", fn)

    def _logits_fn(self):
        """jit(vmap over seeds) of the backbone's logits at given depths, built once per Fit."""
        if "logits" not in self._cache:
            backbone = self.custom_backbone or self._method().backbone(self.config, self._graph())

            def predict(params, g, nodes, depths):  # evaluation mode
                logits = backbone.logits(params, g, None)[:, nodes]
                return backbone_lib.depth_logits(backbone, logits, depths)

            self._cache["logits"] = self._jit(jax.vmap(predict, in_axes=(0, None, None, 0)))
        return self._cache["logits"]

    def _jit(self, fn):
        """Compiled as the fit's training was: the same XLA options and matmul precision."""
        options = compiler_options(self._method(), self.config, self._graph())
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
            g = host.rows_graph(g.host, np.asarray(nodes), g)
            depths_fn = self._depths_fn(g)
            nodes = jnp.arange(nodes.shape[0], dtype=jnp.int32)
        return np.asarray(depths_fn(self.params, self.policy, keys, g, nodes))

    def predict_logits(self, nodes) -> np.ndarray:
        """[S, M, C] each seed's logits for each node at its predicted depth."""
        depths = jnp.asarray(self.predict_depths(nodes))
        g = self._graph()
        if g.host is not None and depths.shape[1] == 0:  # no nodes: no batch to sample
            return np.zeros((self.num_seeds, 0, self.dataset.num_classes), np.float32)
        if g.host is not None:  # on sampled neighbourhoods, as the final evaluation
            backbone = self.custom_backbone or self._method().backbone(self.config, g)
            fn = subgraph_engine.host_prediction_fn(self.config, backbone, g, nodes)
            keys = jax.random.wrap_key_data(jnp.asarray(self.eval_keys))
            return np.asarray(self._jit(jax.vmap(fn))(self.params, keys, depths))
        return np.asarray(self._logits_fn()(self.params, g, self._nodes(nodes), depths))

    def predict(self, nodes) -> np.ndarray:
        """[S, M] each seed's class prediction for each node at its predicted depth."""
        return self.predict_logits(nodes).argmax(-1)

    def save(self, directory: str | pathlib.Path, *, overwrite: bool = False) -> pathlib.Path:
        """Writes results.json, the dataset, the snapshots and fit.json (their manifest) into
        `directory` at once (`runtime/saved_fit.py`). A folder that already holds a result is
        refused unless `overwrite`, and then replaced whole."""
        self._check_record()
        leaves = jax.tree.leaves((self.params, self.policy, self.eval_keys))
        meta = {
            "format": saved_fit.FORMAT,
            "method": self.method,
            "config": dataclasses.asdict(self.config),
            "dataset_fingerprint": self.dataset.fingerprint(),
            "run_fingerprint": run_fingerprint(
                self.dataset, self.config, self.method, self.num_seeds, int(self.record["seed"])
            ),
            "num_leaves": len(leaves),
            # numpy stores types it cannot name (bfloat16) as raw bytes: `load` checks the names.
            "dtypes": [str(np.asarray(leaf).dtype) for leaf in leaves],
        }
        custom = [part for part in ("backbone", "agent") if getattr(self, f"custom_{part}")]
        if custom:  # `load` needs them back: they are code, not saved
            meta["custom"] = custom
        return saved_fit.write(directory, self.record, self.dataset, leaves, meta, overwrite)

    def _check_record(self) -> None:
        """The record describes this fit: its data, config, method and seeds (a fit changed with
        `dataclasses.replace` may not), else nothing is saved."""
        record, problem = self.record, None
        recorded = record.get("dataset_fingerprint")
        if recorded and recorded != self.dataset.fingerprint():
            problem = f"other data than its dataset ({self.dataset.name})"
        config = json.loads(json.dumps(dataclasses.asdict(self.config)))
        changed = [k for k, v in record.get("config", {}).items() if config.get(k) != v]
        if changed:
            problem = f"another config than its own (Config.{changed[0]})"
        if record.get("method", self.method) != self.method:
            problem = f"method {record['method']!r}, not {self.method!r}"
        seeds = {leaf.shape[0] for leaf in jax.tree.leaves((self.params, self.policy))}
        if self.eval_keys is not None:
            seeds.add(self.eval_keys.shape[0])
        if seeds != {self.num_seeds}:
            problem = f"{self.num_seeds} seeds, not the snapshots' {sorted(seeds)}"
        if problem:
            raise outputs.CheckpointError(
                f"this fit's record describes a run with {problem}: nothing was saved. Save the "
                f"fit its run returned."
            )
