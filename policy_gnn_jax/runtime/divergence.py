"""Training that diverged: the NaN/inf found in a chunk's metrics, said as the unit where it
happened and the fix."""

from __future__ import annotations

import numpy as np

# Which network a metric watches, for the divergence message.
_SOURCE = {"agent_finite": "agent", "td_loss": "agent", "bandit_loss": "agent"}
_FLAG_METRICS = ("backbone_finite", "agent_finite")


class DivergenceError(FloatingPointError):
    """Training produced NaN/inf. The message names the episode and the learning rate to lower."""


def find_divergence(metrics: dict, offset: int, unit: str, hints: dict) -> str | None:
    """The first NaN/inf (or non-finite parameters) in a chunk's metrics [S, T, ...], as a
    message naming the unit (1-based, counted over the whole run) and the fix; else None."""
    first = None  # (t, priority, seed, name)
    for name, value in metrics.items():
        if name in _FLAG_METRICS:
            bad = ~value.astype(bool)
        elif np.issubdtype(value.dtype, np.floating):
            bad = ~np.isfinite(value)
            bad = bad.reshape(bad.shape[:2] + (-1,)).any(-1)
        else:
            continue
        if bad.any():
            where = np.argwhere(bad)  # [k, (seed, t)]
            seed, t = where[np.argmin(where[:, 1])]
            # At one step, the backbone is blamed first: a NaN backbone makes NaN agent inputs.
            rank = _FLAG_METRICS.index(name) if name in _FLAG_METRICS else len(_FLAG_METRICS)
            candidate = (int(t), rank, int(seed), name)
            first = min(first, candidate) if first else candidate
    if first is None:
        return None
    t, _, seed, name = first
    what = (
        f"the {name.removesuffix('_finite')}'s parameters or outputs became NaN/inf"
        if name in _FLAG_METRICS
        else f"the training metric {name!r} became NaN/inf"
    )
    source = "agent" if name in hints.get("agent_metrics", ()) else _SOURCE.get(name, "backbone")
    fix = hints.get(source, "lower the learning rates")
    return f"training diverged in {unit} {offset + t + 1} (seed index {seed}): {what}. {fix}."
