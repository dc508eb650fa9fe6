"""The meta-policy's Q-network and the state normaliser it reads (appendix B).

The normaliser: mean and std per feature over the most recent `window` states. It keeps the node
ids of those states in a ring, and how many times each node is in the window (`counts`, exact
integers, updated with the rows entering and leaving). Two ways to get the statistics, both
without running sums that could drift:
- `statistics`: two passes over the window's dense feature rows ([window, F] work);
- `statistics_sparse`: from the features' non-zeros weighted by the counts ([nnz(X)] work), which
  is much cheaper for sparse features (Cora: 49k non-zeros against 1000 x 1433 = 1.4M).
Both divide by the std, not the mean as the released code does.

The Q-network: a node's normalised features -> one Q-value per allowed depth, evaluated two ways
with the same parameters:
- `QNetwork.apply(params, states)` on dense normalised states [B, F];
- `apply_sparse(params, idx, val, mean, std)` straight from each row's non-zeros. Since
  `((x - mean) / std) W = x (W / std) - (mean / std) W`, the first layer needs only the row's
  non-zeros (padded to the widest row: Cora 30, CiteSeer 54, of 1433 / 3703 features), so the
  dense [B, F] states are never built. Only rounding differs from the dense path.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

# Features with (near) zero spread in the window are left unscaled instead of blown up.
MIN_STD = 1e-6
# `statistics_sparse` computes var = E[x^2] - mean^2, whose float32 rounding error is a small
# multiple of 1e-7 * E[x^2]; a variance below this share of E[x^2] is that error, not spread
# (a real spread in a window of 1000 rows is at least ~1e-3 of it), and counts as zero.
REL_VAR_TOL = 1e-4


@struct.dataclass
class NormaliserState:
    nodes: jax.Array  # [window] node ids
    position: jax.Array
    size: jax.Array
    counts: jax.Array  # [N] int32: how often each node is in the window


def init_normaliser(window: int, num_nodes: int) -> NormaliserState:
    return NormaliserState(
        nodes=jnp.zeros((window,), jnp.int32),
        position=jnp.zeros((), jnp.int32),
        size=jnp.zeros((), jnp.int32),
        counts=jnp.zeros((num_nodes,), jnp.int32),
    )


def update_normaliser(state: NormaliserState, nodes: jax.Array) -> NormaliserState:
    """Records the states (node ids [W]) seen this step; with W > window the last ones win."""
    window = state.nodes.shape[0]
    nodes = nodes[-window:]
    slots = (state.position + jnp.arange(nodes.shape[0])) % window
    # Slots below `size` hold a node that now leaves the window (the ring fills 0, 1, ... first).
    leaving = (slots < state.size).astype(jnp.int32)
    counts = state.counts.at[state.nodes[slots]].add(-leaving).at[nodes].add(1)
    return NormaliserState(
        nodes=state.nodes.at[slots].set(nodes),
        position=(state.position + nodes.shape[0]) % window,
        size=jnp.minimum(state.size + nodes.shape[0], window),
        counts=counts,
    )


def statistics(state: NormaliserState, features: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Mean and std [F] of the feature rows in the window (0 and 1 while it is empty)."""
    mask = (jnp.arange(state.nodes.shape[0]) < state.size)[:, None]
    rows = features[state.nodes]
    inv_count = 1.0 / jnp.maximum(state.size, 1)  # see statistics_sparse
    mean = jnp.sum(jnp.where(mask, rows, 0.0), axis=0) * inv_count
    var = jnp.sum(jnp.where(mask, (rows - mean) ** 2, 0.0), axis=0) * inv_count
    std = jnp.sqrt(var)
    return mean, jnp.where(std < MIN_STD, 1.0, std)


def statistics_sparse(
    state: NormaliserState,
    rows: jax.Array,
    cols: jax.Array,
    vals: jax.Array,
    num_features: int,
) -> tuple[jax.Array, jax.Array]:
    """The same statistics from the features' non-zeros (COO `rows`, `cols`, `vals` [nnz]).

    Zeros contribute nothing to either sum, so weighting each non-zero by its node's count in
    the window gives the window's sums exactly; only the rounding differs from `statistics`.
    """
    weight = state.counts[rows].astype(vals.dtype)
    # A product by the reciprocal, as XLA rewrites a division by one count in one program but
    # not always in another (seeds sharded over devices): written out, every program rounds alike.
    inv_count = 1.0 / jnp.maximum(state.size, 1)
    sums = jax.ops.segment_sum(
        jnp.stack([weight * vals, weight * vals * vals], axis=1), cols, num_segments=num_features
    )
    mean, mean_sq = sums[:, 0] * inv_count, sums[:, 1] * inv_count
    var = jnp.maximum(mean_sq - mean * mean, 0.0)
    var = jnp.where(var <= REL_VAR_TOL * mean_sq, 0.0, var)
    std = jnp.sqrt(var)
    return mean, jnp.where(std < MIN_STD, 1.0, std)


def normalise(x: jax.Array, mean: jax.Array, std: jax.Array) -> jax.Array:
    return (x - mean) * (1.0 / std)  # a product by the reciprocal: see statistics_sparse


class QNetwork(nn.Module):
    """MLP with ReLU hidden layers (paper: 32, 64, 128, 64, 32), [B, F] -> [B, A]."""

    hidden_sizes: Sequence[int]
    num_actions: int

    @nn.compact
    def __call__(self, states: jax.Array) -> jax.Array:
        h = states
        for size in self.hidden_sizes:
            h = nn.relu(nn.Dense(size)(h))
        return nn.Dense(self.num_actions)(h)


def first_layer_sparse(params, idx, val, mean, std) -> jax.Array:
    """The first Dense layer's pre-activation [B, H] of normalised states given as non-zeros.

    Args:
      params: QNetwork parameters.
      idx, val: [B, P] feature ids and values of each row's non-zeros (padding: value 0).
      mean, std: [F] the normaliser's statistics.
    """
    layer = params["params"]["Dense_0"]
    # A product by the reciprocal (as in statistics_sparse): its gradient too is a product, in
    # every program, where XLA would turn a division's into a product in some programs only.
    scaled = layer["kernel"] * (1.0 / std)[:, None]  # [F, H]
    offset = (mean / std) @ layer["kernel"]  # [H]
    return jnp.einsum("bp,bph->bh", val, scaled[idx]) - offset + layer["bias"]


def apply_sparse(params, idx, val, mean, std) -> jax.Array:
    """Q-values [B, A] of normalised states given as their rows' non-zeros (see module doc)."""
    layers = params["params"]
    h = first_layer_sparse(params, idx, val, mean, std)
    for i in range(1, len(layers)):
        h = jax.nn.relu(h)
        h = h @ layers[f"Dense_{i}"]["kernel"] + layers[f"Dense_{i}"]["bias"]
    return h
