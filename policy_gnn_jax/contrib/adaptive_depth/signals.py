"""Label-free per-node signals, which the headroom analysis's probe (`headroom.py`) and
Policy-GNN+'s bandit read: a node's degree and distance to the training nodes, NDLS's smoothness
distances, the features' top singular directions, and signals of a model's predictions.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph
from scipy.sparse import linalg as sp_linalg

from policy_gnn_jax import data
from policy_gnn_jax import graph as graph_lib


def smoothness_distances(ds: data.Dataset, max_k: int) -> np.ndarray:
    """[max_k + 1, N]: ||Â^k x_v - x_inf(v)||_2 for k = 0..max_k (NDLS's smoothness measure).

    With Â = D^-1/2 (A+I) D^-1/2, Â^k tends, on each connected component, to u u^T / (u^T u)
    with u = sqrt(degree + 1) restricted to it, so the stationary features of node v in component
    c are u_v (u_c^T X_c) / (u_c^T u_c). (NDLS's formula is the one-component case.) Features as
    the models see them.
    """
    x = data.features_array(ds.features).astype(np.float64)
    s, r, w = graph_lib.normalised_adjacency(ds.edges, ds.num_nodes)
    a_hat = sp.csr_matrix((w, (r, s)), shape=(ds.num_nodes, ds.num_nodes))
    u = np.sqrt(np.asarray(a_hat.astype(bool).sum(1)).ravel())  # sqrt(degree + 1)
    _, component = csgraph.connected_components(a_hat, directed=False)
    per_component = np.zeros((component.max() + 1, x.shape[1]))
    np.add.at(per_component, component, u[:, None] * x)
    mass = np.bincount(component, weights=u * u)
    x_inf = u[:, None] * per_component[component] / mass[component][:, None]
    distances = []
    h = x
    for _ in range(max_k + 1):
        distances.append(np.linalg.norm(h - x_inf, axis=1))
        h = a_hat @ h
    return np.stack(distances)


def node_signals(ds: data.Dataset, max_hops: int) -> np.ndarray:
    """[N, 2]: log(1 + degree) and the hop distance to the nearest training node (capped at
    max_hops + 1). Neither reads a label beyond which nodes are in the training split."""
    n = ds.num_nodes
    adj = sp.csr_matrix((np.ones(ds.num_edges), (ds.edges[0], ds.edges[1])), shape=(n, n))
    degree = np.asarray(adj.sum(1)).ravel()
    dist = csgraph.dijkstra(adj, unweighted=True, indices=ds.train_index, limit=max_hops + 0.5)
    nearest = np.where(np.isfinite(dist), dist, max_hops + 1).min(0)
    return np.stack([np.log1p(degree), nearest], 1)


def feature_projection(ds: data.Dataset, dims: int = 16) -> np.ndarray:
    """[N, dims]: the raw features on their top singular directions (label-free)."""
    x = ds.features.astype(np.float64)
    dims = max(1, min(dims, min(x.shape) - 1))
    left, values, _ = sp_linalg.svds(x, k=dims, random_state=0)
    return left * values


def depth_signals(probs):
    """[..., N, 4D] from probs [D, ..., N, C]: per depth, the top-class probability, the entropy,
    agreement with the previous depth's prediction and agreement with the most common prediction
    over depths. Label-free; jnp ops, so the Policy-GNN+ loop computes it inside jit too."""
    top = probs.max(-1)
    entropy = -(probs * jnp.log(jnp.clip(probs, 1e-12, 1.0))).sum(-1)
    pred = probs.argmax(-1)  # [D, ..., N]
    previous = jnp.concatenate([pred[:1], pred[:-1]])
    agree_prev = (pred == previous).astype(probs.dtype)
    votes = (pred[..., None] == jnp.arange(probs.shape[-1])).sum(0)  # [..., N, C]
    agree_major = (pred == votes.argmax(-1)[None]).astype(probs.dtype)
    stacked = jnp.concatenate([top, entropy, agree_prev, agree_major])  # [4D, ..., N]
    return jnp.moveaxis(stacked, 0, -1)


def graph_signals(
    ds: data.Dataset, max_depth: int, distances: np.ndarray | None = None, projection_dims: int = 16
) -> np.ndarray:
    """[N, 2 + max_depth + 1 + dims]: the label-free per-node signals that do not depend on a
    model: degree, distance to the nearest training node, the smoothness distances of
    k = 0..max_depth (`smoothness_distances`, unless given), the features' top singular
    directions."""
    if distances is None:
        distances = smoothness_distances(ds, max_depth)
    return np.concatenate(
        [node_signals(ds, max_depth), distances.T, feature_projection(ds, projection_dims)], 1
    )


def _neighbour_mean(ds: data.Dataset, values: np.ndarray) -> np.ndarray:
    """[N, ...] the mean of `values` [N, ...] over each node's neighbours (0 for none)."""
    n = ds.num_nodes
    adj = sp.csr_matrix((np.ones(ds.num_edges), (ds.edges[1], ds.edges[0])), shape=(n, n))
    degree = np.maximum(np.asarray(adj.sum(1)).ravel(), 1)
    flat = values.reshape(n, -1)
    return (adj @ flat / degree[:, None]).reshape(values.shape)


def feature_similarity(ds: data.Dataset) -> np.ndarray:
    """[N]: the cosine between a node's features and its neighbours' mean features, a
    label-free sign of local homophily (0 for an isolated node)."""
    x = data.features_array(ds.features).astype(np.float64)
    mean = _neighbour_mean(ds, x)
    norms = np.linalg.norm(x, axis=1) * np.linalg.norm(mean, axis=1)
    return np.where(norms > 0, (x * mean).sum(1) / np.maximum(norms, 1e-12), 0.0)


def predicted_homophily(ds: data.Dataset, probs: np.ndarray) -> np.ndarray:
    """[S, N]: a label-free estimate of local homophily, the chance that a node and a neighbour
    share a class if both classes are drawn from a model's predictions `probs` [S, N, C]
    (the shallowest depth's: its predictions use no neighbour), averaged over the neighbours."""
    per_seed = np.moveaxis(probs.astype(np.float64), 0, 1)  # [N, S, C]
    mean = np.moveaxis(_neighbour_mean(ds, per_seed), 1, 0)  # [S, N, C]
    return (probs * mean).sum(-1)
