"""State normaliser over the most recent `window` states (appendix B): exact mean and std.

It keeps the node ids of the last `window` states in a ring and recomputes the statistics from
the feature rows, so the mean and std are exact (no running-sum drift, and it divides by the std,
not the mean as the released code does).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

# Features with (near) zero spread in the window are left unscaled instead of blown up.
MIN_STD = 1e-6


@struct.dataclass
class NormaliserState:
    nodes: jax.Array  # [window] node ids
    position: jax.Array
    size: jax.Array


def init(window: int) -> NormaliserState:
    return NormaliserState(
        nodes=jnp.zeros((window,), jnp.int32),
        position=jnp.zeros((), jnp.int32),
        size=jnp.zeros((), jnp.int32),
    )


def update(state: NormaliserState, nodes: jax.Array) -> NormaliserState:
    """Records the states (node ids [W]) seen this step; with W > window the last ones win."""
    window = state.nodes.shape[0]
    nodes = nodes[-window:]
    slots = (state.position + jnp.arange(nodes.shape[0])) % window
    return NormaliserState(
        nodes=state.nodes.at[slots].set(nodes),
        position=(state.position + nodes.shape[0]) % window,
        size=jnp.minimum(state.size + nodes.shape[0], window),
    )


def statistics(state: NormaliserState, features: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Mean and std [F] of the feature rows in the window (0 and 1 while it is empty)."""
    mask = (jnp.arange(state.nodes.shape[0]) < state.size)[:, None]
    rows = features[state.nodes]
    count = jnp.maximum(state.size, 1)
    mean = jnp.sum(jnp.where(mask, rows, 0.0), axis=0) / count
    var = jnp.sum(jnp.where(mask, (rows - mean) ** 2, 0.0), axis=0) / count
    std = jnp.sqrt(var)
    return mean, jnp.where(std < MIN_STD, 1.0, std)


def normalise(x: jax.Array, mean: jax.Array, std: jax.Array) -> jax.Array:
    return (x - mean) / std
