"""Sparse products on the device graph, shared by every backbone: `Â @ h` and `X @ W`.

`propagate` is one receiver-sorted segment sum (or, on the "gather" kernels, sums in a fixed
order) with two exact custom rules, for its backward pass and for a vmapped seed sweep;
`sparse_feature_matmul` multiplies over the features' non-zeros only, and
`dropped_feature_matmul` adds Kipf & Welling's dropout on those non-zeros.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import custom_batching

from policy_gnn_jax.graph import gather_matmul
from policy_gnn_jax.graph import graph as graph_lib


def _segment_propagate(g: graph_lib.Graph, h: jax.Array) -> jax.Array:
    if g.kernels == "gather":
        return gather_matmul.matmul(g.adj_buckets, g.weights, h)
    messages = h[g.senders] * g.weights[:, None]
    return jax.ops.segment_sum(
        messages, g.receivers, num_segments=h.shape[0], indices_are_sorted=True
    )


@jax.custom_vjp
@custom_batching.custom_vmap
def propagate(g: graph_lib.Graph, h: jax.Array) -> jax.Array:
    """`Â @ h` for h [N, D], as a receiver-sorted segment sum.

    Two custom rules, both exact:
    - VJP: `Â^T g = Â g` (Â is symmetric; a subgraph's is not, `Graph.symmetric`, and gets a
      scatter over senders), so the backward pass is one more sorted segment sum
      instead of the unsorted scatter-add autodiff would emit. A test compares it with autodiff.
    - vmap over seeds: the S hidden matrices are laid side by side as one [N, S*D] matrix and
      propagated once. Gathering S*D contiguous floats per edge instead of S separate rows made
      the 10-seed propagation 2.6x faster here, and the sums run in the same order, so the
      results are bit-identical to plain vmap (tested).
    """
    return _segment_propagate(g, h)


@propagate.def_vmap
def _propagate_vmap(axis_size, in_batched, g, h):
    g_batched, h_batched = in_batched
    if any(jax.tree.leaves(g_batched)) or not h_batched:  # not the seed-sweep case: plain vmap
        axes = (jax.tree.map(lambda b: 0 if b else None, g_batched), 0 if h_batched else None)
        return jax.vmap(_segment_propagate, in_axes=axes)(g, h), True
    seeds, nodes, width = h.shape
    wide = jnp.moveaxis(h, 0, 1).reshape(nodes, seeds * width)
    out = propagate(g, wide).reshape(nodes, seeds, width)
    return jnp.moveaxis(out, 1, 0), True


def _propagate_fwd(g, h):
    return propagate(g, h), g


def _propagate_bwd(g, cotangent):
    if not g.symmetric:  # a subgraph: Â^T g as a scatter over senders
        messages = cotangent[g.receivers] * g.weights[:, None]
        return None, jax.ops.segment_sum(messages, g.senders, num_segments=cotangent.shape[0])
    return None, propagate(g, cotangent)


propagate.defvjp(_propagate_fwd, _propagate_bwd)


def sparse_feature_matmul(g: graph_lib.Graph, w: jax.Array, vals: jax.Array | None = None):
    """`X @ w` over the non-zeros of X only: [N, F] x [F, D] -> [N, D].

    `vals` replaces X's non-zero values (input dropout masks them); they get no gradient.
    """
    vals = g.feat_vals if vals is None else vals
    if g.kernels == "gather":
        return _gather_feature_matmul(g, w, jax.lax.stop_gradient(vals))
    return jax.ops.segment_sum(
        w[g.feat_cols] * vals[:, None],
        g.feat_rows,
        num_segments=g.num_nodes,
        indices_are_sorted=True,
    )


@jax.custom_vjp
def _gather_feature_matmul(g: graph_lib.Graph, w: jax.Array, vals: jax.Array) -> jax.Array:
    """X @ w as gathers; its VJP is X^T @ cotangent, also as gathers (autodiff of the gather
    `w[cols]` would scatter-add into w: atomics on a GPU)."""
    return gather_matmul.matmul(g.x_buckets, vals, w)


def _gather_feature_matmul_fwd(g, w, vals):
    return _gather_feature_matmul(g, w, vals), (g, vals)


def _gather_feature_matmul_bwd(residuals, cotangent):
    g, vals = residuals
    return None, gather_matmul.matmul(g.xt_buckets, vals, cotangent), None


_gather_feature_matmul.defvjp(_gather_feature_matmul_fwd, _gather_feature_matmul_bwd)


def dropped_feature_matmul(g, w, rate: float, train: bool, sparse: bool = True) -> jax.Array:
    """`dropout(X) @ w`, called inside a Flax module: Kipf & Welling's dropout on the features'
    non-zeros only (dropping zeros changes nothing, and N*F random bits cost more than the
    layer); `sparse=False` drops and multiplies the dense features (a reference path)."""
    # A graph with dense rows and no non-zero list (`graph.operator_graph`: subgraph views of
    # dense-featured graphs, jraph GraphsTuples) takes the dense product.
    sparse = sparse and not (g.feat_vals.shape[0] == 0 and g.features.shape[1] > 0)
    if sparse:
        vals = nn.Dropout(rate, deterministic=not train)(g.feat_vals)
        return sparse_feature_matmul(g, w, vals)
    return nn.Dropout(rate, deterministic=not train)(g.features) @ w
