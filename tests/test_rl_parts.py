"""Replay memory, action buffers, state normaliser and DQN pieces, against hand-worked values."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import parameterized

from policy_gnn_jax import config
from policy_gnn_jax.agents import dqn, qnet
from policy_gnn_jax.agents.base import Transition
from policy_gnn_jax.mdp import env


def _batch(start, width):
    ids = jnp.arange(start, start + width, dtype=jnp.int32)
    return Transition(ids, ids % 3, ids.astype(jnp.float32), ids + 1000)


class ReplayTest(chex.TestCase, parameterized.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_ring_overwrites_oldest(self):
        add = self.variant(dqn.replay_add)
        state = dqn.replay_init(5)
        state = add(state, _batch(0, 3))
        state = add(state, _batch(3, 3))  # 6 written into 5 slots: id 0 overwritten by 5
        chex.assert_trees_all_equal(state.data.node_tm1, jnp.array([5, 1, 2, 3, 4]))
        assert int(state.size) == 5 and int(state.position) == 1
        chex.assert_trees_all_equal_shapes(state, dqn.replay_init(5))

    def test_size_counts_the_transitions_held(self):
        state = dqn.replay_add(dqn.replay_init(10), _batch(0, 3))
        assert int(state.size) == 3
        assert int(dqn.replay_add(state, _batch(3, 9)).size) == 10  # capped at the capacity

    def test_sampling_is_uniform_over_filled_slots(self, key=jax.random.key(0)):
        state = dqn.replay_add(dqn.replay_init(100), _batch(0, 4))
        sample = dqn.replay_sample(key, state, 40_000)
        counts = np.bincount(np.asarray(sample.node_tm1), minlength=100)
        assert counts[4:].sum() == 0
        np.testing.assert_allclose(counts[:4] / 40_000, 0.25, atol=0.01)
        # fields of a sampled transition stay aligned
        np.testing.assert_array_equal(sample.node_t, sample.node_tm1 + 1000)


class ActionBufferTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_fill_flush_and_nothing_lost(self):
        add = self.variant(env.add_to_buffers)
        state = env.init_buffers(num_actions=2, capacity=3 + 4 - 1)  # buffer 3, W = 4
        nodes = jnp.array([10, 11, 12, 13])
        state = add(state, nodes, jnp.array([0, 1, 0, 0]), jnp.array([True, True, True, False]))
        np.testing.assert_array_equal(state.count, [2, 1])
        np.testing.assert_array_equal(state.nodes[0, :2], [10, 12])
        full = env.full_buffers(state, 3)
        np.testing.assert_array_equal(full, [False, False])
        state = add(state, nodes + 10, jnp.array([0, 0, 0, 1]), jnp.ones(4, bool))
        np.testing.assert_array_equal(state.count, [5, 2])  # 5 > 3: all kept, none dropped
        np.testing.assert_array_equal(state.nodes[0, :5], [10, 12, 20, 21, 22])
        full = env.full_buffers(state, 3)
        np.testing.assert_array_equal(full, [True, False])
        state = env.flush_buffers(state, full)
        np.testing.assert_array_equal(state.count, [0, 2])
        np.testing.assert_array_equal(state.nodes[1, :2], [11, 23])


def test_normaliser_equals_numpy_over_last_window(key):
    features = jax.random.normal(key, (50, 6)) * 3 + 1
    state = qnet.init_normaliser(window=20, num_nodes=features.shape[0])
    seen = []
    for step in range(4):
        nodes = jax.random.randint(jax.random.fold_in(key, step), (7,), 0, 50)
        state = qnet.update_normaliser(state, nodes)
        seen.extend(np.asarray(nodes).tolist())
    rows = np.asarray(features)[seen[-20:]]
    mean, std = qnet.statistics(state, features)
    np.testing.assert_allclose(mean, rows.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(std, rows.std(0), rtol=1e-4)


def test_normaliser_partial_window_and_constant_feature():
    features = jnp.array([[1.0, 5.0], [3.0, 5.0], [100.0, 5.0]])
    state = qnet.update_normaliser(qnet.init_normaliser(10, features.shape[0]), jnp.array([0, 1]))
    mean, std = qnet.statistics(state, features)
    np.testing.assert_allclose(mean, [2.0, 5.0])
    np.testing.assert_allclose(std, [1.0, 1.0])  # column 2 has zero spread: left unscaled


class DQNTest(chex.TestCase):
    def setUp(self):
        super().setUp()
        # Hand-worked Double-DQN example (rlax style): online picks action 1 for row 0, 0 for row 1.
        self.r_t = jnp.array([1.0, -2.0])
        self.discount_t = jnp.array([0.5, 0.9])
        self.q_t_online = jnp.array([[1.0, 3.0], [4.0, 2.0]])
        self.q_t_target = jnp.array([[10.0, 20.0], [30.0, 40.0]])
        self.expected_targets = np.array([1.0 + 0.5 * 20.0, -2.0 + 0.9 * 30.0])  # 11, 25
        self.q_tm1 = jnp.array([[0.0, 10.0], [20.0, 0.0]])
        self.a_tm1 = jnp.array([1, 0])
        self.expected_loss = ((11.0 - 10.0) ** 2 + (25.0 - 20.0) ** 2) / 2  # 13

    @chex.variants(with_jit=True, without_jit=True)
    def test_double_q_targets(self):
        got = self.variant(dqn.double_q_targets)(
            self.r_t, self.discount_t, self.q_t_online, self.q_t_target
        )
        np.testing.assert_allclose(got, self.expected_targets)

    @chex.variants(with_jit=True, without_jit=True)
    def test_td_loss(self):
        got = self.variant(dqn.td_loss)(self.q_tm1, self.a_tm1, jnp.asarray(self.expected_targets))
        np.testing.assert_allclose(got, self.expected_loss)


def test_epsilon_schedule_values():
    cfg = config.Config(num_episodes=100, steps_per_episode=10)  # 1000 steps, horizon 500
    eps = dqn.epsilon_schedule(cfg)
    values = {s: float(eps(jnp.asarray(s))) for s in (0, 9, 10, 250, 499, 500, 990)}
    assert values[0] == pytest.approx(1.0) and values[9] == pytest.approx(1.0)  # stepped every 10
    assert values[10] == pytest.approx(1.0 - 0.9 / 50)
    assert values[250] == pytest.approx(0.55)
    assert values[500] == pytest.approx(0.1) and values[990] == pytest.approx(0.1)
    random_eps = dqn.epsilon_schedule(config.Config(random_policy=True))
    assert float(random_eps(jnp.asarray(700))) == 1.0


def test_epsilon_greedy_is_per_row(key):
    q = jnp.tile(jnp.array([[0.0, 0.0, 5.0]]), (4000, 1))
    greedy = dqn.epsilon_greedy(key, q, jnp.asarray(0.0))
    assert np.all(greedy == 2)
    mixed = np.asarray(dqn.epsilon_greedy(key, q, jnp.asarray(0.3)))
    np.testing.assert_allclose(np.mean(mixed != 2), 0.3 * 2 / 3, atol=0.03)


def test_config_rejects_bad_values():
    with pytest.raises(config.ConfigError, match="min_depth"):
        config.Config(min_depth=3, max_depth=2)
    with pytest.raises(config.ConfigError, match="transition"):
        config.Config(transition="teleport")
    with pytest.raises(config.ConfigError, match="dropout"):
        config.Config(dropout=1.5)
    with pytest.raises(config.ConfigError, match="--depths"):
        config.parse_depths("two-five")


def _sparse_features(key, n=40, f=30, density=0.15):
    k_mask, k_val = jax.random.split(key)
    mask = jax.random.uniform(k_mask, (n, f)) < density
    return np.array(jnp.where(mask, jax.random.uniform(k_val, (n, f)) + 0.1, 0.0))


def _coo(x):
    rows, cols = np.nonzero(x)
    return jnp.asarray(rows), jnp.asarray(cols), jnp.asarray(x[rows, cols])


def test_window_counts_and_sparse_statistics_equal_numpy(key):
    """Wrap-around, repeats in the window, and a step wider than the window."""
    x = _sparse_features(key)
    x[:, 0] = 0.7  # a constant feature: zero spread, left unscaled (std 1)
    state = qnet.init_normaliser(window=16, num_nodes=x.shape[0])
    seen = []
    for step, width in enumerate([5, 7, 9, 20, 3]):
        nodes = jax.random.randint(jax.random.fold_in(key, step), (width,), 0, x.shape[0])
        state = qnet.update_normaliser(state, nodes)
        seen.extend(np.asarray(nodes).tolist())
        window = seen[-16:]
        np.testing.assert_array_equal(state.counts, np.bincount(window, minlength=x.shape[0]))
        mean, std = qnet.statistics_sparse(state, *_coo(x), x.shape[1])
        rows = x[window]
        want_std = np.where(rows.std(0) < 1e-6, 1.0, rows.std(0))
        np.testing.assert_allclose(mean, rows.mean(0), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(std, want_std, rtol=1e-3, atol=1e-6)
        assert std[0] == 1.0


def test_sparse_statistics_of_an_empty_window():
    x = np.eye(4, dtype=np.float32)
    mean, std = qnet.statistics_sparse(qnet.init_normaliser(8, 4), *_coo(x), 4)
    np.testing.assert_array_equal(mean, np.zeros(4))
    np.testing.assert_array_equal(std, np.ones(4))


def test_sparse_q_network_equals_dense_on_normalised_states(key):
    from policy_gnn_jax import graph as graph_lib
    from policy_gnn_jax.agents import qnet

    x = _sparse_features(key, n=25, f=30)
    model = qnet.QNetwork((8, 16), 3)
    params = model.init(jax.random.fold_in(key, 1), jnp.zeros((1, 30)))
    mean = jnp.asarray(x.mean(0))
    std = jnp.asarray(np.where(x.std(0) > 0, x.std(0), 1.0))
    csr = __import__("scipy.sparse").sparse.csr_matrix(x)
    idx, val = graph_lib.padded_rows(csr.indptr, csr.indices, csr.data)
    np.testing.assert_array_equal(
        np.stack([np.bincount(i, weights=v, minlength=30) for i, v in zip(idx, val)]), x
    )
    nodes = jnp.array([3, 0, 24, 7, 7])
    dense = model.apply(params, (jnp.asarray(x)[nodes] - mean) / std)
    sparse = qnet.apply_sparse(params, jnp.asarray(idx)[nodes], jnp.asarray(val)[nodes], mean, std)
    np.testing.assert_allclose(sparse, dense, rtol=1e-5, atol=1e-5)
    grads = [
        jax.grad(lambda p, f=f: jnp.sum(f(p) ** 2))(params)
        for f in (
            lambda p: model.apply(p, (jnp.asarray(x)[nodes] - mean) / std),
            lambda p: qnet.apply_sparse(
                p, jnp.asarray(idx)[nodes], jnp.asarray(val)[nodes], mean, std
            ),  # fmt: skip
        )
    ]
    chex.assert_trees_all_close(grads[0], grads[1], rtol=1e-4, atol=1e-5)
