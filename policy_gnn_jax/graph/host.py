"""The host engine's graphs (`--engine host`): the whole graph stays in host memory, the device
holds only the split nodes.

The subgraph engine already trains and measures on padded neighbourhoods, but it samples them
from a copy of the whole graph on the device (features, sparse rows, edges), which grows with
the graph. Here the whole graph is a `HostStore` in host memory, memory-mapped files included
(`data.load_arrays`), never copied: the sampler reads the rows a subgraph needs from it and sends
only those to the device with the subgraph (`sampler.Sampler`).

The device keeps a `Graph` of the split nodes alone (train, validation and test: what the agent
reads states of, and the only nodes whose labels the loop reads). Its node i is the i-th split
node in ascending id order, so every gather over them runs in the whole graph's order and a run
repeats the subgraph engine's bits; its `host` field points at the `HostStore`, which
translates its ids back (`HostStore.split_nodes`). It has no edges: only the sampler knows
the graph's structure, so the loop refuses whatever would run a backbone on it directly.

Walkers move with the `labelled` transition (between training nodes, by the hop distances
`hop_distances` computes from the host's adjacency); the random walk would need the adjacency
on the device and is refused.
"""

from __future__ import annotations

import copy

import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from policy_gnn_jax import data
from policy_gnn_jax.graph import build
from policy_gnn_jax.graph import graph as graph_lib


class HostStore:
    """The whole graph in host memory. Compared and hashed by identity: it rides in the split
    graph's static fields, so a compiled program is keyed to the store it was built over.

    Attributes:
      indptr, indices: CSR neighbour lists of A (no self-loops; `indices` is the dataset's
        sender row itself, a memory-map where the dataset has one).
      degree: [N] float64, deg + 1 (the self-loop), for Â's weights.
      features: the dataset's own features (dense rows or CSR), read row by row.
      sparse_rows: whether rows travel as their non-zeros padded to `row_width` (as
        `graph.from_dataset` would store them) rather than dense.
      split_nodes: [S] the split nodes' ids, ascending: the device graph's node i is
        `split_nodes[i]`.
    """

    def __init__(self, ds: data.Dataset, sparse_rows: bool, row_width: int):
        n = ds.num_nodes
        self.indptr = np.searchsorted(ds.edges[1], np.arange(n + 1)).astype(np.int64)
        self.indices = ds.edges[0]
        self.degree = np.diff(self.indptr) + 1.0
        self.features = ds.features
        self.sparse_rows = sparse_rows
        self.row_width = row_width
        self.num_features = ds.num_features
        self.split_nodes = np.sort(
            np.concatenate([ds.train_index, ds.val_index, ds.test_index]).astype(np.int64)
        )

    @property
    def num_nodes(self) -> int:
        return len(self.degree)

    def neighbours(self, nodes: np.ndarray) -> np.ndarray:
        """Every neighbour of every node in `nodes`, concatenated (int64; repeats kept)."""
        starts = self.indptr[nodes]
        counts = self.indptr[nodes + 1] - starts
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        return self.indices[np.repeat(starts, counts) + offsets].astype(np.int64)

    def dense_rows(self, ids: np.ndarray) -> np.ndarray:
        """[M, F] float32: the feature rows of `ids` (any order, repeats allowed)."""
        if sp.issparse(self.features):
            return self.features[ids].toarray().astype(np.float32, copy=False)
        return np.asarray(self.features[ids], np.float32)

    def padded_rows(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """([M, P] int32 columns, [M, P] float32 values): each row's non-zeros padded to P."""
        rows = (
            self.features[ids]
            if sp.issparse(self.features)
            else sp.csr_matrix(self.dense_rows(ids))
        )
        rows = sp.csr_matrix(rows, dtype=np.float32)
        rows.sort_indices()
        idx, val = build.padded_rows(rows.indptr, rows.indices, rows.data)
        width = self.row_width
        out_idx = np.zeros((len(ids), width), np.int32)
        out_val = np.zeros((len(ids), width), np.float32)
        used = min(width, idx.shape[1])
        out_idx[:, :used], out_val[:, :used] = idx[:, :used], val[:, :used]
        return out_idx, out_val


def widest_row(features) -> int:
    """The most non-zeros in one feature row. Dense rows are counted in chunks, and only until
    one row is too wide for sparse rows to pay (`graph.sparse_rows_pay`): then the exact width
    is never used, and a dense graph of 10^7 rows is not read through for it."""
    if sp.issparse(features):
        return int(np.diff(features.indptr).max(initial=0))
    widest, step = 0, max(1, 2**22 // max(features.shape[1], 1))
    for start in range(0, features.shape[0], step):
        widest = max(widest, int(np.count_nonzero(features[start : start + step], 1).max()))
        if not build.sparse_rows_pay(widest, features.shape[1]):
            break
    return widest


def split_graph(ds: data.Dataset, kernels: str = "auto") -> graph_lib.Graph:
    """The device graph of the split nodes (features, labels, splits; no edges), holding the
    `HostStore` of the whole graph. Rows travel as non-zeros where the whole graph's would.

    The dataset is validated again first, as `graph.from_dataset` does: the sampler's weights
    and neighbour lists rely on a symmetric, receiver-sorted edge list."""
    data.validate(ds)
    widest = widest_row(ds.features)
    sparse_rows = build.sparse_rows_pay(widest, ds.num_features)
    store = HostStore(ds, sparse_rows, max(1, widest) if sparse_rows else 0)
    ids = store.split_nodes
    local = {name: np.searchsorted(ids, getattr(ds, f"{name}_index")) for name in SPLITS}
    rows = sp.csr_matrix(ds.features[ids], dtype=np.float32)
    part = data.Dataset(
        name=ds.name,
        features=rows,
        labels=np.asarray(ds.labels[ids], np.int32),
        edges=np.zeros((2, 0), np.int32),
        train_index=local["train"].astype(np.int32),
        val_index=local["val"].astype(np.int32),
        test_index=local["test"].astype(np.int32),
        num_classes=ds.num_classes,
        metric=ds.metric,
    )
    g = build.from_dataset(part, kernels)
    if sparse_rows:  # the whole graph's row width: padding changes no sum, but keep the shape
        idx, val = store.padded_rows(ids)
        g = g.replace(feat_ell_idx=jnp.asarray(idx), feat_ell_val=jnp.asarray(val))
    elif g.feat_ell_idx.shape[1] > 0:
        g = g.replace(feat_ell_idx=jnp.zeros((len(ids), 0), jnp.int32),
                      feat_ell_val=jnp.zeros((len(ids), 0), jnp.float32))  # fmt: skip
    return g.replace(host=store)


SPLITS = ("train", "val", "test")


def with_split_nodes(store: HostStore, ids: np.ndarray) -> HostStore:
    """The same whole graph, its device-side node i now `ids[i]` (prediction's own nodes)."""
    other = copy.copy(store)
    other.split_nodes = np.asarray(ids, np.int64)
    return other


def rows_graph(store: HostStore, ids: np.ndarray, like: graph_lib.Graph) -> graph_lib.Graph:
    """A device graph of the nodes `ids` alone (their rows in the layout of `like`, the split
    graph a fit trained on; no labels, splits or edges) for an agent to read states from; its
    `host` is the store with these nodes as its split nodes."""
    rows = sp.csr_matrix(store.dense_rows(ids)) if not sp.issparse(store.features) else None
    rows = sp.csr_matrix(store.features[ids], dtype=np.float32) if rows is None else rows
    rows.sort_indices()
    coo = rows.tocoo()
    ell_idx, ell_val = store.padded_rows(ids) if store.sparse_rows else (None, None)
    width = store.row_width if store.sparse_rows else 0
    empty = jnp.zeros((0,), jnp.int32)
    return like.replace(
        features=jnp.asarray(rows.toarray(), jnp.float32),
        feat_rows=jnp.asarray(coo.row, jnp.int32),
        feat_cols=jnp.asarray(coo.col, jnp.int32),
        feat_vals=jnp.asarray(coo.data, jnp.float32),
        feat_ell_idx=jnp.asarray(ell_idx) if width else jnp.zeros((len(ids), 0), jnp.int32),
        feat_ell_val=jnp.asarray(ell_val) if width else jnp.zeros((len(ids), 0), jnp.float32),
        senders=empty,
        receivers=empty,
        weights=jnp.zeros((0,), jnp.float32),
        labels=jnp.full((len(ids),), -1, jnp.int32),
        train_index=empty,
        val_index=empty,
        test_index=empty,
        adj_buckets=None,
        x_buckets=None,
        xt_buckets=None,
        host=with_split_nodes(store, ids),
    )


def hop_distances(store: HostStore, sources: np.ndarray, targets: np.ndarray, max_hops: int):
    """[len(sources), len(targets)] int32 hop distances over the host's adjacency, capped at
    `max_hops + 1` (= farther): `graph.train_hop_distances` without an [S, N] table, by a BFS
    from each source that stops after `max_hops` levels."""
    n = store.num_nodes
    seen = np.full(n, -1, np.int64)  # the source whose BFS reached the node last
    hops = np.zeros(n, np.int32)
    out = np.full((len(sources), len(targets)), max_hops + 1, np.int32)
    for row, source in enumerate(np.asarray(sources, np.int64)):
        seen[source], hops[source] = row, 0
        frontier = np.array([source])
        for level in range(1, max_hops + 1):
            nbrs = np.unique(store.neighbours(frontier))
            frontier = nbrs[seen[nbrs] != row]
            seen[frontier], hops[frontier] = row, level
            if not len(frontier):
                break
        reached = seen[targets] == row
        out[row, reached] = hops[np.asarray(targets)[reached]]
    return out
