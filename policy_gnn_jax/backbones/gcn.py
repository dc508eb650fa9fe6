"""The paper's shared GCN (docs/algorithm.md): layers shared across depths, all in one pass.

Depth `a` is `a` GCN layers whose last one propagates to the classes, `h_k = relu(Â h_{k-1} W_k)`
for k < a and logits `Â h_{a-1} W_out`, so depth 2 is Kipf & Welling's GCN. Every depth's logits
come out of one forward pass; a node's prediction is the logits of its own depth.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.backbones import base
from policy_gnn_jax.graph.graph import dropped_feature_matmul, propagate


class SharedGCN(nn.Module):
    """The paper's shared GCN: depth `a` ends with a GCN layer to the classes.

    Depth 1 is `Â X W_0`; depth a >= 2 is `h_1 = relu(Â X W_1)`, `h_k = relu(Â h_{k-1} W_k)` for
    k = 2..a-1, logits `Â h_{a-1} W_out`. Dropout acts on each layer's input, as in Kipf & Welling:
    the features (rate `input_dropout`) and every hidden state (rate `dropout`); a hidden state
    feeds both the next hidden layer and the output layer with one dropout mask.

    Only depths `min_depth..max_depth` are computed and returned ([max_depth - min_depth + 1, N,
    C]): W_0 exists only when depth 1 is allowed, and the output layer is applied only where a
    depth ends. Parameters: F*C (depth 1) + F*H + (K-2)*H*H + H*C.
    """

    hidden: int
    num_classes: int
    max_depth: int
    min_depth: int = 1
    dropout: float = 0.5
    input_dropout: float = 0.0
    sparse_features: bool = True

    @nn.compact
    def __call__(self, g: graph_lib.Graph | jraph.GraphsTuple, *, train: bool) -> jax.Array:
        g = graph_lib.as_graph(g, self.num_classes)  # a jraph.GraphsTuple is welcome too
        init = nn.initializers.glorot_uniform()
        h_size, c_size = self.hidden, self.num_classes
        first = []  # the first layer's weights: W_1 (to the hidden states), W_0 (depth 1)
        if self.max_depth >= 2:
            first.append(self.param("w_1", init, (g.num_features, h_size)))
        if self.min_depth == 1:
            first.append(self.param("w_0", init, (g.num_features, c_size)))
        # Â (X W) == (Â X) W, and propagating the narrow product is cheaper; W_1 and W_0 share
        # the one sparse product and the one propagation.
        z = propagate(
            g,
            dropped_feature_matmul(
                g, jnp.concatenate(first, 1), self.input_dropout, train, self.sparse_features
            ),
        )
        logits = [z[:, -c_size:]] if self.min_depth == 1 else []
        if self.max_depth >= 2:
            h = nn.relu(z[:, :h_size])
            w_out = self.param("w_out", init, (h_size, c_size))
            for a in range(2, self.max_depth + 1):
                # h is h_{a-1}: it ends depth a (through W_out) and starts h_a (through W_a).
                h_in = nn.Dropout(self.dropout, deterministic=not train)(h)
                ends_here = a >= self.min_depth
                goes_on = a < self.max_depth
                weights = []
                if goes_on:
                    weights.append(self.param(f"w_{a}", init, (h_size, h_size)))
                if ends_here:
                    weights.append(w_out)
                z = propagate(g, h_in @ jnp.concatenate(weights, 1))
                if ends_here:
                    logits.append(z[:, -c_size:])
                if goes_on:
                    h = nn.relu(z[:, :h_size])
        return jnp.stack(logits)


def make_gcn(config, g: graph_lib.Graph, max_depth: int, min_depth: int = 1) -> SharedGCN:
    """The paper-structure SharedGCN a config describes, for depths `min_depth..max_depth`."""
    return SharedGCN(
        hidden=config.hidden,
        num_classes=g.num_classes,
        max_depth=max_depth,
        min_depth=min_depth,
        dropout=config.dropout,
        input_dropout=config.input_dropout,
    )


def gcn_backbone(
    config, g: graph_lib.Graph, max_depth: int | None = None, min_depth: int = 1
) -> base.Backbone:
    """The paper's shared GCN a config describes (hidden size, dropouts, Adam + first-layer L2).

    Args:
      config: a `Config` (hidden, dropout, input_dropout, gcn_lr, weight_decay, max_depth).
      g: the device graph.
      max_depth: K (default `config.max_depth`; the fixed-depth baseline uses `config.depth`).
      min_depth: the lowest depth computed: the loop passes `config.min_depth` and the
        fixed-depth baseline its one depth, so no unused layer costs time.
    """
    max_depth = max_depth or config.max_depth
    model = make_gcn(config, g, max_depth=max_depth, min_depth=min_depth)
    optimizer = base.make_optimizer(config.gcn_lr, config.weight_decay)
    return base.flax_backbone(model, optimizer, min_depth, max_depth)
