"""The subgraph engine (`--engine subgraph`): an MDP step whose cost does not grow with the graph.

The full engine trains the backbone on the whole graph and measures M_t on the whole graph, so a
step costs as much as the graph is large. Here a step trains the full buffers' nodes on the
union of their d-hop neighbourhoods (d: each buffer's depth) and measures M_t on the validation
nodes' K-hop neighbourhood, built once per seed. Every subgraph is a `jraph.GraphsTuple`
padded to the config's node and edge budgets (`sampler.pad`), so each shape compiles once, and
the backbone runs on it unchanged (`view` turns it into a `graph.Graph`).

Exactness: a node's depth-d output depends on its d-hop neighbourhood only, through Â's weights
`1/sqrt(deg_u deg_v)` of the WHOLE graph, which the subgraph keeps. A node at hop j < d gets
every edge into it, a node at hop d only its features. So with every neighbour kept, the
subgraph's logits at the targets equal the whole graph's (tested on Cora); its edges are in the
whole graph's (receiver, sender) order, so each node's sum runs in the same order.

The neighbourhoods are sampled on the host (`graph/sampler.py`), called from the compiled loop
through `jax.pure_callback` (`sample`) with a seed drawn from the run's key: one seed still
reproduces a run bit for bit. (jraph helpers that still call the removed `jax.tree_map`, such as
`jraph.zero_out_padding`, are not used.)
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.graph import sampler as sampler_lib


class Padded(NamedTuple):
    """A padded subgraph as device arrays (the fields of its `jraph.GraphsTuple`).

    node_ids: [n_budget] whole-graph ids, ascending over the real nodes (padding: 0).
    senders, receivers: [e_budget] local ids, sorted by (receiver, sender); padding edges join
      the first padding node to itself with weight 0.
    weights: [e_budget] Â's weights (rescaled where neighbours were sampled).
    positions: [...] the local id of each target entry (0 where the entry is masked).
    num_nodes: [] how many nodes are real.
    feature_rows: [n_budget, F] the nodes' dense feature rows, or None; row_cols, row_vals:
      [n_budget, P] their non-zeros, or None. Only the host engine sends rows (the others
      gather them from the device graph).
    """

    node_ids: jax.Array
    senders: jax.Array
    receivers: jax.Array
    weights: jax.Array
    positions: jax.Array
    num_nodes: jax.Array
    feature_rows: jax.Array | None = None
    row_cols: jax.Array | None = None
    row_vals: jax.Array | None = None


def padded_shapes(config: config_lib.Config, target_shape, store=None) -> Padded:
    """The shapes `sampler.Sampler` returns; with a `HostStore`, its feature rows' too."""
    n, e = config.subgraph_nodes + 1, config.subgraph_edges
    rows = {}
    if store is not None and store.sparse_rows:
        width = store.row_width
        rows = dict(
            row_cols=jax.ShapeDtypeStruct((n, width), jnp.int32),
            row_vals=jax.ShapeDtypeStruct((n, width), jnp.float32),
        )
    elif store is not None:
        rows = dict(feature_rows=jax.ShapeDtypeStruct((n, store.num_features), jnp.float32))
    return Padded(
        node_ids=jax.ShapeDtypeStruct((n,), jnp.int32),
        senders=jax.ShapeDtypeStruct((e,), jnp.int32),
        receivers=jax.ShapeDtypeStruct((e,), jnp.int32),
        weights=jax.ShapeDtypeStruct((e,), jnp.float32),
        positions=jax.ShapeDtypeStruct(tuple(target_shape), jnp.int32),
        num_nodes=jax.ShapeDtypeStruct((), jnp.int32),
        **rows,
    )


def sample(
    sampler: sampler_lib.Sampler, key: jax.Array, nodes, radii, mask, per_target=False
) -> Padded:
    """The padded neighbourhood of the masked (node, radius) targets, from inside jit/vmap
    (`per_target`: drawn from the key and the targets' ids, `sampler.Sampler.__call__`)."""
    seed = jax.random.bits(key, (2,), jnp.uint32)
    shapes = padded_shapes(sampler.config, nodes.shape, sampler.store)
    present = [name for name, shape in shapes._asdict().items() if shape is not None]
    out = jax.pure_callback(
        functools.partial(sampler, per_target=per_target),
        tuple(getattr(shapes, name) for name in present),
        seed,
        nodes,
        radii,
        mask,
        vmap_method="sequential",
    )
    return Padded(**dict(zip(present, out)))


def node_logits(sampler: sampler_lib.Sampler, logits, g, key, nodes, radius: int):
    """[K, M, C]: `logits(view, None)` (a backbone's, evaluation mode) at each of the nodes
    [M], each on its own `radius`-hop neighbourhood (sampled where over the budgets), one node
    after another: device memory is that of one subgraph however many nodes. A node's sample is
    drawn from `key` and its own id alone, so its logits do not depend on which other nodes are
    asked with it, or in what order.
    """
    radii = jnp.full((1,), radius, jnp.int32)
    mask = jnp.ones((1,), bool)

    def one_node(node):
        sub = sample(sampler, key, node[None], radii, mask, per_target=True)
        return logits(view(g, sub), None)[:, sub.positions[0]]

    return jnp.moveaxis(jax.lax.map(one_node, nodes), 0, 1)  # [M, K, C] -> [K, M, C]


def view(g: graph_lib.Graph, sub: Padded) -> graph_lib.Graph:
    """The padded subgraph as a `graph.Graph` the backbone runs on unchanged: its nodes' feature
    rows (sparse rows where the graph keeps them, else dense rows), its edges and labels. Under
    the host engine the rows came with the subgraph, and it has no labels (the loop reads the
    split nodes' own)."""
    ids = sub.node_ids
    n = ids.shape[0]
    if g.host is not None:
        cols, vals, dense = sub.row_cols, sub.row_vals, sub.feature_rows
        labels = jnp.full((n,), -1, jnp.int32)
    elif g.feat_ell_idx.shape[1] > 0:
        cols, vals, dense, labels = g.feat_ell_idx[ids], g.feat_ell_val[ids], None, g.labels[ids]
    else:
        cols, vals, dense, labels = None, None, g.features[ids], g.labels[ids]
    if cols is not None:  # sparse rows: their non-zeros, padded to the widest row
        features = jnp.zeros((n, 0), jnp.float32)
        rows = jnp.repeat(jnp.arange(n, dtype=jnp.int32), cols.shape[1])
        nonzeros = (rows, cols.reshape(-1), vals.reshape(-1))
    else:  # dense rows: a dense product (gcn.dropped_feature_matmul)
        features, nonzeros = dense, None
    return graph_lib.operator_graph(
        features=features,
        feature_nonzeros=nonzeros,
        senders=sub.senders,
        receivers=sub.receivers,
        weights=sub.weights,
        labels=labels,
        num_classes=g.num_classes,
        feature_dim=g.num_features,
    )


def use_subgraphs(config: config_lib.Config, g: graph_lib.Graph) -> bool:
    """Whether the config's engine is the subgraph engine on this graph ("auto": by size)."""
    if g.host is not None or config.engine == "host":
        return True
    if config.engine == "auto":
        return g.num_nodes > config_lib.AUTO_SUBGRAPH_NODES
    return config.engine == "subgraph"
