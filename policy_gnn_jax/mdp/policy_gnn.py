"""Policy-GNN (and the random policy) as a `Trainer`: the MDP loop (`loop.py`) wired for a
config and a graph, and what its runs add to `results.json`."""

from __future__ import annotations

import functools
import warnings

import numpy as np

from policy_gnn_jax import backbones
from policy_gnn_jax import config as config_lib
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.agents import base as agent_lib
from policy_gnn_jax.agents import build, random_policy
from policy_gnn_jax.backbones import gcn as backbone_lib
from policy_gnn_jax.graph import subgraph
from policy_gnn_jax.mdp import audit as audit_lib
from policy_gnn_jax.mdp import env, loop, subgraph_engine
from policy_gnn_jax.runtime import records
from policy_gnn_jax.runtime.trainer import Trainer


def make_agent(config: config_lib.Config, g: graph_lib.Graph) -> agent_lib.Agent:
    """The config's agent: the random policy or the DQN."""
    if config.random_policy:
        return random_policy.random_agent(config.min_depth, config.max_depth)
    return build.dqn_agent(config, g)


def make_context(
    config: config_lib.Config,
    g: graph_lib.Graph,
    backbone: backbone_lib.Backbone | None = None,
    agent: agent_lib.Agent | None = None,
) -> loop.LoopContext:
    """Wires the loop for `g`'s shapes: the config's backbone and agent unless others are
    given, and the engine (`subgraph.use_subgraphs`), chosen here once."""
    backbone = backbone or backbones.for_policy(config, g)
    agent = agent or make_agent(config, g)
    if subgraph.use_subgraphs(config, g):
        env_ctx = subgraph_engine.make_context(config, g, backbone)
    else:
        env_ctx = env.make_context(config, g, backbone)
    observer = audit_lib.make_audit(config, backbone, agent) if config.audit else None
    return loop.LoopContext(config, env_ctx, agent, observer)


def make_trainer(
    config: config_lib.Config,
    g: graph_lib.Graph,
    train_hops: np.ndarray,
    backbone: backbone_lib.Backbone | None = None,
    agent: agent_lib.Agent | None = None,
) -> Trainer:
    """Policy-GNN (or the random policy when `config.random_policy`) as a `Trainer` on `g`."""
    ctx = make_context(config, g, backbone, agent)
    return Trainer(
        init=functools.partial(loop.init, ctx),
        train_chunk=functools.partial(loop.train_chunk, ctx),
        evaluate=functools.partial(loop.evaluate, ctx),
        selected=loop.selected,
        data=env.mdp_data(g, train_hops),
        total=config.num_episodes,
        per_call=min(config.episodes_per_call, config.num_episodes),
        unit="episode",
    )


def _check_agent_choices(config, metrics, results) -> None:
    """An agent's actions and depths inside the config's range, or an error naming which: out
    of range, a depth would be clamped by the gather and an action counted nowhere, and the
    record would describe another run than the one that ran."""
    depths = np.asarray(results["test_depths"])
    outside = (depths < config.min_depth) | (depths > config.max_depth)
    if outside.any() or np.asarray(metrics["depths_outside"]).any():
        said = f"{int(depths[outside][0])}" if outside.any() else "depths for validation nodes"
        raise config_lib.ConfigError(
            f"the agent's depths() returned {said}, outside the config's depths "
            f"{config.min_depth}..{config.max_depth}: it must return depths in that range."
        )
    if np.asarray(metrics["actions_outside"]).any():
        raise config_lib.ConfigError(
            f"the agent's act() returned actions outside 0..{config.num_actions - 1} (the "
            f"config's {config.num_actions} depths) at some steps: it must return action indices "
            f"in that range."
        )


def _never_trained(config, metrics) -> dict:
    """A run in which some seed's backbone never took a step (no action buffer filled) finishes,
    but says so: a warning, and the record's `warnings`. Its test score is an untrained GCN's."""
    trained = metrics["gcn_trained"].reshape(metrics["gcn_trained"].shape[0], -1).sum(1)
    never = int((trained == 0).sum())
    if not never:
        return {}
    message = (
        f"the backbone never trained in {never} of {trained.size} seeds: no action buffer "
        f"reached Config.buffer_size={config.buffer_size} (--buffer-size) in "
        f"{config.num_episodes} episodes of {config.steps_per_episode} steps. Lower buffer_size "
        f"or run more episodes; these test scores are an untrained backbone's."
    )
    warnings.warn(message, stacklevel=2)
    return {"warnings": [message]}


def record_fields(config, metrics, results) -> dict:
    _check_agent_choices(config, metrics, results)
    audit = audit_lib.record_fields(metrics, results) if config.audit else {}
    return {
        **audit,
        **_never_trained(config, metrics),
        **records.depth_fields(config, results),
        "val_metric_curve": {
            "per_episode_mean_over_seeds": metrics["val_metric"].mean(0).tolist(),
            "per_seed": metrics["val_metric"].tolist(),
        },
        "best_step": results["best_step"].tolist(),
        "test_depths": results["test_depths"].tolist(),
        "gcn_updates_per_step": float(metrics["gcn_trained"].mean()),
        "train_action_share": (
            metrics["action_counts"].sum((0, 1)) / max(1, metrics["action_counts"].sum())
        ).tolist(),
    }
