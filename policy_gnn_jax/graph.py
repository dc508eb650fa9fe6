"""The device-side graph: the normalised adjacency, sparse features, labels and split indices.

Built once on the host from a `data.Dataset` and closed over (or passed unbatched) by every jitted
function; it never changes during training.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from flax import struct
from scipy.sparse import csgraph

from policy_gnn_jax import data


@struct.dataclass
class Graph:
    """A fixed graph on the device. N nodes, F features, C classes.

    Attributes:
      features: [N, F] dense features: the Q-network's states are rows of it.
      feat_rows, feat_cols, feat_vals: the non-zeros of the features, sorted by row, so the
        first GCN layer is a sparse `X @ W` (Planetoid features are ~1 % non-zero).
      senders, receivers, weights: `Â = D^-1/2 (A + I) D^-1/2` as weighted edges, self-loops
        included, sorted by receiver.
      nbr_indptr, nbr_indices: CSR neighbour lists of A (no self-loops), for random walks.
      labels: [N] int32, -1 for nodes without a label.
      train_index, val_index, test_index: node ids of each split.
    """

    features: jax.Array
    feat_rows: jax.Array
    feat_cols: jax.Array
    feat_vals: jax.Array
    senders: jax.Array
    receivers: jax.Array
    weights: jax.Array
    nbr_indptr: jax.Array
    nbr_indices: jax.Array
    labels: jax.Array
    train_index: jax.Array
    val_index: jax.Array
    test_index: jax.Array
    num_classes: int = struct.field(pytree_node=False)

    @property
    def num_nodes(self) -> int:
        return self.features.shape[0]

    @property
    def num_features(self) -> int:
        return self.features.shape[1]


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


def from_dataset(ds: data.Dataset) -> Graph:
    """Moves a host Dataset to the device in the form the model needs.

    The dataset's invariants are checked again here (a frozen Dataset's arrays can still be
    edited in place): `propagate`'s symmetric VJP and the neighbour lists below rely on them.
    """
    data.validate(ds)
    senders, receivers, weights = normalised_adjacency(ds.edges, ds.num_nodes)
    coo = ds.features.tocoo()
    order = np.lexsort((coo.col, coo.row))
    # Edges are sorted by receiver and symmetric: senders grouped by receiver are neighbour lists.
    indptr = np.searchsorted(ds.edges[1], np.arange(ds.num_nodes + 1)).astype(np.int32)
    return Graph(
        features=jnp.asarray(ds.features.toarray(), dtype=jnp.float32),
        feat_rows=jnp.asarray(coo.row[order], dtype=jnp.int32),
        feat_cols=jnp.asarray(coo.col[order], dtype=jnp.int32),
        feat_vals=jnp.asarray(coo.data[order], dtype=jnp.float32),
        senders=jnp.asarray(senders),
        receivers=jnp.asarray(receivers),
        weights=jnp.asarray(weights),
        nbr_indptr=jnp.asarray(indptr),
        nbr_indices=jnp.asarray(ds.edges[0], dtype=jnp.int32),
        labels=jnp.asarray(ds.labels, dtype=jnp.int32),
        train_index=jnp.asarray(ds.train_index, dtype=jnp.int32),
        val_index=jnp.asarray(ds.val_index, dtype=jnp.int32),
        test_index=jnp.asarray(ds.test_index, dtype=jnp.int32),
        num_classes=ds.num_classes,
    )


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
