"""The trainer interface the runner drives: Policy-GNN's loop and the fixed-depth baseline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax


class Trainer(NamedTuple):
    """What the runner drives (the fixed-depth baseline has the same shape).

    Attributes:
      init: key -> state.
      train_chunk: (state, length) -> (state, metrics [length, ...]); `length` is static.
      evaluate: state -> dict of results (reads test labels: call once, at the end).
      selected: state -> (backbone params, policy) of the selected snapshot.
      total: episodes (or epochs) to run; per_call: how many one compiled call runs.
      unit: "episode" or "epoch", for progress and error messages.
    """

    init: Callable[[jax.Array], Any]
    train_chunk: Callable[[Any, int], tuple[Any, dict]]
    evaluate: Callable[[Any], dict]
    selected: Callable[[Any], tuple[Any, Any]]
    total: int
    per_call: int
    unit: str
