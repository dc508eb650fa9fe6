"""The meta-policy's Q-network: a node's normalised features -> one Q-value per allowed depth.

Two ways to evaluate it, with the same parameters:
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
    scaled = layer["kernel"] / std[:, None]  # [F, H]
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
