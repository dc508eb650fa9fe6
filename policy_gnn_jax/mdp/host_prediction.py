"""Prediction for a fit trained by the host engine, in the engine's own terms.

The fit's device graph holds the split nodes alone, and the whole graph stays on the host
(`graph/host.py`), so `Fit.predict` cannot run the backbone over a device copy of the graph.
Instead an agent reads the states of the asked nodes from a device graph of their rows alone
(`host.rows_graph`), and the backbone runs on each node's own sampled neighbourhood, exactly as
the final evaluation measured the test nodes: with the evaluation's key and radius,
`predict_logits(test nodes)` gives the logits behind the record's test score, and a node's
prediction does not depend on the other nodes asked.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.backbones import gcn as backbone_lib
from policy_gnn_jax.graph import host, subgraph
from policy_gnn_jax.graph import sampler as sampler_lib


def logits_fn(
    config: config_lib.Config,
    backbone: backbone_lib.Backbone,
    g: graph_lib.Graph,
    nodes: np.ndarray,
):
    """(params, evaluation key (`policy_gnn.evaluation_key`), depths [M]) -> [M, C], one seed: the
    nodes' logits at their depths, each node on its own sampled `max_depth`-hop neighbourhood.

    Args:
      config: the fit's config (budgets, fan-outs, depths).
      backbone: the fit's backbone.
      g: the fit's split-node graph (`host.split_graph`), holding the whole graph's store.
      nodes: [M] node ids of the whole graph.
    """
    store = host.with_split_nodes(g.host, np.asarray(nodes, np.int64))
    sampler = sampler_lib.Sampler(store, config)
    local = jnp.arange(len(nodes), dtype=jnp.int32)
    return functools.partial(_logits, config, backbone, g, sampler, local)


def _logits(config, backbone, g, sampler, local, params, eval_key, depths):
    key = jax.random.fold_in(eval_key, 1)  # as `policy_gnn.evaluate` sampled the test nodes
    logits = functools.partial(backbone.logits, params)
    logits_all = subgraph.node_logits(sampler, logits, g, key, local, config.max_depth)
    return backbone_lib.depth_logits(backbone, logits_all, depths)
