"""`Config`'s checks: every field of its type and in its range, the fields consistent with each
other. A value out of range is a `ConfigError` naming the field and the fix."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math

TRANSITIONS = ("labelled", "walk")
# `backbones.make_backbone` builds each; "decoupled" is the only one with a depth 0.
BACKBONES = ("gcn", "gcn-readout", "decoupled")
# The deepest depth each backbone supports: the coupled GCNs stop where they are useless anyway
# (docs/results.md: 9 points lost from depth 2 to 5); the decoupled one costs one C-wide product
# a depth.
MAX_DEPTH = {"gcn": 10, "gcn-readout": 10, "decoupled": 64}
# How an MDP step trains the backbone and measures M_t (subgraph.py): on the whole graph, or on
# padded d-hop subgraphs of the buffers' and validation nodes; "host" is the subgraph engine with
# the whole graph left in host memory (graph/host.py); "auto" picks full or subgraph by size.
ENGINES = ("auto", "full", "subgraph", "host")
# "auto" picks the subgraph engine above this many nodes: below it one whole-graph step costs
# about what a padded subgraph step costs (benchmarks/bench_scale.py).
AUTO_SUBGRAPH_NODES = 100_000
# jax.default_matmul_precision's names for float32 matmuls: "highest" (full float32), "high"
# (TF32 on a GPU), "default" (the backend's fastest: TF32 on a GPU, bfloat16 passes on a TPU).
MATMUL_PRECISIONS = ("highest", "high", "default")


class ConfigError(ValueError):
    """An out-of-range or inconsistent config value. The message names the field and the fix."""


INT32_MAX = 2**31 - 1
FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.1754943508222875e-38  # the smallest normal float32
MAX_SUBGRAPH = 2**30
# What each field annotation asks for, in words (the errors and `--set` say it).
WANTED = {
    "int": "a whole number",
    "float": "a number",
    "str": "a word",
    "bool": "true or false",
    "tuple[int, ...]": "whole numbers separated by commas, e.g. 10,10,5",
}

# The same in Python's words, for a `Config` built in code.
WANTED_IN_PYTHON = {
    **WANTED,
    "bool": "True or False",
    "str": "a string",
    "tuple[int, ...]": "a tuple of whole numbers, e.g. (10, 10, 5)",
}


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def validate(c) -> None:
    _validate_types(c)
    _validate_backbone_and_engine(c)
    _validate_mdp_and_agent(c)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate_types(c) -> None:
    """Each field holds its annotated type (a float where an int sets a shape, or a string where
    a number is meant, would fail deep inside JAX), and every int fits the int32 arrays it
    sizes. An int is accepted where a float is meant."""
    for f in dataclasses.fields(c):
        value = getattr(c, f.name)
        if f.type == "int":
            ok = _is_int(value)
        elif f.type == "float":
            ok = _is_int(value) or isinstance(value, float)
        elif f.type == "bool":
            ok = isinstance(value, bool)
        elif f.type == "str":
            ok = isinstance(value, str)
        else:  # tuple[int, ...]
            ok = isinstance(value, tuple) and all(_is_int(v) for v in value)
        if not ok:
            wanted = WANTED_IN_PYTHON[f.type]
            raise ConfigError(f"{f.name} must be {wanted}, got {value!r}.")
        ints = value if isinstance(value, tuple) else (value,) if f.type == "int" else ()
        for v in ints:
            _check(
                abs(v) <= INT32_MAX,
                f"{f.name} is {v}, beyond the int32 sizes it sets (at most {INT32_MAX}).",
            )
        if f.type == "float" and math.isfinite(value):
            _check(
                abs(value) <= FLOAT32_MAX,
                f"{f.name} is {value}, beyond the float32 numbers it is computed in "
                f"(at most {FLOAT32_MAX:.4g}).",
            )
            # Below float32's smallest normal number XLA flushes a value to 0: a learning rate
            # of 1e-50 would train with 0.
            _check(
                value == 0 or abs(value) >= FLOAT32_TINY,
                f"{f.name} is {value}, which float32 (the precision it is computed in) rounds "
                f"to 0: pass a value of magnitude at least {FLOAT32_TINY:.4g}.",
            )


def _validate_backbone_and_engine(c) -> None:
    for f in dataclasses.fields(c):
        value = getattr(c, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{f.name} must be a finite number, got {value}.")
    _check(c.hidden >= 1, f"hidden must be >= 1, got {c.hidden}.")
    _check(0.0 <= c.dropout < 1.0, f"dropout must be in [0, 1), got {c.dropout}.")
    _check(0.0 <= c.input_dropout < 1.0, f"input_dropout must be in [0, 1), got {c.input_dropout}.")
    _check(c.gcn_lr > 0 and c.q_lr > 0, "learning rates (gcn_lr, q_lr) must be > 0.")
    _check(c.weight_decay >= 0, f"weight_decay must be >= 0, got {c.weight_decay}.")
    _check(
        c.backbone in BACKBONES,
        f"backbone must be one of {BACKBONES}, got {c.backbone!r} (e.g. --backbone decoupled).",
    )
    lowest = 0 if c.backbone == "decoupled" else 1
    deepest = MAX_DEPTH[c.backbone]
    _check(
        lowest <= c.min_depth <= c.max_depth,
        f"depths must satisfy {lowest} <= min_depth <= max_depth for the {c.backbone} backbone, "
        f"got {c.min_depth}-{c.max_depth} (e.g. --depths 2-5"
        + (")." if lowest else " or 0-16).")
        + (" Depth 0 exists only in the decoupled backbone (a backbone of your own with a depth 0:"
           " set backbone='decoupled' for its range)." if c.min_depth == 0 else ""),  # fmt: skip
    )
    _check(
        c.max_depth <= deepest,
        f"max_depth {c.max_depth} is above the {deepest} the {c.backbone} backbone supports.",
    )
    _check(
        lowest <= c.depth <= deepest,
        f"depth must be in {lowest}..{deepest} for the {c.backbone} backbone, got {c.depth}.",
    )
    _check(
        c.engine in ENGINES,
        f"engine must be one of {ENGINES}, got {c.engine!r} (e.g. --engine subgraph).",
    )
    _check(
        max(c.subgraph_nodes, c.subgraph_edges) <= MAX_SUBGRAPH,
        f"subgraph_nodes and subgraph_edges must be at most {MAX_SUBGRAPH} (a padded subgraph "
        f"adds rows to them in int32), got {c.subgraph_nodes} and {c.subgraph_edges}.",
    )
    _check(
        c.subgraph_nodes >= 2 and c.subgraph_edges >= c.subgraph_nodes,
        f"need subgraph_nodes >= 2 and subgraph_edges >= subgraph_nodes (every node has a "
        f"self-loop), got {c.subgraph_nodes} and {c.subgraph_edges}.",
    )
    _check(
        len(c.fanouts) >= 1 and all(isinstance(f, int) and f >= 0 for f in c.fanouts),
        f"fanouts must be whole numbers >= 0 (0 = every neighbour), got {c.fanouts}.",
    )
    _check(0.0 <= c.teleport < 1.0, f"teleport must be in [0, 1), got {c.teleport}.")
    _check(
        c.backbone == "decoupled" or not (c.ego_head or c.layer_norm),
        f"ego_head and layer_norm are options of the decoupled backbone, not of {c.backbone!r}: "
        f"set the backbone to decoupled (--backbone decoupled, with no --set backbone= naming "
        f"another).",
    )
    _check(
        c.matmul_precision in MATMUL_PRECISIONS,
        f"matmul_precision must be one of {MATMUL_PRECISIONS}, got {c.matmul_precision!r} "
        "(e.g. --set matmul_precision=highest).",
    )


def _validate_mdp_and_agent(c) -> None:
    for name in (
        "epochs",
        "num_episodes",
        "steps_per_episode",
        "buffer_size",
        "reward_window",
        "normaliser_window",
        "replay_capacity",
        "batch_size",
        "target_period",
        "eps_every",
        "episodes_per_call",
    ):
        _check(getattr(c, name) >= 1, f"{name} must be >= 1, got {getattr(c, name)}.")
    _check(c.num_walkers >= 0, "num_walkers must be >= 0 (0: one per training node).")
    _check(c.dqn_updates_per_step >= 0, "dqn_updates_per_step must be >= 0.")
    _check(
        c.batch_size <= c.replay_capacity,
        f"batch_size {c.batch_size} exceeds replay_capacity {c.replay_capacity}.",
    )
    _check(
        c.transition in TRANSITIONS,
        f"transition must be one of {TRANSITIONS}, got {c.transition!r}.",
    )
    _check(0.0 <= c.gamma < 1.0, f"gamma must be in [0, 1), got {c.gamma}.")
    _check(  # <= 0 would train the agent toward the worst depths, or on no signal at all
        c.reward_scale > 0, f"reward_scale must be > 0, got {c.reward_scale}."
    )
    _check(
        c.num_episodes * c.steps_per_episode <= INT32_MAX,
        f"num_episodes x steps_per_episode is {c.num_episodes * c.steps_per_episode} MDP "
        f"steps, beyond the int32 step counter (at most {INT32_MAX}).",
    )
    _check(
        0.0 <= c.eps_end <= c.eps_start <= 1.0,
        f"need 0 <= eps_end <= eps_start <= 1, got {c.eps_end}, {c.eps_start}.",
    )
    _check(0.0 < c.eps_horizon_fraction <= 1.0, "eps_horizon_fraction must be in (0, 1].")
    _check(
        len(c.q_hidden) >= 1 and all(h >= 1 for h in c.q_hidden),
        f"q_hidden must be non-empty positive sizes, got {c.q_hidden}.",
    )


def keywords_only(positional: tuple) -> None:
    if positional:
        raise ConfigError(
            f"Config takes keyword arguments only (e.g. Config.tiny(hidden=32)), got "
            f"{len(positional)} positional: {positional[0]!r}."
        )


def _subclass_hint(cls, name: str) -> str:
    """Where a method's own config (a subclass, e.g. Policy-GNN+'s) has the field, says so."""
    for sub in cls.__subclasses__():
        if name in {f.name for f in dataclasses.fields(sub)}:
            return f" It is a field of {sub.__name__} ({sub.__module__}), a method's own config."
    return ""


def checked_init(dataclass_init, field_names: tuple[str, ...]):
    """The dataclass's __init__, with a misspelt field a ConfigError naming the near ones (as
    `--set` does), not Python's TypeError."""

    @functools.wraps(dataclass_init)
    def init(self, *positional, **fields):
        keywords_only(positional)
        for name in fields:
            if name not in field_names:
                close = difflib.get_close_matches(name, field_names, n=3)
                hint = f" Did you mean {', '.join(close)}?" if close else ""
                hint += _subclass_hint(type(self), name)
                raise ConfigError(f"{type(self).__name__} has no field {name!r}.{hint}")
        dataclass_init(self, **fields)

    return init
