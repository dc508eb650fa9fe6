"""Building the device `Graph` from a `data.Dataset` on the host: Â's normalised edges, the
features' non-zeros in the layouts the kernels read, the gather buckets of the deterministic
kernels, and the hop distances between training nodes. Also a `Graph` from a
`jraph.GraphsTuple` (`from_graphs_tuple`, traceable) and for a padded subgraph
(`operator_graph`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from policy_gnn_jax import data
from policy_gnn_jax.graph import gather_matmul
from policy_gnn_jax.graph.graph import Graph

KERNELS = ("auto", "scatter", "gather")


def normalised_adjacency(edges: np.ndarray, num_nodes: int):
    """Returns (senders, receivers, weights) of D^-1/2 (A + I) D^-1/2, sorted by receiver."""
    loops = np.arange(num_nodes, dtype=np.int64)
    senders = np.concatenate([edges[0], loops])
    receivers = np.concatenate([edges[1], loops])
    degree = np.bincount(receivers, minlength=num_nodes).astype(np.float64)
    weights = 1.0 / np.sqrt(degree[senders] * degree[receivers])
    order = np.lexsort((senders, receivers))
    return (
        senders[order].astype(np.int32),
        receivers[order].astype(np.int32),
        weights[order].astype(np.float32),
    )


def choose_kernels(kernels: str = "auto") -> str:
    """ "auto": gather-only products on accelerators (no atomics there: exact with autotuning
    off alone, `runtime/compilation.py`), segment sums on CPU (exact there anyway, and
    faster)."""
    if kernels not in KERNELS:
        raise ValueError(f"kernels must be one of {KERNELS}, got {kernels!r}.")
    if kernels == "auto":
        return "scatter" if jax.default_backend() == "cpu" else "gather"
    return kernels


def from_dataset(ds: data.Dataset, kernels: str = "auto") -> Graph:
    """Moves a host Dataset to the device in the form the model needs.

    The dataset's invariants are checked again here (a frozen Dataset's arrays can still be
    edited in place): `propagate`'s symmetric VJP and the neighbour lists below rely on them.
    """
    data.validate(ds)
    senders, receivers, weights = normalised_adjacency(ds.edges, ds.num_nodes)
    # The features' non-zeros sorted by (row, col), in either layout: copies, never the
    # dataset's own arrays (sorting a CSR in place would change the dataset and its fingerprint).
    rows, cols, vals = data.feature_nonzeros(ds.features)
    x_indptr = np.searchsorted(rows, np.arange(ds.num_nodes + 1))
    if sparse_rows_pay(int(np.diff(x_indptr).max(initial=0)), ds.num_features):
        ell_idx, ell_val = padded_rows(x_indptr, cols, vals)
    else:
        ell_idx = np.zeros((ds.num_nodes, 0), np.int32)
        ell_val = np.zeros((ds.num_nodes, 0), np.float32)
    kernels = choose_kernels(kernels)
    buckets = (None,) * 3
    if kernels == "gather":
        buckets = _gather_buckets(ds, senders, receivers, x_indptr, cols)
    # Edges are sorted by receiver and symmetric: senders grouped by receiver are neighbour lists.
    indptr = np.searchsorted(ds.edges[1], np.arange(ds.num_nodes + 1)).astype(np.int32)
    return Graph(
        features=jnp.asarray(data.features_array(ds.features), dtype=jnp.float32),
        feat_rows=jnp.asarray(rows, dtype=jnp.int32),
        feat_cols=jnp.asarray(cols, dtype=jnp.int32),
        feat_vals=jnp.asarray(vals, dtype=jnp.float32),
        feat_ell_idx=jnp.asarray(ell_idx),
        feat_ell_val=jnp.asarray(ell_val),
        senders=jnp.asarray(senders),
        receivers=jnp.asarray(receivers),
        weights=jnp.asarray(weights),
        nbr_indptr=jnp.asarray(indptr),
        nbr_indices=jnp.asarray(ds.edges[0], dtype=jnp.int32),
        labels=jnp.asarray(ds.labels, dtype=jnp.int32),
        train_index=jnp.asarray(ds.train_index, dtype=jnp.int32),
        val_index=jnp.asarray(ds.val_index, dtype=jnp.int32),
        test_index=jnp.asarray(ds.test_index, dtype=jnp.int32),
        adj_buckets=buckets[0],
        x_buckets=buckets[1],
        xt_buckets=buckets[2],
        num_classes=ds.num_classes,
        kernels=kernels,
        metric=ds.metric,
    )


def _gather_buckets(ds: data.Dataset, senders, receivers, x_indptr, x_cols):
    """Â (by receiver: its CSR order is the edge order above), X and X^T as gather buckets;
    X's entries in the order of `feat_vals`, which is the value array they read."""
    adj_indptr = np.searchsorted(receivers, np.arange(ds.num_nodes + 1))
    t_indptr, t_indices, t_positions = gather_matmul.transpose_csr(
        x_indptr, x_cols, ds.num_features
    )
    return (
        gather_matmul.build(adj_indptr, senders),
        gather_matmul.build(x_indptr, x_cols),
        gather_matmul.build(t_indptr, t_indices, t_positions),
    )


def sparse_rows_pay(widest_row: int, num_features: int) -> bool:
    """Whether gathering rows' non-zeros beats dense rows: the widest row under a quarter of F."""
    return 4 * max(widest_row, 1) <= num_features


def padded_rows(indptr, cols, vals) -> tuple[np.ndarray, np.ndarray]:
    """Each CSR row's non-zeros, padded to the widest row: ([N, P] int32 ids, [N, P] values)."""
    indptr = np.asarray(indptr)
    lengths = np.diff(indptr)
    width = max(1, int(lengths.max(initial=0)))
    position = np.arange(indptr[-1]) - np.repeat(indptr[:-1], lengths)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    idx = np.zeros((len(lengths), width), np.int32)
    val = np.zeros((len(lengths), width), np.float32)
    idx[rows, position] = cols
    val[rows, position] = vals
    return idx, val


def train_hop_distances(ds: data.Dataset, max_hops: int) -> np.ndarray:
    """Hop distances between training nodes, by BFS, capped: [T, T] int32, max_hops + 1 = farther.

    Args:
      ds: the dataset.
      max_hops: BFS depth limit (K).

    Returns:
      dist[i, j] = hops from train node i to train node j, or max_hops + 1 beyond the limit.
    """
    n = ds.num_nodes
    adj = sp.csr_matrix((np.ones(ds.num_edges), (ds.edges[0], ds.edges[1])), shape=(n, n))
    dist = csgraph.dijkstra(adj, unweighted=True, indices=ds.train_index, limit=max_hops + 0.5)
    dist = dist[:, ds.train_index]
    return np.where(np.isfinite(dist), dist, max_hops + 1).astype(np.int32)


def from_graphs_tuple(gt, num_classes: int) -> Graph:
    """A `jraph.GraphsTuple` (nodes: [N, F] features; senders, receivers; padded or not) as the
    `Graph` the GCN layers run on, traceable inside jit. Â is built from the structure as
    everywhere else, `D^-1/2 (A + I) D^-1/2` over the edges as given (pass both directions of
    an undirected edge); edge features are ignored. No labels or splits: it is for `apply`.
    The features take the dense product (`dropped_feature_matmul`)."""
    if len(getattr(gt.nodes, "shape", ())) != 2:  # shapes are static: checked while tracing
        raise ValueError(
            f"a GraphsTuple's nodes must be the [N, F] features of its nodes, got "
            f"{type(gt.nodes).__name__} {getattr(gt.nodes, 'shape', '')}: pass one row per node."
        )
    features = jnp.asarray(gt.nodes, jnp.float32)
    n = features.shape[0]
    for field in ("senders", "receivers"):  # as given, before a cast could wrap them
        ids = getattr(gt, field)
        if isinstance(ids, jax.core.Tracer):  # inside jit the values are not known here
            continue
        ids = np.asarray(ids)
        outside = (ids < 0) | (ids >= n)
        if outside.any():  # the sparse product would drop or clamp such an edge unsaid
            raise ValueError(
                f"a GraphsTuple's {field} hold node id {ids[outside][0]}, outside 0..{n - 1} "
                f"({int(outside.sum())} such ids): pass edges between its {n} nodes."
            )
    loops = jnp.arange(n, dtype=jnp.int32)
    senders = jnp.concatenate([jnp.asarray(gt.senders, jnp.int32), loops])
    receivers = jnp.concatenate([jnp.asarray(gt.receivers, jnp.int32), loops])
    order = jnp.lexsort((senders, receivers))
    senders, receivers = senders[order], receivers[order]
    degree = jnp.zeros(n, jnp.float32).at[receivers].add(1.0)
    weights = jax.lax.rsqrt(degree[senders] * degree[receivers])
    return operator_graph(
        features=features,
        feature_nonzeros=None,
        senders=senders,
        receivers=receivers,
        weights=weights,
        labels=jnp.full(n, -1, jnp.int32),
        num_classes=num_classes,
        feature_dim=features.shape[1],
    )


def operator_graph(
    *, features, feature_nonzeros, senders, receivers, weights, labels, num_classes, feature_dim
) -> Graph:
    """A `Graph` holding only what a GNN's forward pass reads: features (dense rows, or
    `feature_nonzeros` = (rows, cols, vals) sorted by row with `features` [n, 0]), Â's edges
    sorted by receiver, and labels. No splits, neighbour lists or gather buckets; Â is not
    assumed symmetric, so `graph.propagate`'s backward pass uses Â^T."""
    n = features.shape[0]
    empty = jnp.zeros((0,), jnp.int32)
    rows, cols, vals = feature_nonzeros or (empty, empty, jnp.zeros((0,), jnp.float32))
    return Graph(
        features=features,
        feat_rows=rows,
        feat_cols=cols,
        feat_vals=vals,
        feat_ell_idx=jnp.zeros((n, 0), jnp.int32),
        feat_ell_val=jnp.zeros((n, 0), jnp.float32),
        senders=senders,
        receivers=receivers,
        weights=weights,
        nbr_indptr=empty,
        nbr_indices=empty,
        labels=labels,
        train_index=empty,
        val_index=empty,
        test_index=empty,
        adj_buckets=None,
        x_buckets=None,
        xt_buckets=None,
        num_classes=num_classes,
        kernels="scatter",
        feature_dim=feature_dim,
        symmetric=False,
    )
