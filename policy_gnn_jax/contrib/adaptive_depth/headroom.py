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

All functions are pure NumPy / JAX over arrays; the label-free signals are `signals.py`'s.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from policy_gnn_jax import data
from policy_gnn_jax.contrib.adaptive_depth import signals as signals_lib
from policy_gnn_jax.runtime import records


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


def _probe_row(ds, probs, correct, distances, max_hops: int, local_homophily: bool) -> dict:
    """The probe fitted on validation nodes, scored on validation (cross-fitted) and test."""
    val, test = np.asarray(ds.val_index), np.asarray(ds.test_index)
    num_depths, num_seeds = correct.shape[:2]
    graph_part = signals_lib.graph_signals(ds, max_hops, distances)
    per_seed = np.asarray(signals_lib.depth_signals(probs.astype(np.float32)), np.float64)
    if local_homophily:
        graph_part = np.concatenate([graph_part, signals_lib.feature_similarity(ds)[:, None]], 1)
        estimate = signals_lib.predicted_homophily(ds, probs[0])[..., None]
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
        "val_accuracy": records.mean_std(probe_val),
        "val_note": "cross-fitted over 5 folds of the validation nodes",
        "test_accuracy": records.mean_std(probe_test),
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
    (`signals.feature_similarity`, `signals.predicted_homophily`)."""
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
            "val_accuracy": records.mean_std(fixed_val[best]),
            "test_accuracy": records.mean_std(fixed_test[best]),
        },
        "upper_bound_most_often_right_depth": {
            "test_accuracy": records.mean_std(upper_bound_most_often_right(correct, test)),
            "note": "UPPER BOUND: reads test labels to pick each node's depth; not a method.",
        },
        "upper_bound_cross_seed": {
            "test_accuracy": records.mean_std(upper_bound_cross_seed(correct, test)),
            "note": "UPPER BOUND: reads test labels; each node's depth from the other half of "
            "the seeds, so seed noise is not counted as headroom; not a method.",
        },
        "upper_bound_any_depth_right": {
            "test_accuracy": records.mean_std(upper_bound_any_depth(correct, test)),
            "note": "UPPER BOUND: a node counts if any depth is right; not a method.",
        },
    }
    confident = most_confident_depth(probs)
    rows["rule_most_confident_depth"] = {
        "val_accuracy": records.mean_std(accuracy_at(correct, confident[:, val], val)),
        "test_accuracy": records.mean_std(accuracy_at(correct, confident[:, test], test)),
    }
    distances = signals_lib.smoothness_distances(ds, int(depths.max()))
    eps, _ = choose_smoothness_eps(distances, correct, depths, val)
    smooth = np.broadcast_to(smoothness_depth(distances, eps, depths), (num_seeds, ds.num_nodes))
    rows["rule_smoothness_depth"] = {
        "eps_chosen_on_val": eps,
        "val_accuracy": records.mean_std(accuracy_at(correct, smooth[:, val], val)),
        "test_accuracy": records.mean_std(accuracy_at(correct, smooth[:, test], test)),
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
            int(d): {
                "val_accuracy": records.mean_std(fixed_val[i]),
                "test_accuracy": records.mean_std(fixed_test[i]),
            }
            for i, d in enumerate(depths)
        },
        **rows,
    }
