"""The reference-protocol audit (docs/algorithm.md section 6), an optional observer of the MDP step.

It measures, at every step, the released code's test metric: the macro accuracy over depth groups
(the unweighted mean of each group's test accuracy), and the size of each group. It reads test
labels during training, so it is opt-in (`Config.audit`) and never a headline. It draws from its
own key, and nothing it computes flows back into training, so the honest results are unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from policy_gnn_jax.backbones import gcn as backbone_lib
from policy_gnn_jax.runtime import records


class Observer(NamedTuple):
    """An observer of the step. observe: (key, graph, backbone params, policy) -> per-step
    metrics; summarise: per-step metrics of an episode [T, ...] -> per-episode values;
    evaluate: (graph, the snapshot's backbone params, test depths) -> final results."""

    observe: Callable
    summarise: Callable
    evaluate: Callable


class AuditContext(NamedTuple):
    backbone: object
    agent: object
    min_depth: int
    max_depth: int


def macro_accuracy_over_depths(correct, depths, min_depth: int, max_depth: int) -> jax.Array:
    """Unweighted mean over the non-empty depth groups of each group's accuracy (the released
    code's test metric, docs/algorithm.md section 6). correct: [T] bool; depths: [T]."""
    group = depths[None, :] == jnp.arange(min_depth, max_depth + 1)[:, None]
    size = group.sum(1)
    group_acc = jnp.sum(group & correct[None, :], 1) / jnp.maximum(size, 1)
    return jnp.sum(jnp.where(size > 0, group_acc, 0.0)) / jnp.maximum((size > 0).sum(), 1)


def _macro_accuracy(ctx: AuditContext, g, logits_all, depths) -> jax.Array:
    test_logits = backbone_lib.depth_logits(ctx.backbone, logits_all[:, g.test_index], depths)
    correct = jnp.argmax(test_logits, -1) == g.labels[g.test_index]
    return macro_accuracy_over_depths(correct, depths, ctx.min_depth, ctx.max_depth)


def observe(ctx: AuditContext, key: jax.Array, g, params, policy) -> dict:
    """The macro test accuracy at this step, and the size of each depth group (small groups are
    what make the macro metric noisy)."""
    depths = ctx.agent.depths(key, policy, g, g.test_index)
    logits_all = ctx.backbone.logits(params, g, None)
    return {
        "audit_macro_test_accuracy": _macro_accuracy(ctx, g, logits_all, depths),
        "audit_group_sizes": jnp.bincount(depths - ctx.min_depth, length=ctx.agent.num_actions),
    }


def summarise(metrics: dict) -> dict:
    """Per episode: the mean and maximum macro accuracy, and the group sizes at the maximum."""
    macro = metrics["audit_macro_test_accuracy"]
    best = jnp.argmax(macro)
    return {
        "audit_macro_test_accuracy": jnp.nanmean(macro, axis=0),
        "audit_macro_test_accuracy_max": macro[best],
        "audit_group_sizes_at_max": metrics["audit_group_sizes"][best],
    }


def evaluate(ctx: AuditContext, g, params, depths) -> dict:
    """The macro accuracy of the validation-selected snapshot."""
    logits_all = ctx.backbone.logits(params, g, None)
    return {"audit_macro_test_accuracy": _macro_accuracy(ctx, g, logits_all, depths)}


def make_audit(config, backbone, agent) -> Observer:
    ctx = AuditContext(backbone, agent, config.min_depth, config.max_depth)
    return Observer(
        observe=functools.partial(observe, ctx),
        summarise=summarise,
        evaluate=functools.partial(evaluate, ctx),
    )


AUDIT_EXPLANATION = (
    "The authors' released code reports a different number: the unweighted mean, over depth "
    "groups, of each group's test accuracy (macro accuracy), and its first version kept the best "
    "value over all evaluation points, i.e. it selected on the test set. A small depth group "
    "with a lucky accuracy then counts as much as the group holding most nodes, and the maximum "
    "over thousands of noisy evaluations is biased upwards. Those numbers are shown here for "
    "comparison only; the honest number selects the snapshot on validation and reads the test "
    "labels once."
)


def record_fields(metrics, results) -> dict:
    per_episode = metrics["audit_macro_test_accuracy_max"]  # [S, episodes]
    best_episode = per_episode.argmax(axis=1)
    best_of_run = per_episode.max(axis=1)
    seeds = np.arange(per_episode.shape[0])
    sizes = metrics["audit_group_sizes_at_max"][seeds, best_episode]  # [S, depths]
    return {
        "audit": {
            "macro_accuracy_best_of_run": records.mean_std(best_of_run),
            # How many test nodes each depth group held at the step of the best-of-run maximum.
            "group_sizes_at_best_of_run": sizes.tolist(),
            "smallest_group_at_best_of_run": records.mean_std(
                np.where(sizes > 0, sizes, np.iinfo(sizes.dtype).max).min(axis=1)
            ),
            "macro_accuracy_of_selected_snapshot": records.mean_std(
                results["audit_macro_test_accuracy"]
            ),
            "honest_test_accuracy": records.mean_std(results["test_metric"]),
            "explanation": AUDIT_EXPLANATION,
        }
    }
