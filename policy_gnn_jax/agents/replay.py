"""Replay memory as an immutable pytree with pure init / add / sample (flashbax-style API).

States are rows of the fixed feature matrix, so a transition stores node ids, not feature rows:
10 000 transitions cost 160 kB instead of 10 000 x F floats per seed. The DQN's update rebuilds
the sampled states from the graph, normalised with the statistics the step acted with.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
from flax import struct


class Transition(NamedTuple):
    """A batch of transitions [B]: node ids of s and s', action index, shared reward."""

    node_tm1: jax.Array
    a_tm1: jax.Array
    r_t: jax.Array
    node_t: jax.Array


@struct.dataclass
class ReplayState:
    data: Transition
    position: jax.Array  # next slot to write
    size: jax.Array  # slots filled, <= capacity

    @property
    def capacity(self) -> int:
        return self.data.r_t.shape[0]


def init(capacity: int) -> ReplayState:
    """An empty memory of `capacity` transitions."""
    zeros_i = jnp.zeros((capacity,), jnp.int32)
    data = Transition(zeros_i, zeros_i, jnp.zeros((capacity,), jnp.float32), zeros_i)
    return ReplayState(data=data, position=jnp.zeros((), jnp.int32), size=jnp.zeros((), jnp.int32))


def add(state: ReplayState, batch: Transition) -> ReplayState:
    """Writes a batch of W transitions at the ring position, overwriting the oldest when full.

    Node ids and actions must be integers and rewards floats, all of shape [W]: a wrong dtype is
    an error here rather than a silent cast.
    """
    chex.assert_rank(list(batch), 1)
    chex.assert_equal_shape(list(batch))
    chex.assert_type([batch.node_tm1, batch.a_tm1, batch.node_t, batch.r_t], [int, int, int, float])
    width = batch.r_t.shape[0]
    if width > state.capacity:
        raise ValueError(
            f"each MDP step adds {width} transitions (num_walkers, or one per training node) but "
            f"the replay buffer holds {state.capacity} (replay_capacity): raise --set "
            f"replay_capacity=N or lower --set num_walkers=N."
        )
    slots = (state.position + jnp.arange(width)) % state.capacity
    data = jax.tree.map(
        lambda buf, new: buf.at[slots].set(new.astype(buf.dtype)), state.data, batch
    )
    return ReplayState(
        data=data,
        position=(state.position + width) % state.capacity,
        size=jnp.minimum(state.size + width, state.capacity),
    )


def can_sample(state: ReplayState, batch_size: int) -> jax.Array:
    """True once the memory holds at least one batch."""
    return state.size >= batch_size


def sample(key: jax.Array, state: ReplayState, batch_size: int) -> Transition:
    """Uniform sample with replacement over the filled slots."""
    idx = jax.random.randint(key, (batch_size,), 0, jnp.maximum(state.size, 1))
    return jax.tree.map(lambda buf: buf[idx], state.data)
