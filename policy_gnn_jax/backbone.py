"""The backbone interface: a GNN whose every depth 1..K comes out of one forward pass.

The MDP loop (`env`, `train`) and the fixed-depth baseline only call these pure functions, so a
new GNN is one new module that returns a `Backbone`; the loop does not change. This module holds
the interface and the two shared-GCN backbones; `backbones.make_backbone` builds the one a config
names.
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
      logits: (params, dropout_key or None) -> [D, N, C] logits of every depth min_depth..K
        (D = K - min_depth + 1; row i is depth min_depth + i); a None key means evaluation mode
        (no dropout). `depth_logits` picks a node's row.
      loss: (params, dropout_key, nodes [...], depths [...]) -> [...] cross-entropy of each node
        at its own depth, in training mode. The labels are the graph's.
      optimizer: the optax transformation the loop trains the params with.
      max_depth: K.
      min_depth: the lowest depth it computes (1 by default; 0 where depth 0 exists).
      on_graph: (params, dropout_key or None, graph) -> [D, n, C], `logits` on another graph
        (a padded subgraph, `subgraph.view`); None where the backbone only runs on its own
        graph (then the subgraph engine refuses it).
    """

    init: Callable[[jax.Array], Params]
    logits: Callable[[Params, jax.Array | None], jax.Array]
    loss: Callable[[Params, jax.Array, jax.Array, jax.Array], jax.Array]
    optimizer: optax.GradientTransformation
    max_depth: int
    min_depth: int = 1
    on_graph: Callable[[Params, jax.Array | None, graph_lib.Graph], jax.Array] | None = None


def depth_logits(backbone: Backbone, logits_all: jax.Array, depths: jax.Array) -> jax.Array:
    """[M, C]: row m of `logits_all` [D, M, C] (the backbone's) at depth `depths[m]`."""
    return gcn.select_depth(logits_all, depths, backbone.min_depth)


def flax_init(model, g: graph_lib.Graph, key: jax.Array) -> Params:
    return model.init(key, g, train=False)


def flax_logits(model, g: graph_lib.Graph, params, key) -> jax.Array:
    """A Flax module's `(g, train=...)` call: evaluation mode when `key` is None."""
    if key is None:
        return model.apply(params, g, train=False)
    return model.apply(params, g, train=True, rngs={"dropout": key})


def flax_on_graph(model, params, key, g: graph_lib.Graph) -> jax.Array:
    return flax_logits(model, g, params, key)


def flax_loss(model, g: graph_lib.Graph, min_depth: int, params, key, nodes, depths) -> jax.Array:
    logits = flax_logits(model, g, params, key)[depths - min_depth, nodes]  # [..., C]
    return gcn.cross_entropy(logits, g.labels[nodes])


def flax_backbone(model, g, optimizer, min_depth: int, max_depth: int) -> Backbone:
    """A Backbone over a Flax module whose `(g, train=...)` returns [D, N, C] logits."""
    return Backbone(
        init=functools.partial(flax_init, model, g),
        logits=functools.partial(flax_logits, model, g),
        loss=functools.partial(flax_loss, model, g, min_depth),
        optimizer=optimizer,
        max_depth=max_depth,
        min_depth=min_depth,
        on_graph=functools.partial(flax_on_graph, model),
    )


def gcn_backbone(
    config, g: graph_lib.Graph, max_depth: int | None = None, min_depth: int = 1
) -> Backbone:
    """The paper's shared GCN a config describes (hidden size, dropouts, Adam + first-layer L2).

    Args:
      config: a `Config` (hidden, dropout, input_dropout, gcn_lr, weight_decay, max_depth).
      g: the device graph.
      max_depth: K (default `config.max_depth`; the fixed-depth baseline uses `config.depth`).
      min_depth: the lowest depth computed: the loop passes `config.min_depth` and the
        fixed-depth baseline its one depth, so no unused layer costs time.
    """
    max_depth = max_depth or config.max_depth
    model = gcn.make_gcn(config, g, max_depth=max_depth, min_depth=min_depth)
    optimizer = gcn.make_optimizer(config.gcn_lr, config.weight_decay)
    return flax_backbone(model, g, optimizer, min_depth, max_depth)


def gcn_readout_backbone(config, g: graph_lib.Graph, max_depth: int | None = None) -> Backbone:
    """The shared GCN with a linear readout (until 2026-11): depths 1..max_depth."""
    model = gcn.make_readout_gcn(config, g, max_depth=max_depth or config.max_depth)
    optimizer = gcn.make_optimizer(config.gcn_lr, config.weight_decay)
    return flax_backbone(model, g, optimizer, 1, model.max_depth)


def predict_logits(backbone: Backbone, params, nodes: jax.Array, depths: jax.Array) -> jax.Array:
    """Logits [M, C] of `nodes` [M] at their `depths` [M] (evaluation mode)."""
    return depth_logits(backbone, backbone.logits(params, None)[:, nodes], depths)


def predict_classes(backbone: Backbone, params, nodes: jax.Array, depths: jax.Array) -> jax.Array:
    """Class predictions [M] of `nodes` [M] at their `depths` [M] (evaluation mode)."""
    return jnp.argmax(predict_logits(backbone, params, nodes, depths), -1)
