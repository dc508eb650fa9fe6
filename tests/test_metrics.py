"""ROC AUC against a NumPy count over every (positive, negative) pair, ties included."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from policy_gnn_jax import metrics


def pairwise_auc(scores, positive, counted) -> float:
    """The definition: over all pairs of a counted positive and a counted negative, 1 when the
    positive scores higher, 1/2 on a tie."""
    pos = scores[counted & positive]
    neg = scores[counted & ~positive]
    if len(pos) == 0 or len(neg) == 0:
        return 0.5
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return wins / (len(pos) * len(neg))


@pytest.mark.parametrize("seed", range(6))
def test_roc_auc_equals_the_pairwise_count_with_ties_and_masks(seed):
    rng = np.random.default_rng(seed)
    m = 300
    scores = rng.integers(0, 12, size=m).astype(np.float32)  # few values: many ties
    if seed % 2:
        scores = rng.normal(size=m).astype(np.float32)
    positive = rng.random(m) < 0.2
    counted = rng.random(m) < 0.7
    got = float(metrics.roc_auc(jnp.asarray(scores), jnp.asarray(positive), jnp.asarray(counted)))
    assert got == pytest.approx(pairwise_auc(scores, positive, counted), abs=1e-6)


def test_roc_auc_at_its_ends_and_without_pairs():
    scores = jnp.arange(6.0)
    all_counted = jnp.ones(6, bool)
    top = jnp.array([False, False, False, True, True, True])
    assert float(metrics.roc_auc(scores, top, all_counted)) == 1.0
    assert float(metrics.roc_auc(-scores, top, all_counted)) == 0.0
    assert float(metrics.roc_auc(jnp.zeros(6), top, all_counted)) == 0.5  # all tied
    assert float(metrics.roc_auc(scores, jnp.zeros(6, bool), all_counted)) == 0.5  # no positive
    # Uncounted entries change nothing, however they score.
    counted = jnp.array([True, True, False, True, True, False])
    wild = jnp.array([0.0, 1.0, 99.0, 3.0, 4.0, -99.0])
    assert float(metrics.roc_auc(wild, top, counted)) == float(
        metrics.roc_auc(scores, top, counted)
    )


def test_roc_auc_runs_under_jit_and_vmap():
    rng = np.random.default_rng(0)
    scores = jnp.asarray(rng.normal(size=(3, 50)), jnp.float32)
    positive = jnp.asarray(rng.random((3, 50)) < 0.3)
    counted = jnp.ones((3, 50), bool)
    batched = jax.jit(jax.vmap(metrics.roc_auc))(scores, positive, counted)
    for i in range(3):
        expected = pairwise_auc(np.asarray(scores[i]), np.asarray(positive[i]), np.ones(50, bool))
        assert float(batched[i]) == pytest.approx(expected, abs=1e-6)


def test_roc_auc_of_nan_scores_is_nan_and_wrong_inputs_are_refused():
    """A NaN score on a positive gives NaN, not a perfect 1.0; class ids as `positive` (which find
    no positive and would say 0.5) and shapes that would broadcast are refused."""
    positive = jnp.array([False, False, True, True])
    counted = jnp.ones(4, bool)
    assert np.isnan(float(metrics.roc_auc(jnp.array([0.1, 0.4, jnp.nan, 0.8]), positive, counted)))
    assert np.isnan(float(metrics.roc_auc(jnp.full(4, jnp.nan), positive, counted)))
    uncounted_nan = jnp.array([True, True, True, False])
    assert float(metrics.roc_auc(jnp.array([0.1, 0.4, 0.8, jnp.nan]), positive, uncounted_nan)) == 1
    with pytest.raises(TypeError, match="must be bool"):
        metrics.roc_auc(jnp.arange(4.0), jnp.array([0, 0, 2, 2]), counted)
    with pytest.raises(TypeError, match="one shape"):
        metrics.roc_auc(jnp.arange(4.0), positive, jnp.ones(1, bool))
