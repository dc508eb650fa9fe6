"""What the trainers measure and keep, inside jit: the score of predictions (accuracy, or ROC AUC
for two-class graphs; `score` picks the graph's, and validation rewards, model selection and the
final test all use it), whether a pytree stayed finite, and the better of two pytrees.

Accuracy says little on a two-class graph whose classes are unbalanced (minesweeper: 20 % mines),
where always guessing the larger class scores 0.8; the heterophilous benchmarks report ROC AUC
there instead. The area is the chance that a positive node scores above a negative one, a tie
counting one half (the Mann-Whitney statistic), so it needs no threshold.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def roc_auc(scores: jax.Array, positive: jax.Array, counted: jax.Array) -> jax.Array:
    """ROC AUC of `scores` over the `counted` nodes (fixed shapes, so it runs under jit/vmap).

    Args:
      scores: [M] float, higher meaning more likely positive (e.g. the positive class's logit).
      positive: [M] bool, the true class.
      counted: [M] bool, which entries take part (the rest are padding or other splits).

    Returns:
      A float32 scalar in [0, 1]; 0.5 when the counted nodes hold no positive or no negative
      (no pair to rank); NaN when a counted score is NaN (a diverged model ranks nothing).

    Raises:
      TypeError: `positive` or `counted` not bool (class ids would silently count no
        positive), or the three shapes differ.
    """
    if positive.dtype != jnp.bool_ or counted.dtype != jnp.bool_:
        raise TypeError(
            f"positive and counted must be bool arrays, got {positive.dtype} and {counted.dtype}: "
            f"pass labels == positive_class."
        )
    if not scores.shape == positive.shape == counted.shape:
        raise TypeError(
            f"scores, positive and counted must have one shape, got {scores.shape}, "
            f"{positive.shape} and {counted.shape}."
        )
    pos = counted & positive
    neg = counted & ~positive
    num_neg = neg.sum()
    # Negatives' scores sorted, the other entries pushed past them to +inf and never counted.
    sorted_neg = jnp.sort(jnp.where(neg, scores, jnp.inf))
    below = jnp.minimum(jnp.searchsorted(sorted_neg, scores, side="left"), num_neg)
    at_or_below = jnp.minimum(jnp.searchsorted(sorted_neg, scores, side="right"), num_neg)
    # Per positive: the share of negatives it beats, a tie counting one half.
    share = (below + at_or_below).astype(jnp.float32) / (2 * jnp.maximum(num_neg, 1))
    num_pos = pos.sum()
    auc = jnp.sum(jnp.where(pos, share, 0.0)) / jnp.maximum(num_pos, 1)
    auc = jnp.where((num_pos > 0) & (num_neg > 0), auc, 0.5)
    return jnp.where(jnp.any(counted & jnp.isnan(scores)), jnp.nan, auc).astype(jnp.float32)


METRICS = ("accuracy", "roc_auc")


def mean_where(values: jax.Array, mask: jax.Array) -> jax.Array:
    """The mean of `values` where `mask` holds; 0 where it never does."""
    return jnp.sum(jnp.where(mask, values, 0.0)) / jnp.maximum(mask.sum(), 1)


def accuracy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Fraction of rows whose argmax equals the label."""
    return jnp.mean(jnp.argmax(logits, -1) == labels)


def score(logits: jax.Array, labels: jax.Array, metric: str) -> jax.Array:
    """`metric` of `logits` [M, C] against `labels` [M]. ROC AUC (C = 2) ranks the nodes by
    their log-odds of class 1, the positive class."""
    if metric == "accuracy":
        return accuracy(logits, labels)
    if metric == "roc_auc":
        if logits.shape[-1] != 2:
            raise ValueError(f"roc_auc needs two classes, got logits for {logits.shape[-1]}.")
        counted = jnp.ones(labels.shape, bool)
        return roc_auc(logits[:, 1] - logits[:, 0], labels == 1, counted)
    raise ValueError(f"metric must be one of {METRICS}, got {metric!r}.")


def tree_select(cond: jax.Array, new, old):
    """`new` where `cond`, else `old`, leaf by leaf (cond is a scalar or broadcasts).

    Under vmap a `lax.cond` runs both branches anyway; a select keeps one code path.
    """
    return jax.tree.map(lambda a, b: jnp.where(cond, a, b), new, old)


def all_finite(tree) -> jax.Array:
    """[] bool: no NaN or inf in any floating-point leaf of `tree`."""
    leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.inexact)]
    if not leaves:
        return jnp.ones((), bool)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def shapes(tree) -> tuple:
    """(structure, [(shape, dtype) per leaf]): equal for two trees of one kind."""
    leaves, structure = jax.tree.flatten(tree)
    return structure, [(tuple(x.shape), x.dtype) for x in leaves]
