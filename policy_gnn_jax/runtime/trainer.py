"""The trainer interface the runner drives: Policy-GNN's loop, the fixed-depth baseline and
Policy-GNN+."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax


class Trainer(NamedTuple):
    """What the runner drives (the fixed-depth baseline has the same shape).

    Attributes:
      init: (data, key) -> state.
      train_chunk: (data, state, length) -> (state, metrics [length, ...]); `length` is static.
      evaluate: (data, state) -> dict of results (reads test labels: call once, at the end).
      selected: state -> (backbone params, policy) of the selected snapshot.
      data: the graph's arrays the functions read (a pytree), passed to every compiled
        program as an argument: the programs hold no copy of the graph, and splits of one
        graph stack their `data` to run as one program.
      total: episodes (or epochs) to run; per_call: how many one compiled call runs.
      unit: "episode" or "epoch", for progress and error messages.
    """

    init: Callable[[Any, jax.Array], Any]
    train_chunk: Callable[[Any, Any, int], tuple[Any, dict]]
    evaluate: Callable[[Any, Any], dict]
    selected: Callable[[Any], tuple[Any, Any]]
    data: Any
    total: int
    per_call: int
    unit: str


def epoch_trainer(
    ctx, data, *, init, train_chunk, evaluate, selected, epochs: int, epochs_per_chunk: int
) -> Trainer:
    """A Trainer over full-batch epochs from top-level functions of a static context `ctx`
    and the graph `data` (the fixed-depth baseline, Policy-GNN+)."""
    return Trainer(
        init=functools.partial(init, ctx),
        train_chunk=functools.partial(train_chunk, ctx),
        evaluate=functools.partial(evaluate, ctx),
        selected=selected,
        data=data,
        total=epochs,
        per_call=min(epochs_per_chunk, epochs),
        unit="epoch",
    )
