"""End to end: Policy-GNN and the fixed-depth baseline on a small generated graph.

Small configs and shared compiled functions keep this file to a few compiles.
"""

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from policy_gnn_jax import config, fixed_depth, graph
from policy_gnn_jax.mdp import audit, policy_gnn
from policy_gnn_jax.runtime import runner, seed_axis


@pytest.fixture(scope="module")
def policy_setup(small_dataset, small_graph):
    cfg = config.Config.tiny()
    hops = graph.train_hop_distances(small_dataset, cfg.max_depth)
    trainer = policy_gnn.make_trainer(cfg, small_graph, hops)
    return cfg, hops, trainer


def _run(trainer, keys):
    _, metrics, results = runner.run_trainer(
        trainer,
        keys,
        progress=False,
    )
    return metrics, results


def test_same_seed_is_bit_identical_and_seeds_differ(policy_setup):
    _, _, trainer = policy_setup
    m1, r1 = _run(trainer, seed_axis.seed_keys(7, 3))
    m2, r2 = _run(trainer, seed_axis.seed_keys(7, 3))
    chex.assert_trees_all_equal(m1, m2)
    chex.assert_trees_all_equal(r1, r2)
    curves = m1["val_metric"]
    assert not np.array_equal(curves[0], curves[1]) and not np.array_equal(curves[1], curves[2])
    chex.assert_tree_all_finite(m1)


def test_scan_body_compiles_once(policy_setup):
    _, _, trainer = policy_setup

    def one_chunk(data, state):
        return trainer.train_chunk(data, state, trainer.per_call)

    chunk = jax.jit(chex.assert_max_traces(one_chunk, n=1))
    state = trainer.init(trainer.data, jax.random.key(0))
    state, _ = chunk(trainer.data, state)
    # A retrace here (e.g. a weak-typed leaf) fails the assertion.
    state, _ = chunk(trainer.data, state)
    chex.clear_trace_counter()


def test_test_labels_are_read_only_at_the_end(small_dataset, policy_setup):
    cfg, hops, trainer = policy_setup
    g = graph.from_dataset(small_dataset)
    rng = np.random.default_rng(0)
    labels = np.asarray(g.labels).copy()
    labels[small_dataset.test_index] = rng.permutation(labels[small_dataset.test_index])
    labels[small_dataset.test_index] = (labels[small_dataset.test_index] + 1) % 3
    g_perm = g.replace(labels=jnp.asarray(labels))
    keys = seed_axis.seed_keys(3, 2)
    m_a, r_a = _run(trainer, keys)
    m_b, r_b = _run(policy_gnn.make_trainer(cfg, g_perm, hops), keys)
    chex.assert_trees_all_equal(m_a, m_b)  # training never saw the test labels
    chex.assert_trees_all_equal(r_a["val_metric"], r_b["val_metric"])
    assert not np.array_equal(r_a["test_metric"], r_b["test_metric"])


def test_policy_gnn_learns_and_reports(policy_setup, small_dataset):
    cfg, hops, _ = policy_setup
    cfg = dataclasses.replace(cfg, num_episodes=20, episodes_per_call=10)
    trainer = policy_gnn.make_trainer(cfg, graph.from_dataset(small_dataset), hops)
    metrics, results = _run(trainer, seed_axis.seed_keys(0, 2))
    chex.assert_shape(metrics["val_metric"], (2, 20))
    assert metrics["gcn_trained"].mean() > 0  # buffers fill and the GCN trains
    assert np.all(results["test_depth_counts"].sum(1) == len(small_dataset.test_index))
    assert np.all(results["val_metric"] >= metrics["val_metric"].max(1) - 1e-6)
    assert results["test_metric"].mean() > 0.55  # 3 classes: chance is about 0.33


def test_walk_transition_and_random_policy_run(policy_setup, small_dataset):
    cfg, hops, _ = policy_setup
    cfg = dataclasses.replace(cfg, transition="walk", random_policy=True, num_episodes=2)
    trainer = policy_gnn.make_trainer(cfg, graph.from_dataset(small_dataset), hops)
    metrics, results = _run(trainer, seed_axis.seed_keys(0, 1))
    np.testing.assert_allclose(metrics["epsilon"], 1.0)
    assert results["test_depth_counts"].min() > 0  # random depths use every action


def test_episodes_before_the_first_dqn_update_are_not_an_error(small_dataset, policy_setup):
    """15 walkers x 5 steps = 75 transitions < batch 100: episode 1 has no DQN update."""
    cfg, hops, _ = policy_setup
    cfg = dataclasses.replace(cfg, batch_size=100, num_episodes=2)
    trainer = policy_gnn.make_trainer(cfg, graph.from_dataset(small_dataset), hops)
    metrics, _ = _run(trainer, seed_axis.seed_keys(0, 1))
    np.testing.assert_array_equal(metrics["dqn_updates"][0, 0], 0)
    assert metrics["dqn_updates"][0, 1] > 0
    assert metrics["td_loss"][0, 0] == 0.0 and metrics["td_loss"][0, 1] > 0


def test_baseline_learns_deterministically(small_graph):
    cfg = config.Config.tiny(depth=2, epochs=40)
    b = fixed_depth.make_baseline(cfg, small_graph, epochs_per_chunk=20)
    keys = seed_axis.seed_keys(0, 3)
    _, m1, r1 = runner.run_trainer(b, keys, progress=False)
    _, m2, r2 = runner.run_trainer(b, keys, progress=False)
    chex.assert_trees_all_equal(r1, r2)
    assert not np.array_equal(m1["loss"][0], m1["loss"][1])
    assert m1["loss"][:, -1].mean() < m1["loss"][:, 0].mean()
    assert np.all(r1["test_metric"] > 0.6)

    def one_chunk(data, state):
        return b.train_chunk(data, state, 20)

    chunk = jax.jit(chex.assert_max_traces(one_chunk, n=1))
    state, _ = chunk(b.data, b.init(b.data, keys[0]))
    chunk(b.data, state)
    chex.clear_trace_counter()


def test_nan_metrics_are_reported_clearly():
    message = runner.find_divergence({"loss": np.array([[0.1, np.nan]])}, 10, "epoch", {})
    assert "epoch 12" in message and "'loss'" in message  # 1-based, counted over the whole run


def test_macro_accuracy_hand_worked():
    # depth 2: 3 nodes, 1 correct; depth 3: 1 node, correct; depth 4: empty.
    correct = jnp.array([True, False, False, True])
    depths = jnp.array([2, 2, 2, 3])
    got = audit.macro_accuracy_over_depths(correct, depths, 2, 4)
    np.testing.assert_allclose(got, (1 / 3 + 1.0) / 2)  # micro accuracy would be 0.5


def test_audit_leaves_the_honest_run_unchanged(policy_setup, small_dataset):
    cfg, hops, trainer = policy_setup
    keys = seed_axis.seed_keys(5, 2)
    m_plain, r_plain = _run(trainer, keys)
    audited = policy_gnn.make_trainer(
        dataclasses.replace(cfg, audit=True), graph.from_dataset(small_dataset), hops
    )
    m_audit, r_audit = _run(audited, keys)
    chex.assert_trees_all_equal(m_plain, {k: m_audit[k] for k in m_plain})
    chex.assert_trees_all_equal(r_plain, {k: r_audit[k] for k in r_plain})
    best_of_run = m_audit["audit_macro_test_accuracy_max"].max(1)
    assert np.all((best_of_run >= 0) & (best_of_run <= 1))
    assert np.all(best_of_run >= r_audit["audit_macro_test_accuracy"] - 1e-6)
    # The depth groups at each episode's maximising step partition the test nodes.
    sizes = m_audit["audit_group_sizes_at_max"]  # [S, episodes, depths]
    assert sizes.shape[-1] == cfg.num_actions
    np.testing.assert_array_equal(sizes.sum(-1), len(small_dataset.test_index))
