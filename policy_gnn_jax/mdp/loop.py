"""Policy-GNN's whole MDP loop as one compiled scan (docs/algorithm.md sections 3-5).

One MDP step (`mdp_step`) reads top to bottom as

    agent.act -> agent.depths (validation) -> env.step -> agent.learn -> keep_best (-> observer)

Every function here is pure and top level over a static `LoopContext` and takes the graph as data
(`env.MDPData`); the backbone, the agent and the engine are reached only through their
interfaces, and the audit is an optional observer of the step (`audit.Observer`).
`mdp/policy_gnn.py` wires them for a config into a `Trainer` (with the initial state and the
final evaluation) that the runner jits, runs over the seeds and drives chunk by chunk.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from policy_gnn_jax import config as config_lib
from policy_gnn_jax.agents import base as agent_lib
from policy_gnn_jax.mdp import audit as audit_lib
from policy_gnn_jax.mdp import env
from policy_gnn_jax.metrics import mean_where, tree_select


@struct.dataclass
class Snapshot:
    """The best-validation backbone parameters and the policy that chose their depths."""

    params: Any
    policy: Any
    val_metric: jax.Array
    step: jax.Array


@struct.dataclass
class RunnerState:
    agent: Any
    env: env.EnvState
    best: Snapshot
    key: jax.Array
    step: jax.Array


# The loop's own per-step metrics and their episode summaries: an agent's may not reuse them.
LOOP_METRICS = ("val_metric", "reward", "gcn_trained", "gcn_loss", "backbone_finite",
                "action_counts", "actions_outside", "depths_outside")  # fmt: skip


class LoopContext(NamedTuple):
    config: config_lib.Config
    env: env.EnvContext
    agent: agent_lib.Agent
    observer: audit_lib.Observer | None


def mdp_step(ctx: LoopContext, data: env.MDPData, rs: RunnerState, _=None):
    """One MDP step for all walkers. Returns the new state and this step's metrics: the loop's
    own, the agent's (`learn`'s) and the observer's, each summarised by its owner."""
    # One subkey per consumer, the observer's last: with the audit on or off, every other
    # stream is the same, so the audit changes no result.
    key, k_act, k_val, k_env, k_learn, k_observe = jax.random.split(rs.key, 6)
    g, nodes = data.graph, rs.env.nodes
    agent_state, policy, actions = ctx.agent.act(k_act, rs.agent, g, nodes, rs.step)
    val_depths = ctx.agent.depths(k_val, policy, g, g.val_index)
    env_state, out = env.step(ctx.env, data, k_env, rs.env, actions, val_depths)
    rewards = jnp.broadcast_to(out.reward, nodes.shape)
    transition = agent_lib.Transition(nodes, actions, rewards, env_state.nodes)
    agent_state, learned = ctx.agent.learn(k_learn, agent_state, policy, g, transition, rs.step)
    best = keep_best(rs.best, out.val_metric, env_state.params, policy, rs.step)
    step_metrics = {
        "val_metric": out.val_metric,
        "reward": out.reward,
        "gcn_trained": out.gcn_trained,
        "gcn_loss": out.gcn_loss,
        "backbone_finite": out.backbone_finite,
        "action_counts": jnp.bincount(actions, length=ctx.agent.num_actions),
        # bincount drops (or clips) an action outside 0..A-1: counted apart, refused after.
        "actions_outside": jnp.sum((actions < 0) | (actions >= ctx.agent.num_actions)),
        "depths_outside": jnp.sum(
            (val_depths < ctx.config.min_depth) | (val_depths > ctx.config.max_depth)
        ),
    }
    observed = {}
    if ctx.observer is not None:
        observed = ctx.observer.observe(k_observe, g, env_state.params, policy)
    new = RunnerState(agent_state, env_state, best, key, rs.step + 1)
    return new, (step_metrics, learned, observed)


def keep_best(best: Snapshot, score, params, policy, step) -> Snapshot:
    """Keeps the snapshot with the highest validation score so far (ties: the earliest)."""
    return tree_select(score > best.val_metric, Snapshot(params, policy, score, step), best)


def summarise_episode(ctx: LoopContext, per_step: tuple) -> dict:
    """Per-step metrics [T, ...] -> one value per episode: the loop's own here, the agent's and
    the observer's by their `summarise`."""
    metrics, learned, observed = per_step
    summary = {name: jnp.mean(metrics[name], axis=0) for name in ("val_metric", "reward")}
    summary.update(
        gcn_trained=jnp.mean(metrics["gcn_trained"], axis=0),
        action_counts=metrics["action_counts"].sum(0),
        actions_outside=metrics["actions_outside"].sum(0),
        depths_outside=metrics["depths_outside"].sum(0),
        gcn_loss=mean_where(metrics["gcn_loss"], metrics["gcn_trained"]),
        backbone_finite=jnp.all(metrics["backbone_finite"]),
        **ctx.agent.summarise(learned),
    )
    if ctx.observer is not None:
        summary.update(ctx.observer.summarise(observed))
    return summary


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
