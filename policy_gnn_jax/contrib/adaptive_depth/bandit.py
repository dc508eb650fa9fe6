"""A contextual bandit over depths, as pure functions: one linear model per depth predicts the
reward a node would get at that depth from its signals; the greedy choice is the argmax.

No bootstrapping: a node's depth does not change which node comes next, so there is no future
to value (docs/adaptive-depth.md). With a decoupled backbone every depth of a node is scored by one
forward pass, so each observed node reports the reward of EVERY depth (full feedback), and the
update is a regression of those rewards on the signals.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import optax


class BanditParams(NamedTuple):
    w: jax.Array  # [P, D]
    b: jax.Array  # [D]


def init(num_signals: int, num_depths: int) -> BanditParams:
    """All-zero weights: every depth scores the same until the first update."""
    return BanditParams(jnp.zeros((num_signals, num_depths)), jnp.zeros(num_depths))


def scores(params: BanditParams, signals: jax.Array) -> jax.Array:
    """[M, D] predicted reward (a logit for "correct") of each depth for signals [M, P]."""
    return signals @ params.w + params.b


def greedy(params: BanditParams, signals: jax.Array) -> jax.Array:
    """[M] the depth index with the highest predicted reward."""
    return jnp.argmax(scores(params, signals), -1)


def rewards(probs: jax.Array, labels: jax.Array, kind: str) -> jax.Array:
    """[M, D] each node's reward at each depth from probs [D, M, C] and labels [M]:
    "loglik" = log p(label), "correct" = 1 if the top class is the label."""
    chex.assert_rank(probs, 3)
    if kind == "loglik":
        picked = jnp.take_along_axis(probs, labels[None, :, None], axis=-1)[..., 0]
        return jnp.log(jnp.clip(picked, 1e-6, 1.0)).T
    return (probs.argmax(-1) == labels[None, :]).astype(jnp.float32).T


def loss(params: BanditParams, signals, targets, kind: str, l2: float) -> jax.Array:
    """Regression of the rewards: squared error for "loglik", logistic for "correct"."""
    predicted = scores(params, signals)
    if kind == "loglik":
        fit = jnp.mean((predicted - targets) ** 2)
    else:
        fit = jnp.mean(optax.sigmoid_binary_cross_entropy(predicted, targets))
    return fit + l2 * jnp.sum(params.w**2)


def update(params, opt_state, optimizer, signals, targets, kind: str, l2: float):
    """One optimiser step on `loss`. Returns (params, opt_state, loss)."""
    value, grads = jax.value_and_grad(loss)(params, signals, targets, kind, l2)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, value
