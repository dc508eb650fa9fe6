"""The headroom analysis: how much a per-node depth could pay, and how much of it a policy that
sees only label-free signals can capture (`python experiments/reproduce.py headroom`).

Everything starts from the fixed-depth models: `probs` [D, S, N, C], the class probabilities of
every node from the model trained at depth `depths[i]` alone, seed s (each model is its run's
best-validation epoch). From them:

- fixed-depth accuracies, and the depth with the best mean validation accuracy;
- two UPPER BOUNDS that read test labels (never methods): every test node at the depth where it
  is most often right over the seeds, and a node counted right if any depth gets it right;
- label-free rules: the most confident depth, and an NDLS-style smoothness depth (the first k at
  which `Â^k x_v` is within eps of its stationary value; eps chosen on validation);
- a supervised probe: per seed, one logistic regression per depth, fitted ONLY on validation nodes
  (which no fixed-depth model trained on), predicting whether the node is right at that depth from
  signals known without its label; each test node gets the depth with the highest predicted
  chance. Its validation accuracy is cross-fitted (each fold predicted by a probe fitted on the
  others), so it can be compared with the other rules on validation.

All functions are pure NumPy / JAX over arrays; only `node_signals` and `smoothness_distances`
read the graph.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.sparse as sp
from scipy.sparse import csgraph
from scipy.sparse import linalg as sp_linalg

from policy_gnn_jax import data
from policy_gnn_jax import graph as graph_lib


def correctness(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """[D, S, N] bool: each depth's and seed's prediction equals the label (labels < 0: False)."""
    return probs.argmax(-1) == labels[None, None, :]


def accuracy_at(correct: np.ndarray, chosen: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """[S] accuracy on `nodes` [M] when node m gets depth index `chosen[s, m]` in seed s."""
    seeds = np.arange(correct.shape[1])[:, None]
    return correct[chosen, seeds, nodes[None, :]].mean(1)


def fixed_depth_accuracy(correct: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """[D, S] accuracy of each fixed depth on `nodes`."""
    return correct[:, :, nodes].mean(-1)


def upper_bound_most_often_right(correct: np.ndarray, test: np.ndarray) -> np.ndarray:
    """[S] UPPER BOUND (reads test labels): each test node at the depth where it is right in the
    most seeds (ties: the shallowest), scored per seed."""
    wins = correct[:, :, test].sum(1)  # [D, T]
    chosen = np.broadcast_to(wins.argmax(0), (correct.shape[1], test.size))
    return accuracy_at(correct, chosen, test)


def upper_bound_cross_seed(correct: np.ndarray, test: np.ndarray) -> np.ndarray:
    """[S] UPPER BOUND (reads test labels), without the seed noise the first one fits: each test
    node's depth is the one right most often in the OTHER half of the seeds, scored on this
    half. What survives is a node's systematic preference for a depth."""
    num_seeds = correct.shape[1]
    halves = np.array_split(np.arange(num_seeds), 2)
    out = np.zeros(num_seeds)
    for mine, other in (halves, halves[::-1]):
        chosen = correct[:, other][:, :, test].sum(1).argmax(0)  # [T]
        out[mine] = correct[chosen[None, :], mine[:, None], test[None, :]].mean(1)
    return out


def upper_bound_any_depth(correct: np.ndarray, test: np.ndarray) -> np.ndarray:
    """[S] UPPER BOUND (reads test labels): a test node counts as right if any depth is right."""
    return correct[:, :, test].any(0).mean(-1)


def most_confident_depth(probs: np.ndarray) -> np.ndarray:
    """[S, N] depth index with the highest top-class probability (label-free)."""
    return probs.max(-1).argmax(0)


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


def smoothness_depth(distances: np.ndarray, eps: float, depths: np.ndarray) -> np.ndarray:
    """[N] depth index: the first k with distance < eps (else the last), clipped to `depths`."""
    below = distances < eps
    k = np.where(below.any(0), below.argmax(0), distances.shape[0] - 1)
    return np.clip(k, depths.min(), depths.max()) - depths.min()


def choose_smoothness_eps(distances, correct, depths, val) -> tuple[float, np.ndarray]:
    """The eps (from quantiles of the distances) with the best mean VALIDATION accuracy."""
    grid = np.quantile(distances[:, val], np.linspace(0.02, 0.98, 25))
    scores = []
    for eps in grid:
        chosen = np.broadcast_to(smoothness_depth(distances, eps, depths), correct.shape[1:])
        scores.append(accuracy_at(correct, chosen[:, val], val).mean())
    return float(grid[int(np.argmax(scores))]), np.asarray(scores)


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


def _probe_loss(params, x, y, l2):
    logits = x @ params["w"] + params["b"]
    return jnp.mean(optax.sigmoid_binary_cross_entropy(logits, y)) + l2 * jnp.sum(params["w"] ** 2)


@jax.jit
def _fit_logistic(x, y, l2):
    """One logistic regression per column of y [M, D] on x [M, P], full batch, 300 Adam steps."""
    params = {"w": jnp.zeros((x.shape[1], y.shape[1])), "b": jnp.zeros(y.shape[1])}
    tx = optax.adam(0.05)

    def step(carry, _):
        params, state = carry
        grads = jax.grad(_probe_loss)(params, x, y, l2)
        updates, state = tx.update(grads, state, params)
        return (optax.apply_updates(params, updates), state), None

    (params, _), _ = jax.lax.scan(step, (params, tx.init(params)), length=300)
    return params


def fit_probe(signals: np.ndarray, targets: np.ndarray, l2: float = 1e-3):
    """A probe (standardisation + logistic regressions) from signals [M, P] and targets [M, D]."""
    mean, std = signals.mean(0), signals.std(0) + 1e-6
    x = jnp.asarray((signals - mean) / std, jnp.float32)
    params = _fit_logistic(x, jnp.asarray(targets, jnp.float32), l2)
    return {"mean": mean, "std": std, "w": np.asarray(params["w"]), "b": np.asarray(params["b"])}


def probe_scores(probe, signals: np.ndarray) -> np.ndarray:
    """[M, D] logits of the chance of being right at each depth."""
    return ((signals - probe["mean"]) / probe["std"]) @ probe["w"] + probe["b"]


def probe_depths(signals, correct_seed, fit_nodes, eval_nodes, l2: float = 1e-3) -> np.ndarray:
    """[len(eval_nodes)] depth index of each evaluated node by a probe fitted on `fit_nodes`.

    Args:
      signals: [N, P] one seed's signals.
      correct_seed: [D, N] that seed's correctness; only the `fit_nodes` columns are read.
    """
    probe = fit_probe(signals[fit_nodes], correct_seed[:, fit_nodes].T, l2)
    return probe_scores(probe, signals[eval_nodes]).argmax(1)


def cross_fitted_probe_depths(signals, correct_seed, val, folds: int = 5, seed: int = 0):
    """[V] each validation node's depth index from a probe fitted on the other folds."""
    order = np.random.default_rng(seed).permutation(val.size)
    chosen = np.zeros(val.size, np.int64)
    for part in np.array_split(order, folds):
        rest = np.setdiff1d(order, part)
        chosen[part] = probe_depths(signals, correct_seed, val[rest], val[part])
    return chosen


def summary(values) -> dict:
    values = np.asarray(values, np.float64)
    return {"mean": float(values.mean()), "std": float(values.std()), "per_seed": values.tolist()}


def _probe_row(ds, probs, correct, distances, max_hops: int, local_homophily: bool) -> dict:
    """The probe fitted on validation nodes, scored on validation (cross-fitted) and test."""
    val, test = np.asarray(ds.val_index), np.asarray(ds.test_index)
    num_depths, num_seeds = correct.shape[:2]
    graph_part = graph_signals(ds, max_hops, distances)
    per_seed = np.asarray(depth_signals(probs.astype(np.float32)), np.float64)
    if local_homophily:
        graph_part = np.concatenate([graph_part, feature_similarity(ds)[:, None]], 1)
        estimate = predicted_homophily(ds, probs[0])[..., None]
        per_seed = np.concatenate([per_seed, estimate], -1)
    probe_val, probe_test, probe_counts = [], [], np.zeros(num_depths, np.int64)
    for s in range(num_seeds):
        signals = np.concatenate([graph_part, per_seed[s]], 1)
        chosen_val = cross_fitted_probe_depths(signals, correct[:, s], val)
        chosen_test = probe_depths(signals, correct[:, s], val, test)
        probe_val.append(correct[chosen_val, s, val].mean())
        probe_test.append(correct[chosen_test, s, test].mean())
        probe_counts += np.bincount(chosen_test, minlength=num_depths)
    return {
        "val_accuracy": summary(probe_val),
        "val_note": "cross-fitted over 5 folds of the validation nodes",
        "test_accuracy": summary(probe_test),
        "depth_counts_test_all_seeds": probe_counts.tolist(),
    }


def analyse(
    ds: data.Dataset,
    probs: np.ndarray,
    depths: np.ndarray,
    max_hops: int,
    local_homophily: bool = False,
) -> dict:
    """The whole analysis for one dataset and backbone. Test labels are read only by the final
    scoring and the two upper bounds; every choice (best depth, eps, probe) uses validation.
    `local_homophily`: the probe also sees two label-free estimates of a node's local homophily
    (`feature_similarity`, `predicted_homophily`)."""
    labels = np.asarray(ds.labels)
    val, test = np.asarray(ds.val_index), np.asarray(ds.test_index)
    correct = correctness(probs, labels)
    num_seeds = probs.shape[1]
    fixed_val = fixed_depth_accuracy(correct, val)
    fixed_test = fixed_depth_accuracy(correct, test)
    best = int(fixed_val.mean(1).argmax())
    rows = {
        "best_fixed_depth_by_val": {
            "depth": int(depths[best]),
            "val_accuracy": summary(fixed_val[best]),
            "test_accuracy": summary(fixed_test[best]),
        },
        "upper_bound_most_often_right_depth": {
            "test_accuracy": summary(upper_bound_most_often_right(correct, test)),
            "note": "UPPER BOUND: reads test labels to pick each node's depth; not a method.",
        },
        "upper_bound_cross_seed": {
            "test_accuracy": summary(upper_bound_cross_seed(correct, test)),
            "note": "UPPER BOUND: reads test labels; each node's depth from the other half of "
            "the seeds, so seed noise is not counted as headroom; not a method.",
        },
        "upper_bound_any_depth_right": {
            "test_accuracy": summary(upper_bound_any_depth(correct, test)),
            "note": "UPPER BOUND: a node counts if any depth is right; not a method.",
        },
    }
    confident = most_confident_depth(probs)
    rows["rule_most_confident_depth"] = {
        "val_accuracy": summary(accuracy_at(correct, confident[:, val], val)),
        "test_accuracy": summary(accuracy_at(correct, confident[:, test], test)),
    }
    distances = smoothness_distances(ds, int(depths.max()))
    eps, _ = choose_smoothness_eps(distances, correct, depths, val)
    smooth = np.broadcast_to(smoothness_depth(distances, eps, depths), (num_seeds, ds.num_nodes))
    rows["rule_smoothness_depth"] = {
        "eps_chosen_on_val": eps,
        "val_accuracy": summary(accuracy_at(correct, smooth[:, val], val)),
        "test_accuracy": summary(accuracy_at(correct, smooth[:, test], test)),
        "depth_counts_test": np.bincount(smooth[0, test], minlength=len(depths)).tolist(),
    }
    rows["probe_on_validation_nodes"] = _probe_row(
        ds, probs, correct, distances, max_hops, local_homophily
    )
    best_test = fixed_test[best].mean()
    bound = rows["upper_bound_most_often_right_depth"]["test_accuracy"]["mean"]
    for key in ("rule_most_confident_depth", "rule_smoothness_depth", "probe_on_validation_nodes"):
        gain = rows[key]["test_accuracy"]["mean"] - best_test
        rows[key]["share_of_headroom"] = float(gain / max(bound - best_test, 1e-9))
    return {
        "depths": depths.tolist(),
        "seeds": num_seeds,
        "fixed_depth": {
            int(d): {"val_accuracy": summary(fixed_val[i]), "test_accuracy": summary(fixed_test[i])}
            for i, d in enumerate(depths)
        },
        **rows,
    }
