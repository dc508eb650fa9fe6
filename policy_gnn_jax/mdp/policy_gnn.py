"""Policy-GNN (and the random policy) as a `Trainer`: the MDP loop (`loop.py`) wired for a
config and a graph (the contexts, the initial state, the final evaluation), and what its runs add
to `results.json`."""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from policy_gnn_jax import backbones, metrics
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


def env_context(
    config: config_lib.Config,
    g: graph_lib.Graph,
    backbone: backbone_lib.Backbone,
    subgraphs: bool | None = None,
) -> env.EnvContext:
    """The MDP for `g`'s shapes, on the subgraph (or host) engine where `subgraphs`, else the
    full engine; None: as `subgraph.use_subgraphs` chooses for the config, here once."""
    if backbone.max_depth < config.max_depth or backbone.min_depth > config.min_depth:
        raise config_lib.ConfigError(
            f"the backbone computes depths {backbone.min_depth}..{backbone.max_depth} but the "
            f"policy may pick {config.min_depth}..{config.max_depth}: build it with "
            f"min_depth <= config.min_depth and max_depth >= config.max_depth."
        )
    if subgraphs is None:
        subgraphs = subgraph.use_subgraphs(config, g)
    if subgraphs:
        engine, sampler = subgraph_engine.engine_and_sampler(config, g)
    else:
        engine, sampler = env.FULL_ENGINE, None
    num_walkers = config.num_walkers or g.train_index.shape[0]
    return env.EnvContext(config, backbone, engine, num_walkers, sampler)


def make_context(
    config: config_lib.Config,
    g: graph_lib.Graph,
    backbone: backbone_lib.Backbone | None = None,
    agent: agent_lib.Agent | None = None,
) -> loop.LoopContext:
    """Wires the loop for `g`'s shapes: the config's backbone and agent unless others are
    given, and the engine."""
    backbone = backbone or backbones.for_policy(config, g)
    agent = agent or make_agent(config, g)
    observer = audit_lib.make_audit(config, backbone, agent) if config.audit else None
    return loop.LoopContext(config, env_context(config, g, backbone), agent, observer)


def mdp_data(g: graph_lib.Graph, train_hops: np.ndarray) -> env.MDPData:
    """`train_hops`: [T, T] hop distances between training nodes (`graph.train_hop_distances`)."""
    num_train = g.train_index.shape[0]
    train_pos = jnp.full(g.num_nodes, -1, jnp.int32).at[g.train_index].set(jnp.arange(num_train))
    return env.MDPData(g, train_pos, jnp.asarray(train_hops))


def init_env(ctx: env.EnvContext, data: env.MDPData, key: jax.Array) -> env.EnvState:
    k_params, k_reset = jax.random.split(key)
    params = ctx.backbone.init(k_params, data.graph)
    capacity = ctx.config.buffer_size + ctx.num_walkers - 1
    # The engine draws from a key of its own (folded in): the other streams are every engine's.
    engine_state = ctx.engine.init(ctx, data, jax.random.fold_in(key, 1))
    return env.EnvState(
        nodes=env.start_nodes(ctx, data, k_reset),
        params=params,
        opt_state=ctx.backbone.optimizer.init(params),
        buffers=env.init_buffers(ctx.config.num_actions, capacity),
        history=jnp.zeros(ctx.config.reward_window, jnp.float32),
        history_count=jnp.zeros((), jnp.int32),
        engine_state=engine_state,
        val_logits=ctx.engine.validation_logits(ctx, data, params, engine_state),
    )


def init(ctx: loop.LoopContext, data: env.MDPData, key: jax.Array) -> loop.RunnerState:
    key, k_env, k_agent = jax.random.split(key, 3)
    env_state = init_env(ctx.env, data, k_env)
    agent_state, policy = ctx.agent.init(k_agent, data.graph)
    best = loop.Snapshot(
        params=env_state.params,
        policy=policy,
        val_metric=jnp.full((), -1.0, jnp.float32),
        step=jnp.zeros((), jnp.int32),
    )
    return loop.RunnerState(agent_state, env_state, best, key, jnp.zeros((), jnp.int32))


def selected(rs: loop.RunnerState):
    return rs.best.params, rs.best.policy


def evaluation_key(key: jax.Array) -> jax.Array:
    """The key the final evaluation draws depths with (the random policy's), from the loop's
    final key; `Fit.predict_depths` uses it too, so its test depths equal the evaluation's."""
    return jax.random.fold_in(key, 1)


def evaluate(ctx: loop.LoopContext, data: env.MDPData, rs: loop.RunnerState) -> dict:
    """The honest protocol: the snapshot's depths on test nodes. The only reader of test labels."""
    g, best = data.graph, rs.best
    depths = ctx.agent.depths(evaluation_key(rs.key), best.policy, g, g.test_index)
    key = jax.random.fold_in(evaluation_key(rs.key), 1)  # the host engine's samples
    test_logits = ctx.env.engine.test_logits(ctx.env, data, best.params, key)
    logits = backbone_lib.depth_logits(ctx.env.backbone, test_logits, depths)
    results = {
        # the graph's metric: accuracy, or ROC AUC on a two-class graph
        "test_metric": metrics.score(logits, g.labels[g.test_index], g.metric),
        "val_metric": best.val_metric,
        "best_step": best.step,
        "test_depths": depths,
        "test_depth_counts": jnp.bincount(
            depths - ctx.config.min_depth, length=ctx.agent.num_actions
        ),
    }
    if ctx.observer is not None:
        results.update(ctx.observer.evaluate(g, best.params, depths))
    return results


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
        train_chunk=functools.partial(loop.train_chunk, ctx),
        evaluate=functools.partial(evaluate, ctx),
        selected=selected,
        data=mdp_data(g, train_hops),
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
