"""The backbone interface: a GNN whose every depth 1..K comes out of one forward pass.

The MDP loop (`env`, `train`) and the fixed-depth baseline only call these pure functions, so a
new GNN is one new module that returns a `Backbone`; the loop does not change. `gcn_backbone` is
the paper's shared GCN (ALGORITHM.md section 2).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from policy_gnn_jax import gcn
from policy_gnn_jax import graph as graph_lib

Params = Any  # a pytree of arrays


class Backbone(NamedTuple):
    """A GNN as pure functions. N nodes, C classes, K = max_depth.

    Attributes:
      init: key -> params.
      logits: (params, dropout_key or None) -> [K, N, C] logits of every depth 1..K; a None key
        means evaluation mode (no dropout).
      loss: (params, dropout_key, nodes [...], depths [...]) -> [...] cross-entropy of each node
        at its own depth (1..K), in training mode. The labels are the graph's.
      optimizer: the optax transformation the loop trains the params with.
      max_depth: K.
    """

    init: Callable[[jax.Array], Params]
    logits: Callable[[Params, jax.Array | None], jax.Array]
    loss: Callable[[Params, jax.Array, jax.Array, jax.Array], jax.Array]
    optimizer: optax.GradientTransformation
    max_depth: int


def _gcn_init(model: gcn.SharedGCN, g: graph_lib.Graph, key: jax.Array) -> Params:
    return model.init(key, g, train=False)


def _gcn_logits(model: gcn.SharedGCN, g: graph_lib.Graph, params, key) -> jax.Array:
    if key is None:
        return model.apply(params, g, train=False)
    return model.apply(params, g, train=True, rngs={"dropout": key})


def _gcn_loss(model, g: graph_lib.Graph, params, key, nodes, depths) -> jax.Array:
    logits = _gcn_logits(model, g, params, key)[depths - 1, nodes]  # [..., C]
    return gcn.cross_entropy(logits, g.labels[nodes])


def gcn_backbone(config, g: graph_lib.Graph, max_depth: int | None = None) -> Backbone:
    """The shared GCN a config describes (hidden size, dropouts, Adam + first-layer L2).

    Args:
      config: a `Config` (hidden, dropout, input_dropout, gcn_lr, weight_decay, max_depth).
      g: the device graph.
      max_depth: K (default `config.max_depth`; the fixed-depth baseline uses `config.depth`).
    """
    model = gcn.make_gcn(config, g, max_depth=max_depth or config.max_depth)
    return Backbone(
        init=functools.partial(_gcn_init, model, g),
        logits=functools.partial(_gcn_logits, model, g),
        loss=functools.partial(_gcn_loss, model, g),
        optimizer=gcn.make_optimizer(config.gcn_lr, config.weight_decay),
        max_depth=model.max_depth,
    )


def predict_classes(backbone: Backbone, params, nodes: jax.Array, depths: jax.Array) -> jax.Array:
    """Class predictions [M] of `nodes` [M] at their `depths` [M] (evaluation mode)."""
    logits = gcn.select_depth(backbone.logits(params, None)[:, nodes], depths)
    return jnp.argmax(logits, -1)
