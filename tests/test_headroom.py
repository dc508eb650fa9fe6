"""The headroom analysis: upper bounds by hand, the smoothness measure against a dense
reference, and no choice that reads a test label."""

import dataclasses

import numpy as np

from policy_gnn_jax.contrib.adaptive_depth import headroom
from policy_gnn_jax.contrib.adaptive_depth import signals as signals_lib


def test_upper_bounds_by_hand():
    # 2 depths, 2 seeds, 3 test nodes. Node 0: right at depth 0 in both seeds; node 1: right at
    # depth 1 in seed 0 only; node 2: never right.
    correct = np.zeros((2, 2, 3), bool)
    correct[0, :, 0] = True
    correct[1, 0, 1] = True
    test = np.arange(3)
    np.testing.assert_allclose(headroom.upper_bound_most_often_right(correct, test), [2 / 3, 1 / 3])
    np.testing.assert_allclose(headroom.upper_bound_any_depth(correct, test), [2 / 3, 1 / 3])
    correct[1, 1, 0] = True  # node 0 also right at depth 1 in seed 1: depth 0 still wins (2 > 1)
    np.testing.assert_allclose(headroom.upper_bound_most_often_right(correct, test), [2 / 3, 1 / 3])


def test_smoothness_distances_match_dense_powers(small_dataset):
    from tests.test_gcn import dense_adjacency

    a_hat = dense_adjacency(small_dataset)
    x = small_dataset.features.toarray().astype(np.float64)
    got = signals_lib.smoothness_distances(small_dataset, 4)
    # The stationary limit, computed independently as a high power of Â.
    x_inf = np.linalg.matrix_power(a_hat, 4000) @ x
    for k in range(5):
        want = np.linalg.norm(np.linalg.matrix_power(a_hat, k) @ x - x_inf, axis=1)
        np.testing.assert_allclose(got[k], want, rtol=1e-6, atol=1e-8)


def _fake_probs(ds, depths=4, seeds=3, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(depths, seeds, ds.num_nodes, ds.num_classes))
    logits[..., :] += (
        2.0
        * np.eye(ds.num_classes)[np.maximum(ds.labels, 0)]
        * rng.random((depths, 1, ds.num_nodes, 1))
    )
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_no_choice_reads_a_test_label(small_dataset):
    """Permuting the test labels changes the test scores only: the best depth, eps, the probe's
    depths and every validation number stay equal."""
    probs = _fake_probs(small_dataset)
    depths = np.arange(1, 5)
    labels = np.asarray(small_dataset.labels).copy()
    test = np.asarray(small_dataset.test_index)
    permuted = labels.copy()
    permuted[test] = np.random.default_rng(1).permutation(labels[test])
    assert (permuted[test] != labels[test]).any()
    other = dataclasses.replace(small_dataset, labels=permuted)
    a = headroom.analyse(small_dataset, probs, depths, max_hops=4)
    b = headroom.analyse(other, probs, depths, max_hops=4)
    for key in (
        "best_fixed_depth_by_val",
        "rule_most_confident_depth",
        "rule_smoothness_depth",
        "probe_on_validation_nodes",
    ):
        assert a[key]["val_accuracy"] == b[key]["val_accuracy"], key
    assert a["best_fixed_depth_by_val"]["depth"] == b["best_fixed_depth_by_val"]["depth"]
    assert (
        a["rule_smoothness_depth"]["eps_chosen_on_val"]
        == b["rule_smoothness_depth"]["eps_chosen_on_val"]
    )
    assert (
        a["probe_on_validation_nodes"]["depth_counts_test_all_seeds"]
        == b["probe_on_validation_nodes"]["depth_counts_test_all_seeds"]
    )
    # The test scores themselves do read the labels (the check can see a difference).
    assert a["upper_bound_any_depth_right"] != b["upper_bound_any_depth_right"]


def test_probe_depths_ignore_test_correctness(small_dataset):
    rng = np.random.default_rng(0)
    n = small_dataset.num_nodes
    signals = rng.normal(size=(n, 5))
    correct = rng.random((3, n)) < 0.5
    val, test = np.asarray(small_dataset.val_index), np.asarray(small_dataset.test_index)
    changed = correct.copy()
    changed[:, test] = ~changed[:, test]
    np.testing.assert_array_equal(
        headroom.probe_depths(signals, correct, val, test),
        headroom.probe_depths(signals, changed, val, test),
    )


def test_probe_finds_a_depth_signal_when_there_is_one(small_dataset):
    """A signal that says which depth is right is learnt from validation nodes alone."""
    rng = np.random.default_rng(0)
    n = small_dataset.num_nodes
    right_depth = rng.integers(0, 3, n)
    signals = np.eye(3)[right_depth] + 0.1 * rng.normal(size=(n, 3))
    correct = right_depth[None, :] == np.arange(3)[:, None]
    val, test = np.asarray(small_dataset.val_index), np.asarray(small_dataset.test_index)
    chosen = headroom.probe_depths(signals, correct, val, test)
    assert (chosen == right_depth[test]).mean() > 0.95


def test_cross_seed_bound_removes_seed_noise():
    """Nodes right at random (no depth preferred) give the in-sample bound a gain from noise;
    the cross-seed bound stays at chance. A node that is always right at depth 0 counts fully."""
    rng = np.random.default_rng(0)
    correct = rng.random((5, 10, 2000)) < 0.5
    correct[:, :, :1000] = False
    correct[0, :, :1000] = True  # a systematic preference for depth 0
    test = np.arange(2000)
    in_sample = headroom.upper_bound_most_often_right(correct, test).mean()
    cross = headroom.upper_bound_cross_seed(correct, test).mean()
    assert in_sample > 0.5 + 0.5 * 0.6  # noise fitted on the random half
    np.testing.assert_allclose(cross, 0.5 + 0.5 * 0.5, atol=0.01)
