"""The subgraph and host engines (`--engine subgraph`, `--engine host`) behind `env.Engine`.

The backbone trains on the union of the full buffers' neighbourhoods, each to its buffer's depth,
and M_t is measured on the validation nodes' `max_depth`-hop neighbourhood, drawn once per seed
(`graph/sampler.py` samples them on the host; `graph/subgraph.py` explains why the logits
equal the whole graph's where nothing is sampled away). The host engine's device graph holds the
split nodes alone, so its test nodes are scored each on its own neighbourhood too, and so are
the nodes a host-engine fit predicts (`host_prediction_fn`).
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
from policy_gnn_jax.mdp import env


def engine_and_sampler(config, g: graph_lib.Graph) -> tuple[env.Engine, sampler_lib.Sampler]:
    """The subgraph engine (the host engine where `g` keeps its graph on the host) and its
    sampler, for `g`'s shapes."""
    # Buffers hold training nodes only; the validation subgraph holds every validation node.
    most = max(g.train_index.shape[0], g.val_index.shape[0])
    if config.subgraph_nodes < most:
        raise config_lib.ConfigError(
            f"subgraph_nodes {config.subgraph_nodes} cannot hold the {most} training or "
            f"validation nodes a subgraph starts from: raise --subgraph-nodes to at least "
            f"{most} (a few times more leaves room for their neighbourhoods)."
        )
    if g.host is not None and config.transition != "labelled":
        raise config_lib.ConfigError(
            "the host engine keeps the graph's edges on the host, where a random walk on the "
            "device cannot reach them: use transition 'labelled' (the default)."
        )
    sampler = sampler_lib.Sampler(g.host or sampler_lib.host_graph(g), config)
    return (SUBGRAPH_ENGINE if g.host is None else HOST_ENGINE), sampler


def validation_subgraph(ctx: env.EnvContext, data: env.MDPData, key) -> subgraph.Padded:
    """Every validation node's `max_depth`-hop neighbourhood (sampled if over the budgets)."""
    val = data.graph.val_index
    radii = jnp.full(val.shape, ctx.config.max_depth, jnp.int32)
    return subgraph.sample(ctx.sampler, key, val, radii, jnp.ones(val.shape, bool))


def buffer_subgraph(ctx: env.EnvContext, key: jax.Array, buffers) -> subgraph.Padded:
    """The union of the full buffers' entries' neighbourhoods, each to its buffer's depth."""
    cfg = ctx.config
    full = env.full_buffers(buffers, cfg.buffer_size)
    mask = env.buffer_entries(buffers) & full[:, None]
    depths = jnp.broadcast_to(env.buffer_depth_column(cfg), mask.shape)
    return subgraph.sample(ctx.sampler, key, buffers.nodes, depths, mask)


def subgraph_buffer_loss(ctx: env.EnvContext, params, data, key, buffers, sub: subgraph.Padded):
    """`env.buffer_loss` on the padded neighbourhood `sub` of the full buffers' entries."""
    cfg, g = ctx.config, data.graph
    full = env.full_buffers(buffers, cfg.buffer_size)
    mask = env.buffer_entries(buffers)  # [A, cap]
    logits_all = ctx.backbone.logits(params, subgraph.view(g, sub), key)
    rows = env.buffer_depth_column(cfg) - ctx.backbone.min_depth  # [A, 1]
    logits = logits_all[rows, sub.positions]  # [A, cap, C]
    ce = backbone_lib.cross_entropy(logits, g.labels[buffers.nodes])
    # Entries of buffers that are not full are not in `sub`: masked out, as they add nothing.
    total = jnp.sum(jnp.where(mask & full[:, None], ce, 0.0), 1)
    per_buffer = total / jnp.maximum(mask.sum(1), 1)
    return jnp.sum(jnp.where(full, per_buffer, 0.0))


def _loss_and_grads(ctx: env.EnvContext, data, key, params, buffers):
    sub = buffer_subgraph(ctx, jax.random.fold_in(key, 1), buffers)
    loss_fn = functools.partial(subgraph_buffer_loss, ctx)
    return jax.value_and_grad(loss_fn)(params, data, key, buffers, sub)


def validation_logits(ctx: env.EnvContext, data, params, engine_state: subgraph.Padded):
    """[D, V, C]: the validation nodes' logits on their neighbourhood `engine_state`."""
    view = subgraph.view(data.graph, engine_state)
    return ctx.backbone.logits(params, view, None)[:, engine_state.positions]


def _host_test_logits(ctx: env.EnvContext, data, params, key):
    """[D, T, C]: the host engine's test nodes at every depth (no dropout), each on its own
    sampled `max_depth`-hop neighbourhood (the device graph holds the split nodes alone)."""
    logits = functools.partial(ctx.backbone.logits, params)
    g, max_depth = data.graph, ctx.config.max_depth
    return subgraph.node_logits(ctx.sampler, logits, g, key, g.test_index, max_depth)


SUBGRAPH_ENGINE = env.Engine(
    init=validation_subgraph,
    loss_and_grads=_loss_and_grads,
    validation_logits=validation_logits,
    test_logits=env.full_test_logits,  # the whole graph is on the device: scored there
)
HOST_ENGINE = SUBGRAPH_ENGINE._replace(test_logits=_host_test_logits)


def host_prediction_fn(config, backbone, g: graph_lib.Graph, nodes: np.ndarray):
    """`Fit.predict` of a host-engine fit, whose device graph holds the split nodes alone:
    (params, evaluation key, depths [M]) -> [M, C], one seed, for `nodes` [M] of the whole graph.
    Each node runs on its own sampled neighbourhood with the evaluation's key and radius, as the
    final evaluation measured the test nodes: on them it gives the logits behind the record's
    test score, and a node's prediction does not depend on the other nodes asked."""
    store = host.with_split_nodes(g.host, np.asarray(nodes, np.int64))
    sampler = sampler_lib.Sampler(store, config)
    local = jnp.arange(len(nodes), dtype=jnp.int32)

    def logits(params, eval_key, depths):
        key = jax.random.fold_in(eval_key, 1)  # as `policy_gnn.evaluate` sampled the test nodes
        apply = functools.partial(backbone.logits, params)
        logits_all = subgraph.node_logits(sampler, apply, g, key, local, config.max_depth)
        return backbone_lib.depth_logits(backbone, logits_all, depths)

    return logits
