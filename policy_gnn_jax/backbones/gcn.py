"""The backbone interface and the paper's shared GCN, the default backbone.

A backbone is a GNN whose every depth min_depth..K comes out of one forward pass. The MDP loop
(`mdp/env.py`, `mdp/loop.py`) and the fixed-depth baseline only call the pure functions of a
`Backbone`, so a new GNN is one new module that returns one (`flax_backbone` turns a Flax model
into one); the loop does not change. `readout.py` and `decoupled.py` are the other backbones, and
`backbones.make_backbone` builds the one a config names.

The shared GCN (docs/algorithm.md section 2): depth `a` is `a` GCN layers whose last one
propagates to the classes, `h_k = relu(Â h_{k-1} W_k)` for k < a and logits `Â h_{a-1} W_out`, so
depth 2 is Kipf & Welling's GCN. Every depth's logits come out of one forward pass; a node's
prediction is the logits of its own depth.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import optax

from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.graph.graph import dropped_feature_matmul, propagate

Params = Any  # a pytree of arrays


class Backbone(NamedTuple):
    """A GNN as pure functions of its parameters and the graph. N nodes, C classes, K = max_depth.

    The graph is an argument, never closed over: the same backbone runs on a whole graph, a
    padded subgraph (`subgraph.view`) or a `jraph.GraphsTuple`, and a sweep maps it over splits.

    Attributes:
      init: (key, graph) -> params.
      logits: (params, graph, dropout_key or None) -> [D, N, C] logits of every depth
        min_depth..K (D = K - min_depth + 1; row i is depth min_depth + i); a None key means
        evaluation mode (no dropout). `depth_logits` picks a node's row.
      loss: (params, graph, dropout_key, nodes [...], depths [...]) -> [...] cross-entropy of
        each node at its own depth against the graph's labels, in training mode.
      optimizer: the optax transformation the loop trains the params with.
      max_depth: K.
      min_depth: the lowest depth it computes (1 by default; 0 where depth 0 exists).
    """

    init: Callable[[jax.Array, graph_lib.Graph], Params]
    logits: Callable[[Params, graph_lib.Graph, jax.Array | None], jax.Array]
    loss: Callable[[Params, graph_lib.Graph, jax.Array, jax.Array, jax.Array], jax.Array]
    optimizer: optax.GradientTransformation
    max_depth: int
    min_depth: int = 1


def depth_logits(backbone: Backbone, logits_all: jax.Array, depths: jax.Array) -> jax.Array:
    """[M, C]: row m of `logits_all` [D, M, C] (the backbone's `logits`, row 0 its `min_depth`)
    at depth `depths[m]` [M]."""
    rows = (depths - backbone.min_depth)[None, :, None]
    return jnp.take_along_axis(logits_all, rows, axis=0)[0]


def flax_init(model, key: jax.Array, g) -> Params:
    return model.init(key, g, train=False)


def flax_logits(model, params, g, key) -> jax.Array:
    """A Flax module's `(g, train=...)` call: evaluation mode when `key` is None."""
    if key is None:
        return model.apply(params, g, train=False)
    return model.apply(params, g, train=True, rngs={"dropout": key})


def flax_loss(model, min_depth: int, params, g, key, nodes, depths) -> jax.Array:
    logits = flax_logits(model, params, g, key)[depths - min_depth, nodes]  # [..., C]
    return cross_entropy(logits, g.labels[nodes])


def flax_backbone(model, optimizer, min_depth: int, max_depth: int) -> Backbone:
    """A Backbone over a Flax module whose `(g, train=...)` returns [D, N, C] logits."""
    return Backbone(
        init=functools.partial(flax_init, model),
        logits=functools.partial(flax_logits, model),
        loss=functools.partial(flax_loss, model, min_depth),
        optimizer=optimizer,
        max_depth=max_depth,
        min_depth=min_depth,
    )


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Per-example softmax cross-entropy, [M, C] x [M] -> [M]."""
    return optax.softmax_cross_entropy_with_integer_labels(logits, jnp.maximum(labels, 0))


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
