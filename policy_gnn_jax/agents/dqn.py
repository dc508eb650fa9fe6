"""Double DQN, the paper's meta-policy (docs/algorithm.md section 4): the pure RL operations
(epsilon-greedy, Double-DQN targets, TD loss, one update), the replay memory, and the agent's
functions (`agent_init`, `agent_act`, `agent_depths`, `agent_learn`) over the Q-network and state
normaliser of `qnet.py`. `agents/build.py` assembles them into an `agents.base.Agent`.

States are rows of the fixed feature matrix, so the replay memory stores node ids, not feature
rows (10 000 transitions cost 160 kB instead of 10 000 x F floats per seed); an update rebuilds
the sampled states from the graph, normalised with the statistics the step acted with.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import optax
from flax import struct
from flax.training import train_state

from policy_gnn_jax import config as config_lib
from policy_gnn_jax.agents import qnet
from policy_gnn_jax.agents.base import Transition
from policy_gnn_jax.metrics import all_finite, mean_where, tree_select


class DQNState(train_state.TrainState):
    """The online network's TrainState plus the target network's parameters."""

    target_params: dict


def epsilon_schedule(config: config_lib.Config) -> optax.Schedule:
    """Epsilon as a function of the MDP step: linear from eps_start to eps_end, stepped every
    `eps_every` steps, reaching eps_end after `eps_horizon_steps` (default half of training)."""
    decay = optax.linear_schedule(
        config.eps_start,
        config.eps_end,
        transition_steps=max(1, config.eps_horizon_steps // config.eps_every),
    )
    if config.random_policy:
        return lambda step: jnp.ones_like(step, dtype=jnp.float32)
    return lambda step: decay(step // config.eps_every)


def epsilon_greedy(key: jax.Array, q_values: jax.Array, epsilon: jax.Array) -> jax.Array:
    """Independent epsilon-greedy choice per row of q_values [W, A]; returns [W] indices."""
    k_explore, k_random = jax.random.split(key)
    num_rows, num_actions = q_values.shape
    explore = jax.random.uniform(k_explore, (num_rows,)) < epsilon
    random_actions = jax.random.randint(k_random, (num_rows,), 0, num_actions)
    return jnp.where(explore, random_actions, jnp.argmax(q_values, axis=-1))


def double_q_targets(
    r_t: jax.Array, discount_t: jax.Array, q_t_online: jax.Array, q_t_target: jax.Array
) -> jax.Array:
    """r + discount * Q_target(s', argmax_a Q_online(s', a)), [B]."""
    chex.assert_rank([r_t, discount_t, q_t_online, q_t_target], [1, 1, 2, 2])
    chex.assert_equal_shape([q_t_online, q_t_target])
    chex.assert_equal_shape([r_t, discount_t])
    chex.assert_type([r_t, q_t_online], [float, float])
    best = jnp.argmax(q_t_online, axis=-1)
    return r_t + discount_t * jnp.take_along_axis(q_t_target, best[:, None], axis=-1)[:, 0]


def td_loss(q_tm1: jax.Array, a_tm1: jax.Array, targets: jax.Array) -> jax.Array:
    """Mean squared TD error of Q(s, a) [B, A] at actions a_tm1 [B] against targets [B]."""
    q_taken = jnp.take_along_axis(q_tm1, a_tm1[:, None], axis=-1)[:, 0]
    return jnp.mean((jax.lax.stop_gradient(targets) - q_taken) ** 2)


def update_with(
    state: DQNState,
    q_tm1_fn,
    q_t_fn,
    a_tm1: jax.Array,
    r_t: jax.Array,
    gamma: float,
    target_period: int,
) -> tuple[DQNState, jax.Array]:
    """One Double-DQN gradient step, then the periodic target copy.

    Episode ends are truncations, so every transition bootstraps with `gamma`.

    Args:
      state: the DQN state.
      q_tm1_fn, q_t_fn: params -> Q-values [B, A] of the batch's s and s' (how the states are
        represented is theirs to decide: dense rows or non-zeros).
      a_tm1, r_t: [B] actions taken and rewards.

    Returns:
      (new state, TD loss).
    """
    q_t_online = q_t_fn(state.params)
    q_t_target = q_t_fn(state.target_params)
    targets = double_q_targets(r_t, jnp.full_like(r_t, gamma), q_t_online, q_t_target)

    def loss_fn(params):
        return td_loss(q_tm1_fn(params), a_tm1, targets)

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    state = state.apply_gradients(grads=grads)
    target = optax.periodic_update(state.params, state.target_params, state.step, target_period)
    return state.replace(target_params=target), loss


# ---------------------------------------------------------------------------------------------
# The replay memory: an immutable ring of transitions (node ids) with pure init / add / sample.


@struct.dataclass
class ReplayState:
    data: Transition
    position: jax.Array  # next slot to write
    size: jax.Array  # slots filled, <= capacity


def replay_init(capacity: int) -> ReplayState:
    """An empty memory of `capacity` transitions."""
    zeros_i = jnp.zeros((capacity,), jnp.int32)
    data = Transition(zeros_i, zeros_i, jnp.zeros((capacity,), jnp.float32), zeros_i)
    return ReplayState(data=data, position=jnp.zeros((), jnp.int32), size=jnp.zeros((), jnp.int32))


def replay_add(state: ReplayState, batch: Transition) -> ReplayState:
    """Writes a batch of W transitions at the ring position, over the oldest when full. Node ids
    and actions must be integers and rewards floats, all [W]: a wrong dtype is an error here
    rather than a silent cast, and W above the capacity too (slots repeated in one write would
    drop transitions, and keep an unspecified one on a GPU)."""
    chex.assert_rank(list(batch), 1)
    chex.assert_equal_shape(list(batch))
    chex.assert_type([batch.node_tm1, batch.a_tm1, batch.node_t, batch.r_t], [int, int, int, float])
    width, capacity = batch.r_t.shape[0], state.data.r_t.shape[0]
    if width > capacity:  # shapes are static: refused while tracing, before anything runs
        raise ValueError(
            f"each MDP step adds {width} transitions (one per walker) but the replay memory holds "
            f"{capacity} (Config.replay_capacity): build the agent with replay_capacity of at "
            f"least {width} (--set replay_capacity={width}), or lower Config.num_walkers."
        )
    slots = (state.position + jnp.arange(width)) % capacity
    data = jax.tree.map(
        lambda buf, new: buf.at[slots].set(new.astype(buf.dtype)), state.data, batch
    )
    return ReplayState(
        data=data,
        position=(state.position + width) % capacity,
        size=jnp.minimum(state.size + width, capacity),
    )


def replay_sample(key: jax.Array, state: ReplayState, batch_size: int) -> Transition:
    """Uniform sample with replacement over the filled slots."""
    idx = jax.random.randint(key, (batch_size,), 0, jnp.maximum(state.size, 1))
    return jax.tree.map(lambda buf: buf[idx], state.data)


# ---------------------------------------------------------------------------------------------
# The DQN agent: the functions of `agents.base.Agent` over an explicit static context.


@struct.dataclass
class DQNAgentState:
    dqn: DQNState
    replay: ReplayState
    normaliser: qnet.NormaliserState


@struct.dataclass
class DQNPolicy:
    """What decides depths: the online Q-network and the normaliser statistics it saw."""

    q_params: dict
    mean: jax.Array  # [F]
    std: jax.Array  # [F]


class DQNContext(NamedTuple):
    """Static: the Q-network, the config, and which formulation each part uses (chosen by cost
    in `build.default_formulation`; only rounding differs). The states are the feature rows of
    the graph `g` every function takes."""

    model: qnet.QNetwork
    config: config_lib.Config
    sparse_states: bool  # the Q-network's first layer from each row's non-zeros
    sparse_statistics: bool  # the normaliser's statistics from the features' non-zeros


def q_values(ctx: DQNContext, policy: DQNPolicy, g, nodes: jax.Array) -> jax.Array:
    """Q(s, .) [M, A] of the nodes [M] (their normalised feature rows)."""
    return _q_of(ctx, g, policy.q_params, policy.mean, policy.std, nodes)


def _q_of(ctx: DQNContext, g, params, mean, std, nodes) -> jax.Array:
    if ctx.sparse_states:
        return qnet.apply_sparse(params, g.feat_ell_idx[nodes], g.feat_ell_val[nodes], mean, std)
    return ctx.model.apply(params, qnet.normalise(g.features[nodes], mean, std))


def window_statistics(ctx: DQNContext, g, norm: qnet.NormaliserState):
    if ctx.sparse_statistics:
        return qnet.statistics_sparse(norm, g.feat_rows, g.feat_cols, g.feat_vals, g.num_features)
    return qnet.statistics(norm, g.features)


def agent_init(ctx: DQNContext, key: jax.Array, g) -> tuple[DQNAgentState, DQNPolicy]:
    num_features = g.num_features
    params = ctx.model.init(key, jnp.zeros((1, num_features)))
    state = DQNState.create(
        apply_fn=ctx.model.apply,
        params=params,
        tx=optax.adam(ctx.config.q_lr),
        target_params=params,
    )
    # TrainState.create starts `step` as a Python int, a weak-typed leaf that would make the
    # second call of the compiled chunk retrace; a concrete int32 keeps one trace.
    state = state.replace(step=jnp.zeros((), jnp.int32))
    agent_state = DQNAgentState(
        dqn=state,
        replay=replay_init(ctx.config.replay_capacity),
        normaliser=qnet.init_normaliser(ctx.config.normaliser_window, g.num_nodes),
    )
    policy = DQNPolicy(params, jnp.zeros(num_features), jnp.ones(num_features))
    return agent_state, policy


def agent_act(ctx: DQNContext, key, state: DQNAgentState, g, nodes, step):
    """Records the walkers' states in the normaliser, then acts epsilon-greedily on Q."""
    norm = qnet.update_normaliser(state.normaliser, nodes)
    mean, std = window_statistics(ctx, g, norm)
    policy = DQNPolicy(state.dqn.params, mean, std)
    epsilon = epsilon_schedule(ctx.config)(step)
    actions = epsilon_greedy(key, q_values(ctx, policy, g, nodes), epsilon)
    return state.replace(normaliser=norm), policy, actions


def agent_depths(ctx: DQNContext, key, policy: DQNPolicy, g, nodes):
    del key  # greedy
    return jnp.argmax(q_values(ctx, policy, g, nodes), axis=-1) + ctx.config.min_depth


def _one_update(ctx: DQNContext, g, memory, policy: DQNPolicy, state: DQNState, k_sample):
    cfg = ctx.config
    batch = replay_sample(k_sample, memory, cfg.batch_size)
    mean, std = policy.mean, policy.std
    new, loss = update_with(
        state,
        lambda params: _q_of(ctx, g, params, mean, std, batch.node_tm1),
        lambda params: _q_of(ctx, g, params, mean, std, batch.node_t),
        batch.a_tm1,
        batch.r_t,
        cfg.gamma,
        cfg.target_period,
    )
    ready = memory.size >= cfg.batch_size
    state = tree_select(ready, new, state)
    return state, (loss, ready)


def agent_learn(ctx: DQNContext, key, state: DQNAgentState, policy: DQNPolicy, g, transition,
                step):  # fmt: skip
    """Stores the transitions, then `dqn_updates_per_step` Double-DQN updates (once the memory
    holds a batch), with states normalised by the statistics the step acted with."""
    memory = replay_add(state.replay, transition)
    keys = jax.random.split(key, ctx.config.dqn_updates_per_step)
    dqn_state, (losses, updated) = jax.lax.scan(
        functools.partial(_one_update, ctx, g, memory, policy), state.dqn, keys
    )
    metrics = {
        # Mean over the updates that happened; 0 when none did (NaN stays NaN: divergence).
        "td_loss": mean_where(losses, updated),
        "dqn_updates": updated.sum(),
        "epsilon": epsilon_schedule(ctx.config)(step),
        "agent_finite": all_finite(dqn_state.params),
    }
    return state.replace(dqn=dqn_state, replay=memory), metrics


def learning_summary(metrics: dict) -> dict:
    """The DQN's `learn` metrics per episode: the mean epsilon, the updates made, the mean TD
    loss over the steps that made one, and whether the Q-network stayed finite."""
    return {
        "epsilon": jnp.mean(metrics["epsilon"], axis=0),
        "dqn_updates": metrics["dqn_updates"].sum(0),
        "td_loss": mean_where(metrics["td_loss"], metrics["dqn_updates"] > 0),
        "agent_finite": jnp.all(metrics["agent_finite"]),
    }
