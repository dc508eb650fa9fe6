"""Policy-GNN's whole MDP loop as one compiled scan (docs/algorithm.md sections 3-5).

One MDP step (`mdp_step`) reads top to bottom as

    agent.act -> agent.depths (validation) -> env.step -> agent.learn -> keep_best (-> observer)

Every function here is pure and top level over a static `LoopContext` and takes the graph as data
(`env.MDPData`); the backbone, the agent and the engine are reached only through their
interfaces, and the audit is an optional observer of the step (`audit.Observer`).
`make_trainer` wires them for a config and returns a `Trainer` that the runner jits, vmaps over
seeds and drives chunk by chunk.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from policy_gnn_jax import backbones, metrics
from policy_gnn_jax import config as config_lib
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.agents import base as agent_lib
from policy_gnn_jax.agents import dqn, replay
from policy_gnn_jax.backbones import base as backbone_lib
from policy_gnn_jax.graph import subgraph
from policy_gnn_jax.mdp import audit as audit_lib
from policy_gnn_jax.mdp import env, subgraph_engine
from policy_gnn_jax.runtime import records
from policy_gnn_jax.runtime.trainer import Trainer
from policy_gnn_jax.treeutil import tree_select


@struct.dataclass
class Snapshot:
    """The best-validation backbone parameters and the policy that chose their depths."""

    params: Any
    policy: Any
    val_accuracy: jax.Array
    step: jax.Array


@struct.dataclass
class RunnerState:
    agent: Any
    env: env.EnvState
    best: Snapshot
    key: jax.Array
    step: jax.Array


class LoopContext(NamedTuple):
    config: config_lib.Config
    env: env.EnvContext
    agent: agent_lib.Agent
    observer: audit_lib.Observer | None


def init(ctx: LoopContext, data: env.MDPData, key: jax.Array) -> RunnerState:
    key, k_env, k_agent = jax.random.split(key, 3)
    env_state = env.init(ctx.env, data, k_env)
    agent_state, policy = ctx.agent.init(k_agent, data.graph)
    best = Snapshot(
        params=env_state.params,
        policy=policy,
        val_accuracy=jnp.full((), -1.0, jnp.float32),
        step=jnp.zeros((), jnp.int32),
    )
    return RunnerState(agent_state, env_state, best, key, jnp.zeros((), jnp.int32))


def mdp_step(ctx: LoopContext, data: env.MDPData, rs: RunnerState, _=None):
    """One MDP step for all walkers. Returns the new state and this step's scalar metrics."""
    # The first five subkeys are those of `split(key, 5)`: the observer's is extra.
    key, k_act, k_val, k_env, k_learn, k_observe = jax.random.split(rs.key, 6)
    g, nodes = data.graph, rs.env.nodes
    agent_state, policy, actions = ctx.agent.act(k_act, rs.agent, g, nodes, rs.step)
    val_depths = ctx.agent.depths(k_val, policy, g, g.val_index)
    env_state, out = env.step(ctx.env, data, k_env, rs.env, actions, val_depths)
    rewards = jnp.broadcast_to(out.reward, nodes.shape)
    transition = replay.Transition(nodes, actions, rewards, env_state.nodes)
    agent_state, learned = ctx.agent.learn(k_learn, agent_state, policy, g, transition, rs.step)
    best = keep_best(rs.best, out.val_accuracy, env_state.params, policy, rs.step)
    metrics = {
        "val_accuracy": out.val_accuracy,
        "reward": out.reward,
        "gcn_trained": out.gcn_trained,
        "gcn_loss": out.gcn_loss,
        "backbone_finite": out.backbone_finite,
        "action_counts": jnp.bincount(actions, length=ctx.agent.num_actions),
        **learned,
    }
    if ctx.observer is not None:
        metrics.update(ctx.observer.observe(k_observe, g, env_state.params, policy))
    return RunnerState(agent_state, env_state, best, key, rs.step + 1), metrics


def keep_best(best: Snapshot, acc, params, policy, step) -> Snapshot:
    """Keeps the snapshot with the highest validation accuracy so far (ties: the earliest)."""
    return tree_select(acc > best.val_accuracy, Snapshot(params, policy, acc, step), best)


def summarise_episode(ctx: LoopContext, metrics: dict) -> dict:
    """Per-step metrics [T, ...] -> one value per episode."""
    trained = metrics["gcn_trained"]
    updated = metrics["dqn_updates"] > 0
    # nanmean (nothing here is NaN by design) keeps earlier runs' curves bit-identical.
    summary = {
        name: jnp.nanmean(metrics[name], axis=0)
        for name in ("val_accuracy", "reward", "epsilon", "gcn_trained")
    }
    summary.update(
        action_counts=metrics["action_counts"].sum(0),
        dqn_updates=metrics["dqn_updates"].sum(0),
        td_loss=_mean_where(metrics["td_loss"], updated),
        gcn_loss=_mean_where(metrics["gcn_loss"], trained),
        backbone_finite=jnp.all(metrics["backbone_finite"]),
        agent_finite=jnp.all(metrics["agent_finite"]),
    )
    if ctx.observer is not None:
        summary.update(ctx.observer.summarise(metrics))
    return summary


def _mean_where(values: jax.Array, mask: jax.Array) -> jax.Array:
    return jnp.sum(jnp.where(mask, values, 0.0)) / jnp.maximum(mask.sum(), 1)


def run_episode(ctx: LoopContext, data: env.MDPData, rs: RunnerState, _=None):
    """Resets the walkers, then `steps_per_episode` MDP steps; the networks persist."""
    key, k_reset = jax.random.split(rs.key)
    rs = rs.replace(env=env.reset(ctx.env, data, k_reset, rs.env), key=key)
    step = functools.partial(mdp_step, ctx, data)
    rs, metrics = jax.lax.scan(step, rs, length=ctx.config.steps_per_episode)
    return rs, summarise_episode(ctx, metrics)


def train_chunk(ctx: LoopContext, data: env.MDPData, rs: RunnerState, length: int):
    """`length` episodes (a static int) as one scan; metrics have a leading [length] axis."""
    return jax.lax.scan(functools.partial(run_episode, ctx, data), rs, length=length)


def evaluation_key(key: jax.Array) -> jax.Array:
    """The key the final evaluation draws depths with (the random policy's), from the loop's
    final key; `Fit.predict_depths` uses it too, so its test depths equal the evaluation's."""
    return jax.random.fold_in(key, 1)


def evaluate(ctx: LoopContext, data: env.MDPData, rs: RunnerState) -> dict:
    """The honest protocol: the snapshot's depths on test nodes. The only reader of test labels."""
    g, best = data.graph, rs.best
    depths = ctx.agent.depths(evaluation_key(rs.key), best.policy, g, g.test_index)
    key = jax.random.fold_in(evaluation_key(rs.key), 1)  # the host engine's samples
    test_logits = ctx.env.engine.test_logits(ctx.env, data, best.params, key)
    logits = backbone_lib.depth_logits(ctx.env.backbone, test_logits, depths)
    results = {
        # the graph's metric (accuracy, or ROC AUC): the name stays for results.json's readers
        "test_accuracy": metrics.score(logits, g.labels[g.test_index], g.metric),
        "val_accuracy": best.val_accuracy,
        "best_step": best.step,
        "test_depths": depths,
        "test_depth_counts": jnp.bincount(
            depths - ctx.config.min_depth, length=ctx.agent.num_actions
        ),
    }
    if ctx.observer is not None:
        results.update(ctx.observer.evaluate(g, best.params, depths))
    return results


def selected(rs: RunnerState):
    return rs.best.params, rs.best.policy


def make_agent(config: config_lib.Config, g: graph_lib.Graph) -> agent_lib.Agent:
    """The config's agent: the random policy or the DQN."""
    if config.random_policy:
        return agent_lib.random_agent(config.min_depth, config.max_depth)
    return dqn.dqn_agent(config, g)


def make_context(
    config: config_lib.Config,
    g: graph_lib.Graph,
    backbone: backbone_lib.Backbone | None = None,
    agent: agent_lib.Agent | None = None,
) -> LoopContext:
    """Wires the loop for `g`'s shapes: the config's backbone and agent unless others are
    given, and the engine (`subgraph.use_subgraphs`), chosen here once."""
    backbone = backbone or backbones.for_policy(config, g)
    agent = agent or make_agent(config, g)
    if subgraph.use_subgraphs(config, g):
        env_ctx = subgraph_engine.make_context(config, g, backbone)
    else:
        env_ctx = env.make_context(config, g, backbone)
    observer = audit_lib.make_audit(config, backbone, agent) if config.audit else None
    return LoopContext(config, env_ctx, agent, observer)


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
        init=functools.partial(init, ctx),
        train_chunk=functools.partial(train_chunk, ctx),
        evaluate=functools.partial(evaluate, ctx),
        selected=selected,
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
    if outside.any():
        raise config_lib.ConfigError(
            f"the agent's depths() returned {int(depths[outside][0])}, outside the config's "
            f"depths {config.min_depth}..{config.max_depth}: it must return depths in that range."
        )
    per_step = np.asarray(metrics["action_counts"]).sum(-1)  # walkers whose action was counted
    if per_step.size and (per_step.min() != per_step.max() or per_step.max() == 0):
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
        "val_accuracy_curve": {
            "per_episode_mean_over_seeds": metrics["val_accuracy"].mean(0).tolist(),
            "per_seed": metrics["val_accuracy"].tolist(),
        },
        "best_step": results["best_step"].tolist(),
        "test_depths": results["test_depths"].tolist(),
        "gcn_updates_per_step": float(metrics["gcn_trained"].mean()),
        "train_action_share": (
            metrics["action_counts"].sum((0, 1)) / max(1, metrics["action_counts"].sum())
        ).tolist(),
    }
