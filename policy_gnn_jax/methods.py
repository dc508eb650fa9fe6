"""The methods `fit` can run, each one entry: how it trains, what it records, how it predicts.

A `Method` is a record of pure functions, like `Backbone` and `Agent`: `fit`, `Fit`, `load` and
the command line only call these, never test a method's name. Built in:

- `policy-gnn`: the paper's DQN meta-policy over the MDP loop (`mdp/loop.py`);
- `random`: the same loop with the random-policy agent;
- `gcn` (alias `fixed-depth`): one depth for every node, `config.depth`, on any backbone.

Methods outside the core register themselves with `register`; `policy-gnn-plus` lives in
`contrib/adaptive_depth/plus_method.py` and is imported the first time its name is asked for, so the
core never imports the research code.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import types
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

from policy_gnn_jax import backbones, data, fixed_depth
from policy_gnn_jax import config as config_lib
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.agents.base import Agent
from policy_gnn_jax.backbones.gcn import Backbone
from policy_gnn_jax.graph import host, subgraph
from policy_gnn_jax.mdp import policy_gnn
from policy_gnn_jax.runtime import records
from policy_gnn_jax.runtime.trainer import Trainer

# (params, policy, evaluation key, graph, nodes [M]) -> depths [M], for one seed; `Fit` vmaps it.
DepthFn = Callable[[Any, Any, Any, jnp.ndarray], jnp.ndarray]


def learning_rate_hints(config) -> dict:
    """The divergence fix per network, naming the CLI flag and the Config field."""
    return {
        "backbone": (
            f"Lower the GCN learning rate (--gcn-lr / Config.gcn_lr, now {config.gcn_lr:g})"
        ),
        "agent": f"Lower the Q-network learning rate (--q-lr / Config.q_lr, now {config.q_lr:g})",
    }


# Features beyond this overflow float32 products within a layer or two: a divergence is then
# the data's scale, and lowering a learning rate would not help.
LARGE_FEATURE = 1e6


@dataclasses.dataclass(frozen=True)
class Method:
    """One method `fit` can run.

    Attributes:
      name: what `fit(method=...)`, `--method` and `results.json` call it.
      make_trainer: (config, dataset, graph, backbone or None, agent or None) -> `Trainer`.
      backbone: (config, graph) -> the `Backbone` whose parameters a `Fit` keeps (prediction).
      depth_fn: (config, dataset, graph, agent or None) -> a `DepthFn`.
      record_fields: (config, metrics, results) -> the method's own fields of `results.json`.
      prepare: config -> the config the method runs (e.g. the random policy's flag set).
      label: config -> a short name for progress bars, summaries and folder names.
      hints: config -> the divergence fix per network (`learning_rate_hints`).
      engine: (config, graph) -> "full", "subgraph" or "host", what the record says ran.
      graph: (config, dataset) -> the device `Graph` the method trains on (the whole graph;
        the split nodes alone under the host engine, `graph/host.py`).
      uses_eval_keys: whether prediction needs each seed's evaluation key (a random policy
        draws its depths with it).
      takes_backbone, takes_agent: whether a custom `Backbone` / `Agent` may be passed.
      ignores: `Config` fields the method never reads (a flag or `--set` of one is warned
        about, and neither parsed nor applied).
      config_type: the `Config` class of the method's runs (a subclass adds its own fields).
    """

    name: str
    make_trainer: Callable[..., Trainer]
    backbone: Callable[[config_lib.Config, graph_lib.Graph], Backbone]
    depth_fn: Callable[..., DepthFn]
    record_fields: Callable[[config_lib.Config, dict, dict], dict]
    prepare: Callable[[config_lib.Config], config_lib.Config] = lambda config: config
    label: Callable[[config_lib.Config], str] | None = None
    hints: Callable[[config_lib.Config], dict] = learning_rate_hints
    engine: Callable[[config_lib.Config, graph_lib.Graph], str] = lambda config, g: "full"
    graph: Callable[[config_lib.Config, data.Dataset], graph_lib.Graph] = lambda config, ds: (
        graph_lib.from_dataset(ds)
    )
    uses_eval_keys: bool = False
    takes_backbone: bool = True
    takes_agent: bool = False
    ignores: frozenset[str] = frozenset()
    config_type: type[config_lib.Config] = config_lib.Config

    def run_config(self, config: config_lib.Config) -> config_lib.Config:
        """The config as this method runs it: `prepare`d, and of its `config_type` (another
        method's own fields, which this one never reads, left out; its own at their defaults
        where the config has none: one config serves several methods)."""
        return self.config_type.of(self.prepare(config))

    def describe(self, config: config_lib.Config) -> str:
        return self.label(config) if self.label else self.name

    def divergence_hints(self, config: config_lib.Config, ds: data.Dataset) -> dict:
        """The divergence fix per network; a first fix of the data when its features are huge."""
        hints = dict(self.hints(config))
        largest = data.largest_feature(ds.features)  # a block of rows at a time when dense
        if largest > LARGE_FEATURE:
            hints["backbone"] = (
                f"The features reach {largest:.3g}: rescale them first (e.g. divide by their "
                f"largest value, or row-normalise). Else: {hints['backbone']}"
            )
        return hints

    def check_parts(self, backbone, agent, config: config_lib.Config) -> None:
        """Refuses custom parts of the wrong type, that this method cannot take, or (an agent)
        whose actions are not the config's depth range."""
        if backbone is not None and not isinstance(backbone, Backbone):
            raise config_lib.ConfigError(
                f"backbone must be a policy_gnn_jax.Backbone, got {type(backbone).__name__}."
            )
        if agent is not None and not isinstance(agent, Agent):
            raise config_lib.ConfigError(
                f"agent must be a policy_gnn_jax.Agent, got {type(agent).__name__}."
            )
        if backbone is not None and not self.takes_backbone:
            raise config_lib.ConfigError(f"method {self.name!r} takes no custom backbone.")
        if agent is not None and not self.takes_agent:
            raise config_lib.ConfigError(
                f"method {self.name!r} takes no agent (the MDP methods policy-gnn and random do)."
            )
        if agent is not None and agent.num_actions != config.num_actions:
            raise config_lib.ConfigError(
                f"the agent has {agent.num_actions} actions, but depths {config.min_depth}.."
                f"{config.max_depth} need {config.num_actions}: build it for the config's depths."
            )


_REGISTRY: dict[str, Method] = {}
_ALIASES: dict[str, str] = {"fixed-depth": "gcn"}
# Methods outside the core: name -> the module that registers it when imported.
_PLUGINS: dict[str, str] = {"policy-gnn-plus": "policy_gnn_jax.contrib.adaptive_depth.plus_method"}


def register(method: Method) -> Method:
    """Adds `method` to the names `fit`, `load` and the command line accept."""
    _REGISTRY[method.name] = method
    return method


def names() -> tuple[str, ...]:
    """Every method name, built-in and plug-in (aliases not included)."""
    return tuple(dict.fromkeys([*_REGISTRY, *_PLUGINS]))


def choices() -> tuple[str, ...]:
    """The names and aliases the command line accepts."""
    return (*names(), *_ALIASES)


def get(name: str) -> Method:
    """The method called `name` (or an alias of it); a ConfigError naming the choices if none."""
    if isinstance(name, Method):
        return name
    name = _ALIASES.get(name, name)
    if name not in _REGISTRY and name in _PLUGINS:
        importlib.import_module(_PLUGINS[name])
    if name not in _REGISTRY:
        raise config_lib.ConfigError(f"unknown method {name!r}: choose one of {choices()}.")
    return _REGISTRY[name]


# The MDP loop: Policy-GNN and the random policy.


def _mdp_trainer(config, ds: data.Dataset, g, backbone, agent) -> Trainer:
    if config.audit and g.metric != "accuracy":  # the released code's metric is an accuracy
        raise config_lib.ConfigError(
            f"the audit reproduces the released code's accuracy; {ds.name} is scored by "
            f"{g.metric}: run it without --audit (Config.audit=False)."
        )
    if g.host is not None and config.audit:
        raise config_lib.ConfigError(
            "the audit scores the released code's metric on the whole graph, which the host "
            "engine keeps off the device: run it with --engine full or subgraph."
        )
    if g.host is None:
        hops = graph_lib.train_hop_distances(ds, config.max_depth)
    else:  # no [T, N] table: a bounded BFS over the host's adjacency
        train = np.asarray(ds.train_index, np.int64)
        hops = host.hop_distances(g.host, train, train, config.max_depth)
    return policy_gnn.make_trainer(config, g, hops, backbone=backbone, agent=agent)


def _agent_depths(agent: Agent, params, policy, key, g, nodes):
    del params  # the agent decides from the policy alone
    return agent.depths(key, policy, g, nodes)


def _mdp_depth_fn(config, ds, g, agent) -> DepthFn:
    del ds
    return functools.partial(_agent_depths, agent or policy_gnn.make_agent(config, g))


def _mdp_engine(config, g) -> str:
    if g.host is not None:
        return "host"
    return "subgraph" if subgraph.use_subgraphs(config, g) else "full"


def _mdp_graph(config, ds: data.Dataset) -> graph_lib.Graph:
    """The host engine's split-node graph, else the whole graph."""
    return host.split_graph(ds) if config.engine == "host" else graph_lib.from_dataset(ds)


def _with_policy(random_policy: bool, config):
    return dataclasses.replace(config, random_policy=random_policy)


# The MDP's own fields; the depth range (min/max_depth) is every policy's.
MDP_ONLY_FIELDS = (
    *(f for f in config_lib.SECTIONS["mdp"] if f not in ("min_depth", "max_depth")),
    *config_lib.SECTIONS["agent"],
    *config_lib.SECTIONS["engine"],
    "episodes_per_call",
    "audit",
)
_MDP = dict(
    make_trainer=_mdp_trainer,
    backbone=backbones.for_policy,
    depth_fn=_mdp_depth_fn,
    record_fields=policy_gnn.record_fields,
    engine=_mdp_engine,
    graph=_mdp_graph,
    uses_eval_keys=True,
    takes_agent=True,
    # random_policy: each MDP method sets it (`prepare`), whatever the config said.
    ignores=frozenset(("depth", "epochs", "random_policy")),
)
POLICY_GNN = register(
    Method(name="policy-gnn", prepare=functools.partial(_with_policy, False), **_MDP)
)
RANDOM = register(
    Method(
        name="random",
        prepare=functools.partial(_with_policy, True),
        **{**_MDP, "ignores": _MDP["ignores"] | set(config_lib.SECTIONS["agent"])},
    )
)


# One depth for every node.


def _fixed_trainer(config, ds, g, backbone, agent) -> Trainer:
    del ds, agent
    return fixed_depth.make_baseline(config, g, backbone=backbone)


def _fixed_depths(depth: int, params, policy, key, g, nodes):
    del params, policy, key, g
    return jnp.full(nodes.shape, depth, jnp.int32)


def _fixed_depth_fn(config, ds, g, agent) -> DepthFn:
    del ds, g, agent
    return functools.partial(_fixed_depths, config.depth)


def _fixed_record_fields(config, metrics, results) -> dict:
    del config, metrics
    return {"best_epoch": results["best_epoch"].tolist()}


FIXED_DEPTH = register(
    Method(
        name="gcn",
        make_trainer=_fixed_trainer,
        backbone=backbones.for_fixed_depth,
        depth_fn=_fixed_depth_fn,
        record_fields=_fixed_record_fields,
        label=lambda config: f"gcn depth {config.depth}",
        # The depth range is the policies'; the baseline trains `depth` alone.
        ignores=frozenset(("min_depth", "max_depth", *MDP_ONLY_FIELDS)),
    )
)


def summary_line(record: dict) -> str:
    """The one-line summary of a results record, naming the method by its label."""
    config = types.SimpleNamespace(**record["config"])
    return records.summary_line(record, get(record["method"]).describe(config))
