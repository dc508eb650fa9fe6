"""The meta-policy's Q-network: a node's normalised features -> one Q-value per allowed depth."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax


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
