"""Double DQN for the meta-policy: epsilon-greedy acting, the TD loss and the update (pure)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state

from policy_gnn_jax import config as config_lib


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
    best = jnp.argmax(q_t_online, axis=-1)
    return r_t + discount_t * jnp.take_along_axis(q_t_target, best[:, None], axis=-1)[:, 0]


def td_loss(q_tm1: jax.Array, a_tm1: jax.Array, targets: jax.Array) -> jax.Array:
    """Mean squared TD error of Q(s, a) [B, A] at actions a_tm1 [B] against targets [B]."""
    q_taken = jnp.take_along_axis(q_tm1, a_tm1[:, None], axis=-1)[:, 0]
    return jnp.mean((jax.lax.stop_gradient(targets) - q_taken) ** 2)


def update(
    state: DQNState,
    s_tm1: jax.Array,
    a_tm1: jax.Array,
    r_t: jax.Array,
    s_t: jax.Array,
    gamma: float,
    target_period: int,
) -> tuple[DQNState, jax.Array]:
    """One Double-DQN gradient step, then the periodic target copy.

    Episode ends are truncations, so every transition bootstraps with `gamma`.

    Returns:
      (new state, TD loss).
    """
    q_t_online = state.apply_fn(state.params, s_t)
    q_t_target = state.apply_fn(state.target_params, s_t)
    targets = double_q_targets(r_t, jnp.full_like(r_t, gamma), q_t_online, q_t_target)

    def loss_fn(params):
        return td_loss(state.apply_fn(params, s_tm1), a_tm1, targets)

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    state = state.apply_gradients(grads=grads)
    target = optax.periodic_update(state.params, state.target_params, state.step, target_period)
    return state.replace(target_params=target), loss
