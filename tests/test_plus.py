"""Policy-GNN+: the bandit, the per-node reward's honesty, and the method end to end."""

import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import policy_gnn_jax as pg
from policy_gnn_jax import graph
from policy_gnn_jax.contrib.adaptive_depth import bandit, plus
from policy_gnn_jax.contrib.adaptive_depth.plus_config import PlusConfig


def test_rewards_by_hand():
    probs = jnp.array([[[0.7, 0.3], [0.2, 0.8]], [[0.4, 0.6], [0.9, 0.1]]])  # [D=2, M=2, C=2]
    labels = jnp.array([0, 1])
    np.testing.assert_allclose(
        bandit.rewards(probs, labels, "loglik"), np.log([[0.7, 0.4], [0.8, 0.1]]), rtol=1e-6
    )
    np.testing.assert_array_equal(bandit.rewards(probs, labels, "correct"), [[1, 0], [1, 0]])


@pytest.mark.parametrize("kind", ["loglik", "correct"])
def test_bandit_learns_which_depth_pays(kind):
    """Signals that say which depth is right are learnt from full-feedback rewards."""
    rng = np.random.default_rng(0)
    right = rng.integers(0, 3, 400)
    signals = jnp.asarray(np.eye(3)[right] + 0.1 * rng.normal(size=(400, 3)), jnp.float32)
    probs = np.full((3, 400, 2), 0.1, np.float32)
    probs[right, np.arange(400), 0] = 0.9
    probs[..., 1] = 1 - probs[..., 0]
    targets = bandit.rewards(jnp.asarray(probs), jnp.zeros(400, jnp.int32), kind)
    params, tx = bandit.init(3, 3), optax.adam(0.05)
    state = tx.init(params)
    for _ in range(200):
        params, state, _ = bandit.update(params, state, tx, signals, targets, kind, 1e-4)
    assert np.mean(np.asarray(bandit.greedy(params, signals)) == right) > 0.95


def _tiny_plus_config(**overrides):
    return PlusConfig.tiny(
        backbone="decoupled", min_depth=0, max_depth=4, hidden=8, epochs=12, **overrides
    )


def _run(cfg, ds, g):
    ctx, data = plus.make_context(cfg, ds, g), plus.plus_data(cfg, ds, g)
    state = plus.init(ctx, data, jax.random.key(3))
    chunk = jax.jit(functools.partial(plus.train_chunk, ctx), static_argnums=2)
    state, metrics = chunk(data, state, cfg.epochs)
    return state, metrics


# "random" is "policy" during its warm-up, so these two cover every training path.
@pytest.mark.parametrize("mode", ["policy", "all"])
def test_selection_and_test_labels_change_nothing_before_the_final_evaluation(small_dataset, mode):
    """The per-node reward reads only the policy half: permuting the labels of the selection
    half and of the test nodes leaves the trained backbone, the bandit and the policy half's
    accuracy bit-identical (only the snapshot choice may read the selection half)."""
    cfg = _tiny_plus_config(plus_train_depths=mode, plus_warmup_fraction=0.25)
    g = graph.from_dataset(small_dataset)
    ctx, data = plus.make_context(cfg, small_dataset, g), plus.plus_data(cfg, small_dataset, g)
    select = np.asarray(plus.init(ctx, data, jax.random.key(3)).select_nodes)
    hidden = np.concatenate([select, np.asarray(small_dataset.test_index)])
    labels = np.asarray(small_dataset.labels).copy()
    permuted = labels.copy()
    permuted[hidden] = np.random.default_rng(0).permutation(labels[hidden])
    assert (permuted[hidden] != labels[hidden]).any()
    other = dataclasses.replace(small_dataset, labels=permuted)
    a, metrics_a = _run(cfg, small_dataset, g)
    b, metrics_b = _run(cfg, other, graph.from_dataset(other))
    chex.assert_trees_all_equal((a.params, a.policy), (b.params, b.policy))
    np.testing.assert_array_equal(
        metrics_a["policy_half_metric"], metrics_b["policy_half_metric"]
    )
    # The check can fail: the selection accuracy does read the permuted labels.
    assert not np.array_equal(metrics_a["val_metric"], metrics_b["val_metric"])


def test_the_halves_split_validation(small_dataset, small_graph):
    cfg = _tiny_plus_config()
    ctx = plus.make_context(cfg, small_dataset, small_graph)
    state = plus.init(ctx, plus.plus_data(cfg, small_dataset, small_graph), jax.random.key(0))
    halves = np.concatenate([state.policy_nodes, state.select_nodes])
    np.testing.assert_array_equal(np.sort(halves), np.sort(small_dataset.val_index))
    assert len(state.policy_nodes) == len(small_dataset.val_index) // 2


def test_policy_gnn_plus_end_to_end_and_predictions(small_dataset, tmp_path):
    cfg = _tiny_plus_config(plus_signals="depth", plus_reward="correct")
    fit = pg.fit(small_dataset, cfg, method="policy-gnn-plus", seeds=2, progress=False)
    record = fit.record
    assert record["method"] == "policy-gnn-plus" and len(record["depths"]) == 5
    test = small_dataset.test_index
    labels = small_dataset.labels[test]
    acc = (fit.predict(test) == labels).mean(1)
    np.testing.assert_allclose(acc, record["test_metric"]["per_seed"], atol=1e-6)
    np.testing.assert_array_equal(fit.predict_depths(test), record["test_depths"])
    fit.save(tmp_path)
    np.testing.assert_array_equal(pg.load(tmp_path).predict(test), fit.predict(test))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"plus_train_depths": "some"}, "plus_train_depths must be one of"),
        ({"plus_signals": "none"}, "plus_signals must be one of"),
        ({"plus_reward": "acc"}, "plus_reward must be one of"),
        ({"plus_policy_fraction": 1.0}, "plus_policy_fraction must be in"),
    ],
)
def test_plus_config_refuses_bad_values(overrides, message):
    with pytest.raises(pg.ConfigError, match=message):
        PlusConfig(**overrides)


def test_the_plus_switches_are_policy_gnn_plus_s_own():
    """`Config` holds no Policy-GNN+ switch; a plain Config runs Policy-GNN+ at its defaults,
    and a PlusConfig is still a Config (every other method takes it)."""
    with pytest.raises(pg.ConfigError, match="no field 'plus_signals'"):
        pg.Config(plus_signals="graph")
    plain = pg.Config.tiny(hidden=8)
    assert PlusConfig.of(plain) == PlusConfig.tiny(hidden=8)
    assert PlusConfig.of(plain).plus_signals == "depth"
    assert isinstance(PlusConfig.tiny(plus_signals="graph"), pg.Config)


def test_a_diverging_backbone_is_blamed_not_the_bandit(small_dataset):
    """A diverging backbone is blamed, not the bandit: a huge GCN step leaves the parameters finite
    but the outputs NaN, and the error names the GCN learning rate, not the bandit's."""
    cfg = _tiny_plus_config(gcn_lr=1e30)
    with pytest.raises(pg.DivergenceError, match="Lower the GCN learning rate"):
        pg.fit(small_dataset, cfg, method="policy-gnn-plus", seeds=1, progress=False)


def test_an_empty_validation_half_is_refused(small_dataset):
    cfg = _tiny_plus_config(plus_policy_fraction=0.001)
    with pytest.raises(pg.ConfigError, match="leaves one empty"):
        pg.fit(small_dataset, cfg, method="policy-gnn-plus", seeds=1, progress=False)


@pytest.mark.parametrize("method", ["gcn", "policy-gnn"])
def test_a_plus_config_given_to_another_method_runs_as_its_config_and_loads(
    small_dataset, tmp_path, method
):
    """One config serves several methods: another method runs a PlusConfig's shared fields as a
    plain Config, so its record holds no switch it never read and its saved fit loads."""
    cfg = PlusConfig.tiny(plus_signals="all", epochs=3, num_episodes=1)
    fit = pg.fit(small_dataset, cfg, method=method, seeds=1, progress=False)
    assert type(fit.config) is pg.Config
    assert not any(name.startswith("plus_") for name in fit.record["config"])
    fit.save(tmp_path / "fit")
    assert pg.load(tmp_path / "fit").config == fit.config
