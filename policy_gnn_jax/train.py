"""Policy-GNN's whole MDP loop as one compiled scan (ALGORITHM.md sections 3-5).

`make_train(config, g, train_hops)` returns pure `init(key)`, `train_chunk(state)` (a scan over
`episodes_per_call` episodes of `steps_per_episode` steps) and `evaluate(state)` (the honest test
evaluation of the best-validation snapshot). The runner vmaps them over seeds.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import dqn, env, gcn, normaliser, qnet, replay
from policy_gnn_jax import graph as graph_lib


@struct.dataclass
class Snapshot:
    """The best-validation parameters and the normaliser statistics their policy saw."""

    gcn_params: dict
    q_params: dict
    mean: jax.Array
    std: jax.Array
    val_accuracy: jax.Array
    step: jax.Array


@struct.dataclass
class RunnerState:
    dqn: dqn.DQNState
    env: env.EnvState
    replay: replay.ReplayState
    normaliser: normaliser.NormaliserState
    best: Snapshot
    key: jax.Array
    step: jax.Array


class Trainer(NamedTuple):
    init: callable
    train_chunk: callable
    evaluate: callable
    num_chunks: int


def make_train(config: config_lib.Config, g: graph_lib.Graph, train_hops: np.ndarray) -> Trainer:
    """Builds Policy-GNN (or the random policy when `config.random_policy`)."""
    environment = env.make_env(config, g, train_hops)
    q_model = qnet.QNetwork(config.q_hidden, config.num_actions)
    q_tx = optax.adam(config.q_lr)
    epsilon = dqn.epsilon_schedule(config)
    num_chunks = -(-config.num_episodes // config.episodes_per_call)

    def init(key: jax.Array) -> RunnerState:
        key, k_env, k_q = jax.random.split(key, 3)
        env_state = environment.init(k_env)
        q_params = q_model.init(k_q, jnp.zeros((1, g.num_features)))
        dqn_state = dqn.DQNState.create(
            apply_fn=q_model.apply, params=q_params, tx=q_tx, target_params=q_params
        )
        # TrainState.create starts `step` as a Python int, a weak-typed leaf that would make the
        # second call of the compiled chunk retrace; a concrete int32 keeps one trace.
        dqn_state = dqn_state.replace(step=jnp.zeros((), jnp.int32))
        best = Snapshot(
            gcn_params=env_state.gcn_params,
            q_params=q_params,
            mean=jnp.zeros(g.num_features),
            std=jnp.ones(g.num_features),
            val_accuracy=jnp.full((), -1.0, jnp.float32),
            step=jnp.zeros((), jnp.int32),
        )
        return RunnerState(
            dqn=dqn_state,
            env=env_state,
            replay=replay.init(config.replay_capacity),
            normaliser=normaliser.init(config.normaliser_window),
            best=best,
            key=key,
            step=jnp.zeros((), jnp.int32),
        )

    def policy_depths(key, q_params, mean, std, nodes):
        """The greedy depths of `nodes` (uniformly random ones for the random policy)."""
        if config.random_policy:
            return jax.random.randint(key, nodes.shape, config.min_depth, config.max_depth + 1)
        states = normaliser.normalise(g.features[nodes], mean, std)
        return jnp.argmax(q_model.apply(q_params, states), axis=-1) + config.min_depth

    def dqn_updates(key, dqn_state, memory, mean, std):
        def one_update(state, k_sample):
            batch = replay.sample(k_sample, memory, config.batch_size)
            s_tm1 = normaliser.normalise(g.features[batch.node_tm1], mean, std)
            s_t = normaliser.normalise(g.features[batch.node_t], mean, std)
            new, loss = dqn.update(
                state, s_tm1, batch.a_tm1, batch.r_t, s_t, config.gamma, config.target_period
            )
            ready = replay.can_sample(memory, config.batch_size)
            state = jax.tree.map(lambda a, b: jnp.where(ready, a, b), new, state)
            return state, (jnp.where(ready, loss, 0.0), ready)

        keys = jax.random.split(key, config.dqn_updates_per_step)
        dqn_state, (losses, done) = jax.lax.scan(one_update, dqn_state, keys)
        # Mean over the updates that happened; 0 with `dqn_updates` 0 when none did. (NaN is kept
        # for real divergence, which the runner reports.)
        return dqn_state, jnp.sum(losses) / jnp.maximum(done.sum(), 1), done.sum()

    def mdp_step(rs: RunnerState, _):
        key, k_act, k_val, k_env, k_dqn = jax.random.split(rs.key, 5)
        nodes = rs.env.nodes
        norm = normaliser.update(rs.normaliser, nodes)
        mean, std = normaliser.statistics(norm, g.features)
        q_values = q_model.apply(rs.dqn.params, normaliser.normalise(g.features[nodes], mean, std))
        actions = dqn.epsilon_greedy(k_act, q_values, epsilon(rs.step))
        val_depths = policy_depths(k_val, rs.dqn.params, mean, std, g.val_index)
        env_state, out = environment.step(k_env, rs.env, actions, val_depths)
        memory = replay.add(
            rs.replay,
            replay.Transition(
                nodes, actions, jnp.broadcast_to(out.reward, nodes.shape), env_state.nodes
            ),
        )
        dqn_state, td, num_updates = dqn_updates(k_dqn, rs.dqn, memory, mean, std)
        best = _keep_best(
            rs.best, out.val_accuracy, env_state.gcn_params, rs.dqn.params, mean, std, rs.step
        )
        metrics = {
            **(
                audit_metrics(k_val, env_state.gcn_params, rs.dqn.params, mean, std)
                if config.audit
                else {}
            ),
            "val_accuracy": out.val_accuracy,
            "reward": out.reward,
            "td_loss": td,
            "dqn_updates": num_updates,
            "epsilon": epsilon(rs.step),
            "gcn_trained": out.gcn_trained,
            "action_counts": jnp.bincount(actions, length=config.num_actions),
        }
        rs = RunnerState(
            dqn=dqn_state,
            env=env_state,
            replay=memory,
            normaliser=norm,
            best=best,
            key=key,
            step=rs.step + 1,
        )
        return rs, metrics

    def audit_metrics(key, gcn_params, q_params, mean, std):
        """The released code's test metric at this step: macro accuracy over depth groups, and
        the size of each depth group (small groups are what make the macro metric noisy)."""
        depths = policy_depths(key, q_params, mean, std, g.test_index)
        logits_all = environment.model.apply(gcn_params, g, train=False)
        return {
            "audit_macro_test_accuracy": macro_accuracy(logits_all, depths),
            "audit_group_sizes": depth_counts(depths),
        }

    def macro_accuracy(logits_all, depths):
        """logits_all: [K, N, C] logits of every depth (one forward pass, shared by the caller)."""
        test_logits = gcn.select_depth(logits_all[:, g.test_index], depths)
        correct = jnp.argmax(test_logits, -1) == g.labels[g.test_index]
        return macro_accuracy_over_depths(correct, depths, config.min_depth, config.max_depth)

    def depth_counts(depths):
        return jnp.bincount(depths - config.min_depth, length=config.num_actions)

    def episode(rs: RunnerState, _):
        key, k_reset = jax.random.split(rs.key)
        rs = rs.replace(env=environment.reset(k_reset, rs.env), key=key)
        rs, metrics = jax.lax.scan(mdp_step, rs, length=config.steps_per_episode)
        # nanmean (nothing here is NaN by design) keeps earlier runs' curves bit-identical.
        summary = {
            name: jnp.nanmean(v, axis=0)
            for name, v in metrics.items()
            if name != "audit_group_sizes"  # kept only at the maximising step, below
        }
        summary["action_counts"] = metrics["action_counts"].sum(0)
        summary["dqn_updates"] = metrics["dqn_updates"].sum(0)
        updated = metrics["dqn_updates"] > 0
        summary["td_loss"] = jnp.sum(jnp.where(updated, metrics["td_loss"], 0.0)) / jnp.maximum(
            updated.sum(), 1
        )
        if config.audit:
            best = jnp.argmax(metrics["audit_macro_test_accuracy"])
            summary["audit_macro_test_accuracy_max"] = metrics["audit_macro_test_accuracy"][best]
            summary["audit_group_sizes_at_max"] = metrics["audit_group_sizes"][best]
        return rs, summary

    def train_chunk(rs: RunnerState):
        return jax.lax.scan(episode, rs, length=config.episodes_per_call)

    def evaluate(rs: RunnerState) -> dict:
        """The honest protocol: the snapshot's greedy depths on test nodes. Reads test labels."""
        best = rs.best
        k_test = jax.random.fold_in(rs.key, 1)
        depths = policy_depths(k_test, best.q_params, best.mean, best.std, g.test_index)
        logits_all = environment.model.apply(best.gcn_params, g, train=False)
        logits = gcn.select_depth(logits_all[:, g.test_index], depths)
        test_labels = g.labels[g.test_index]
        results = {
            "test_accuracy": gcn.accuracy(logits, test_labels),
            "val_accuracy": best.val_accuracy,
            "best_step": best.step,
            "test_depths": depths,
            "test_depth_counts": depth_counts(depths),
        }
        if config.audit:
            results["audit_macro_test_accuracy"] = macro_accuracy(logits_all, depths)
        return results

    return Trainer(init, train_chunk, evaluate, num_chunks)


def macro_accuracy_over_depths(correct, depths, min_depth: int, max_depth: int) -> jax.Array:
    """Unweighted mean over the non-empty depth groups of each group's accuracy (the released
    code's test metric, ALGORITHM.md section 6). correct: [T] bool; depths: [T]."""
    group = depths[None, :] == jnp.arange(min_depth, max_depth + 1)[:, None]
    size = group.sum(1)
    group_acc = jnp.sum(group & correct[None, :], 1) / jnp.maximum(size, 1)
    return jnp.sum(jnp.where(size > 0, group_acc, 0.0)) / jnp.maximum((size > 0).sum(), 1)


def _keep_best(best: Snapshot, acc, gcn_params, q_params, mean, std, step) -> Snapshot:
    """Keeps the snapshot with the highest validation accuracy so far (ties: the earliest)."""
    candidate = Snapshot(
        gcn_params=gcn_params, q_params=q_params, mean=mean, std=std, val_accuracy=acc, step=step
    )
    better = acc > best.val_accuracy
    return jax.tree.map(lambda a, b: jnp.where(better, a, b), candidate, best)
