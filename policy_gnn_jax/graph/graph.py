"""The device-side graph and the sparse products every backbone runs on it.

`Graph` holds the normalised adjacency, sparse features, labels and split indices. It is data:
every function of the loop takes it as an argument, and every compiled program receives it as
one. It never changes during training. `build.py` makes it from a `data.Dataset`, a
`jraph.GraphsTuple` or a padded subgraph (`operator_graph`).

`propagate` (`Â @ h`) is one receiver-sorted segment sum (or, on the "gather" kernels, sums in a
fixed order) with two exact custom rules, for its backward pass and for a vmapped seed sweep;
`sparse_feature_matmul` multiplies `X @ W` over the features' non-zeros only, and
`dropped_feature_matmul` adds Kipf & Welling's dropout on those non-zeros.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct
from jax import custom_batching

from policy_gnn_jax.graph import gather_matmul


@struct.dataclass
class Graph:
    """A fixed graph on the device. N nodes, F features, C classes.

    Attributes:
      features: [N, F] dense features: the Q-network's states are rows of it.
      feat_rows, feat_cols, feat_vals: the non-zeros of the features, sorted by row, so the
        first GCN layer is a sparse `X @ W` (Planetoid features are ~1 % non-zero).
      feat_ell_idx, feat_ell_val: [N, P] each row's non-zeros padded to the widest row P
        (padding: feature 0, value 0), so a batch of rows gathers fixed-size blocks (the
        Q-network's sparse first layer). Empty ([N, 0]) where rows are too dense for that to
        pay (`sparse_rows_pay`): no second copy of dense features.
      senders, receivers, weights: `Â = D^-1/2 (A + I) D^-1/2` as weighted edges, self-loops
        included, sorted by receiver.
      nbr_indptr, nbr_indices: CSR neighbour lists of A (no self-loops), for random walks.
      labels: [N] int32, -1 for nodes without a label.
      train_index, val_index, test_index: node ids of each split.
      kernels: "scatter" (segment sums: fastest on CPU) or "gather" (gather-only products,
        `gather_matmul`: no atomics, so a GPU needs no deterministic-scatter option, only
        autotuning off, to repeat its bits: `runtime/compilation.py`).
      adj_buckets, x_buckets, xt_buckets: Â, X and X^T as gather buckets ("gather" only).
    """

    features: jax.Array
    feat_rows: jax.Array
    feat_cols: jax.Array
    feat_vals: jax.Array
    feat_ell_idx: jax.Array
    feat_ell_val: jax.Array
    senders: jax.Array
    receivers: jax.Array
    weights: jax.Array
    nbr_indptr: jax.Array
    nbr_indices: jax.Array
    labels: jax.Array
    train_index: jax.Array
    val_index: jax.Array
    test_index: jax.Array
    adj_buckets: gather_matmul.GatherBuckets | None
    x_buckets: gather_matmul.GatherBuckets | None
    xt_buckets: gather_matmul.GatherBuckets | None
    num_classes: int = struct.field(pytree_node=False)
    kernels: str = struct.field(pytree_node=False, default="scatter")
    # F when `features` holds no columns (a subgraph view keeps only the sparse rows); -1: read
    # it from `features`.
    feature_dim: int = struct.field(pytree_node=False, default=-1)
    # Whether Â is symmetric (the whole graph). A subgraph's is not: its outermost nodes send
    # but do not receive, so `graph.propagate`'s backward pass must use Â^T there.
    symmetric: bool = struct.field(pytree_node=False, default=True)
    # How predictions are scored (`metrics.score`): "accuracy", or "roc_auc" for two classes.
    metric: str = struct.field(pytree_node=False, default="accuracy")
    # The host engine's whole graph (`host.HostStore`) where this graph holds only the split
    # nodes (`host.split_graph`); None: this graph is the whole graph.
    host: object = struct.field(pytree_node=False, default=None)

    @property
    def deterministic(self) -> bool:
        """Whether every float sum runs in a fixed order on any device (no atomics)."""
        return self.kernels == "gather"

    @property
    def num_nodes(self) -> int:
        return self.features.shape[0]

    @property
    def num_features(self) -> int:
        return self.feature_dim if self.feature_dim >= 0 else self.features.shape[1]


def as_graph(g, num_classes: int) -> Graph:
    """`g` itself, or a `jraph.GraphsTuple` as a `Graph` (`build.from_graphs_tuple`): call it
    first in a module of your own that takes either."""
    if isinstance(g, Graph):
        return g
    from policy_gnn_jax.graph import build  # build imports this module for `Graph`

    return build.from_graphs_tuple(g, num_classes)


# The sparse products every backbone uses: `Â @ h` (`propagate`) and `X @ W`.


def _segment_propagate(g: Graph, h: jax.Array) -> jax.Array:
    if g.kernels == "gather":
        return gather_matmul.matmul(g.adj_buckets, g.weights, h)
    messages = h[g.senders] * g.weights[:, None]
    return jax.ops.segment_sum(
        messages, g.receivers, num_segments=h.shape[0], indices_are_sorted=True
    )


@jax.custom_vjp
@custom_batching.custom_vmap
def propagate(g: Graph, h: jax.Array) -> jax.Array:
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


def sparse_feature_matmul(g: Graph, w: jax.Array, vals: jax.Array | None = None):
    """`X @ w` over the non-zeros of X only: [N, F] x [F, D] -> [N, D].

    `vals` replaces X's non-zero values (input dropout masks them); they get no gradient.
    """
    vals = g.feat_vals if vals is None else vals
    if g.kernels == "gather":
        return gather_matmul.feature_matmul(g.x_buckets, g.xt_buckets, w, vals)
    return jax.ops.segment_sum(
        w[g.feat_cols] * vals[:, None],
        g.feat_rows,
        num_segments=g.num_nodes,
        indices_are_sorted=True,
    )


def dropped_feature_matmul(g, w, rate: float, train: bool, sparse: bool = True) -> jax.Array:
    """`dropout(X) @ w`, called inside a Flax module: Kipf & Welling's dropout on the features'
    non-zeros only (dropping zeros changes nothing, and N*F random bits cost more than the
    layer); `sparse=False` drops and multiplies the dense features (a reference path)."""
    # A graph with dense rows and no non-zero list (`build.operator_graph`: subgraph views of
    # dense-featured graphs, jraph GraphsTuples) takes the dense product.
    sparse = sparse and not (g.feat_vals.shape[0] == 0 and g.features.shape[1] > 0)
    if sparse:
        vals = nn.Dropout(rate, deterministic=not train)(g.feat_vals)
        return sparse_feature_matmul(g, w, vals)
    return nn.Dropout(rate, deterministic=not train)(g.features) @ w
