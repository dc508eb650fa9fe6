"""GNN action buffers (Algorithm 2): one fixed-capacity buffer of node ids per depth.

A buffer that holds at least `buffer_size` entries after a step's additions is trained on and
emptied. Each step adds up to W entries, so the arrays hold `buffer_size + W - 1`: nothing is ever
dropped, and a flushed buffer trains on all its entries (between buffer_size and that bound).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class BufferState:
    nodes: jax.Array  # [A, capacity] node ids
    count: jax.Array  # [A] entries filled


def init(num_actions: int, capacity: int) -> BufferState:
    return BufferState(
        nodes=jnp.zeros((num_actions, capacity), jnp.int32),
        count=jnp.zeros((num_actions,), jnp.int32),
    )


def add(state: BufferState, nodes: jax.Array, actions: jax.Array, valid: jax.Array) -> BufferState:
    """Appends node `nodes[i]` to buffer `actions[i]` wherever `valid[i]` (node has a train label).

    Args:
      state: the buffers.
      nodes: [W] node ids.
      actions: [W] action indices in 0..A-1.
      valid: [W] bool.
    """
    chex.assert_rank([nodes, actions, valid], 1)
    chex.assert_equal_shape([nodes, actions, valid])
    chex.assert_type([nodes, actions, valid], [int, int, bool])
    num_actions, capacity = state.nodes.shape
    chosen = (actions[None, :] == jnp.arange(num_actions)[:, None]) & valid[None, :]  # [A, W]
    slot = state.count[:, None] + jnp.cumsum(chosen, axis=1) - 1
    slot = jnp.where(chosen, slot, capacity)  # out of range: dropped by mode="drop"
    rows = jnp.broadcast_to(jnp.arange(num_actions)[:, None], slot.shape)
    new_nodes = state.nodes.at[rows, slot].set(jnp.broadcast_to(nodes, slot.shape), mode="drop")
    return BufferState(nodes=new_nodes, count=state.count + chosen.sum(axis=1))


def full(state: BufferState, buffer_size: int) -> jax.Array:
    """[A] bool: buffers ready to train."""
    return state.count >= buffer_size


def entry_mask(state: BufferState) -> jax.Array:
    """[A, capacity] bool: filled slots."""
    return jnp.arange(state.nodes.shape[1])[None, :] < state.count[:, None]


def flush(state: BufferState, flushed: jax.Array) -> BufferState:
    """Empties the buffers where `flushed` [A] is true."""
    return state.replace(count=jnp.where(flushed, 0, state.count))
