"""The backbone interface: a GNN whose every depth min_depth..K comes out of one forward pass.

The MDP loop (`mdp/env.py`, `mdp/loop.py`) and the fixed-depth baseline only call these pure
functions, so a new GNN is one new module that returns a `Backbone`; the loop does not change.
This module holds the interface and the helpers that turn a Flax model into one; the backbones
are `gcn.py`, `readout.py` and `decoupled.py`, and `backbones.make_backbone` builds the one a
config names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from policy_gnn_jax import graph as graph_lib

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
    """[M, C]: row m of `logits_all` [D, M, C] (the backbone's) at depth `depths[m]`."""
    return select_depth(logits_all, depths, backbone.min_depth)


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


def predict_logits(backbone: Backbone, params, g, nodes: jax.Array, depths: jax.Array):
    """Logits [M, C] of `nodes` [M] of `g` at their `depths` [M] (evaluation mode)."""
    return depth_logits(backbone, backbone.logits(params, g, None)[:, nodes], depths)


def select_depth(logits_all: jax.Array, depth: jax.Array, min_depth: int = 1) -> jax.Array:
    """Picks each node's logits at its own depth.

    Args:
      logits_all: [D, M, C] logits of depths min_depth..min_depth+D-1 (a backbone's `logits`).
      depth: [M] int depths in that range.
      min_depth: the depth of row 0 (the backbone's `min_depth`).

    Returns:
      [M, C].
    """
    return jnp.take_along_axis(logits_all, (depth - min_depth)[None, :, None], axis=0)[0]


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Per-example softmax cross-entropy, [M, C] x [M] -> [M]."""
    return optax.softmax_cross_entropy_with_integer_labels(logits, jnp.maximum(labels, 0))


def accuracy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Fraction of rows whose argmax equals the label."""
    return jnp.mean(jnp.argmax(logits, -1) == labels)


# The weights that read the features: W_1 of every GCN, and W_0 (depth 1) of the paper structure.
FIRST_LAYER = ("w_1", "w_0")


def make_optimizer(lr: float, weight_decay: float) -> optax.GradientTransformation:
    """Adam with coupled L2 on the first layer's weights (Kipf & Welling's choice).

    The decay is added to the gradient before Adam, as torch's Adam `weight_decay`. Decaying only
    the weights that read the features (`FIRST_LAYER`) measured better than decaying every
    weight on Cora and CiteSeer validation (docs/algorithm.md section 12).
    """

    def first_layer_only(params):
        return jax.tree_util.tree_map_with_path(
            lambda path, _: any(getattr(k, "key", None) in FIRST_LAYER for k in path), params
        )

    return optax.chain(
        optax.add_decayed_weights(weight_decay, mask=first_layer_only), optax.adam(lr)
    )
