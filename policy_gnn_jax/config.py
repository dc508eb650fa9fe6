"""Run configuration: one frozen dataclass, validated at construction, with named presets.

Every value that sets an array shape is a Python int here, so `make_*` factories can close over
the config and jit compiles once per config.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re

TRANSITIONS = ("labelled", "walk")
# `backbones.make_backbone` builds each; "decoupled" is the only one with a depth 0.
BACKBONES = ("gcn", "gcn-readout", "decoupled")
PLUS_TRAIN_DEPTHS = ("random", "policy", "all")
PLUS_SIGNALS = ("all", "graph", "depth")
PLUS_REWARDS = ("loglik", "correct")
# The deepest depth each backbone supports: the coupled GCNs stop where they are useless anyway
# (docs/results.md: 9 points lost from depth 2 to 5); the decoupled one costs one C-wide product
# a depth.
MAX_DEPTH = {"gcn": 10, "gcn-readout": 10, "decoupled": 64}
# How an MDP step trains the backbone and measures M_t (subgraph.py): on the whole graph, or on
# padded d-hop subgraphs of the buffers' and validation nodes; "auto" picks by graph size.
ENGINES = ("auto", "full", "subgraph")
# "auto" picks the subgraph engine above this many nodes: below it one whole-graph step costs
# about what a padded subgraph step costs (benchmarks/bench_scale.py).
AUTO_SUBGRAPH_NODES = 100_000


class ConfigError(ValueError):
    """An out-of-range or inconsistent config value. The message names the field and the fix."""


@dataclasses.dataclass(frozen=True)
class Config:
    """Defaults are the paper's (docs/algorithm.md sections 2-5); section 12 there gives every
    choice the paper leaves open. `SECTIONS` groups the fields by what they configure."""

    # The backbone (BACKBONES): the paper's shared GCN (section 2) unless told otherwise.
    backbone: str = "gcn"
    # Shared GCN (section 2); the decoupled backbone reads the same fields (`Config.decoupled`).
    hidden: int = 16
    dropout: float = 0.5
    # Kipf & Welling's dropout on the input's non-zeros; docs/algorithm.md's formula starts at
    # h_0 = X, and 0 restores it. 0.5 measured better on Cora/CiteSeer validation (section 12).
    input_dropout: float = 0.5
    gcn_lr: float = 0.01
    weight_decay: float = 5e-4
    min_depth: int = 2
    max_depth: int = 5
    # Decoupled backbone: the personalised-PageRank teleport alpha (0: plain powers of Â).
    teleport: float = 0.1
    # Fixed-depth baseline (section 7).
    depth: int = 2
    epochs: int = 200
    # MDP (section 3).
    num_episodes: int = 1000
    steps_per_episode: int = 10
    num_walkers: int = 0  # 0: one walker per training node
    buffer_size: int = 128
    transition: str = "labelled"
    reward_scale: float = 100.0
    reward_window: int = 10
    normaliser_window: int = 1000
    # DQN meta-policy (section 4).
    q_hidden: tuple[int, ...] = (32, 64, 128, 64, 32)
    q_lr: float = 5e-4
    gamma: float = 0.95
    replay_capacity: int = 10_000
    batch_size: int = 128
    target_period: int = 1000
    dqn_updates_per_step: int = 1
    eps_start: float = 1.0
    eps_end: float = 0.1
    eps_every: int = 10
    eps_horizon_fraction: float = 0.5
    random_policy: bool = False  # the random-policy baseline: epsilon 1, random eval depths
    # The reference-protocol audit (docs/algorithm.md section 6): also measure the released code's
    # test metric at every step. Reads test labels during training, so it is opt-in and never a
    # headline. It draws from its own key and feeds nothing back, so the honest results are
    # unchanged by it.
    audit: bool = False
    # Policy-GNN+ (`--method policy-gnn-plus`, plus.py): each part a switch; the defaults are
    # the combination chosen on Cora's and CiteSeer's validation (experiments/adaptive_depth.py
    # ablate; docs/adaptive-depth.md, "Policy-GNN+"). It trains for `epochs` full-batch epochs.
    # The depths the backbone trains its training nodes at: "random" (uniform, every epoch),
    # "policy" (random for the first `plus_warmup_fraction` of epochs, then the bandit's
    # epsilon-greedy choice) or "all" (the mean loss over every depth).
    plus_train_depths: str = "random"
    plus_warmup_fraction: float = 0.5
    # The bandit's state: "all" signals, "graph" (degree, distance to a labelled node,
    # smoothness, feature directions) or "depth" (each depth's confidence, entropy, agreement).
    plus_signals: str = "depth"
    # The per-node reward on the policy half of validation: "loglik" or "correct".
    plus_reward: str = "correct"
    # The share of validation nodes that train the bandit; the rest only select the snapshot.
    plus_policy_fraction: float = 0.5
    plus_lr: float = 0.01
    plus_l2: float = 1e-3
    # The MDP step's engine (ENGINES). The subgraph engine pads every subgraph to
    # `subgraph_nodes` nodes and `subgraph_edges` edges (self-loops included), so each shape
    # compiles once; a neighbourhood over either budget is sampled: at most `fanouts[h-1]`
    # neighbours per node at hop h (the last value repeats; 0 = all), then, if still over, a
    # uniform subset of the hop's new nodes and edges (docs/scale.md).
    engine: str = "auto"
    subgraph_nodes: int = 16_384
    subgraph_edges: int = 131_072
    fanouts: tuple[int, ...] = (10, 10, 5)
    # Progress reporting: the jitted loop returns to Python every `episodes_per_call` episodes.
    episodes_per_call: int = 10

    def __post_init__(self):
        _validate(self)

    @property
    def num_actions(self) -> int:
        return self.max_depth - self.min_depth + 1

    def fanout(self, hop: int) -> int:
        """The most neighbours sampled per node at `hop` (1-based); 0 = all of them."""
        return self.fanouts[min(hop, len(self.fanouts)) - 1]

    @property
    def num_steps(self) -> int:
        return self.num_episodes * self.steps_per_episode

    @property
    def eps_horizon_steps(self) -> int:
        return max(1, int(self.num_steps * self.eps_horizon_fraction))

    @classmethod
    def paper(cls, **overrides) -> Config:
        """The paper's defaults: depths 2..5, 1000 episodes of 10 steps."""
        return cls(**overrides)

    @classmethod
    def decoupled(cls, dataset: str | None = None, **overrides) -> Config:
        """The decoupled backbone: depths 0..16, the fixed-depth baseline at depth 10, and the
        regularisation chosen on `dataset`'s validation nodes where it was tuned
        (`experiments/tune_decoupled.py`; docs/adaptive-depth.md, "The decoupled backbone")."""
        base = dict(DECOUPLED_DEFAULTS)
        base.update(DECOUPLED_TUNED.get((dataset or "").lower(), {}))
        base.update(overrides)
        return cls(**base)

    @classmethod
    def tiny(cls, **overrides) -> Config:
        """Small and fast, for tests and smoke runs."""
        base = dict(
            min_depth=1,
            max_depth=3,
            epochs=20,
            num_episodes=4,
            steps_per_episode=5,
            buffer_size=8,
            replay_capacity=256,
            batch_size=16,
            target_period=10,
            normaliser_window=64,
            q_hidden=(16, 16),
            episodes_per_call=2,
        )
        base.update(overrides)
        return cls(**base)


# What `Config.decoupled` changes from the paper's defaults; `--backbone decoupled` starts here.
DECOUPLED_DEFAULTS = dict(
    backbone="decoupled",
    hidden=64,
    dropout=0.5,
    input_dropout=0.5,
    weight_decay=5e-3,
    teleport=0.1,
    min_depth=0,
    max_depth=16,
    depth=10,
    epochs=200,
)

# Chosen on each dataset's validation accuracy by experiments/tune_decoupled.py (10 seeds at
# depth 10; docs/results/decoupled_tuning.json). Other datasets get DECOUPLED_DEFAULTS.
DECOUPLED_TUNED: dict[str, dict] = {
    "cora": dict(dropout=0.8, input_dropout=0.8, weight_decay=5e-3, epochs=500),
    "citeseer": dict(dropout=0.5, input_dropout=0.5, weight_decay=5e-3, epochs=500),
}


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _validate(c: Config) -> None:
    _validate_backbone_and_engine(c)
    _validate_mdp_and_agent(c)


def _validate_backbone_and_engine(c: Config) -> None:
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
        + (" Depth 0 exists only in the decoupled backbone." if c.min_depth == 0 else ""),
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
        c.subgraph_nodes >= 2 and c.subgraph_edges >= c.subgraph_nodes,
        f"need subgraph_nodes >= 2 and subgraph_edges >= subgraph_nodes (every node has a "
        f"self-loop), got {c.subgraph_nodes} and {c.subgraph_edges}.",
    )
    _check(
        len(c.fanouts) >= 1 and all(isinstance(f, int) and f >= 0 for f in c.fanouts),
        f"fanouts must be whole numbers >= 0 (0 = every neighbour), got {c.fanouts}.",
    )
    _check(0.0 <= c.teleport < 1.0, f"teleport must be in [0, 1), got {c.teleport}.")


def _validate_mdp_and_agent(c: Config) -> None:
    for name, allowed in (
        ("plus_train_depths", PLUS_TRAIN_DEPTHS),
        ("plus_signals", PLUS_SIGNALS),
        ("plus_reward", PLUS_REWARDS),
    ):
        _check(
            getattr(c, name) in allowed,
            f"{name} must be one of {allowed}, got {getattr(c, name)!r}.",
        )
    _check(0.0 <= c.plus_warmup_fraction <= 1.0, "plus_warmup_fraction must be in [0, 1].")
    _check(
        0.0 < c.plus_policy_fraction < 1.0,
        f"plus_policy_fraction must be in (0, 1), got {c.plus_policy_fraction}.",
    )
    _check(c.plus_lr > 0 and c.plus_l2 >= 0, "plus_lr must be > 0 and plus_l2 >= 0.")
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
    _check(
        0.0 <= c.eps_end <= c.eps_start <= 1.0,
        f"need 0 <= eps_end <= eps_start <= 1, got {c.eps_end}, {c.eps_start}.",
    )
    _check(0.0 < c.eps_horizon_fraction <= 1.0, "eps_horizon_fraction must be in (0, 1].")
    _check(
        len(c.q_hidden) >= 1 and all(h >= 1 for h in c.q_hidden),
        f"q_hidden must be non-empty positive sizes, got {c.q_hidden}.",
    )


# Every field by what it configures: `--help`, `--show-config` and docs/usage.md list them so.
SECTIONS: dict[str, tuple[str, ...]] = {
    "backbone": ("backbone", "hidden", "dropout", "input_dropout", "gcn_lr", "weight_decay",
                 "teleport"),
    "mdp": ("min_depth", "max_depth", "num_episodes", "steps_per_episode", "num_walkers",
            "buffer_size", "transition", "reward_scale", "reward_window", "normaliser_window"),
    "agent": ("q_hidden", "q_lr", "gamma", "replay_capacity", "batch_size", "target_period",
              "dqn_updates_per_step", "eps_start", "eps_end", "eps_every",
              "eps_horizon_fraction", "random_policy"),
    "fixed_depth": ("depth", "epochs"),
    "engine": ("engine", "subgraph_nodes", "subgraph_edges", "fanouts"),
    "run": ("episodes_per_call", "audit"),
    "policy_gnn_plus": ("plus_train_depths", "plus_warmup_fraction", "plus_signals",
                        "plus_reward", "plus_policy_fraction", "plus_lr", "plus_l2"),
}  # fmt: skip


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(text)


def _parse_ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


# A field's annotation (a string: `from __future__ import annotations`) -> parser, and how to
# say what it wants.
_PARSERS = {
    "int": (int, "a whole number"),
    "float": (float, "a number"),
    "str": (str, "a word"),
    "bool": (_parse_bool, "true or false"),
    "tuple[int, ...]": (_parse_ints, "whole numbers separated by commas, e.g. 10,10,5"),
}


def parse_overrides(items: list[str]) -> dict:
    """`["q_lr=1e-3", "fanouts=10,10,5"]` -> {"q_lr": 0.001, "fanouts": (10, 10, 5)}, each value
    parsed as its field's type. A malformed item, an unknown field or a value of the wrong kind
    is a ConfigError naming it; ranges are checked when the Config is built."""
    types = {f.name: f.type for f in dataclasses.fields(Config)}
    values = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(f"--set takes FIELD=VALUE, e.g. --set q_lr=1e-3; got {item!r}.")
        if name not in types:
            close = difflib.get_close_matches(name, types, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(
                f"--set {item}: Config has no field {name!r}.{hint} "
                f"`policy-gnn --help` lists every field."
            )
        parse, wanted = _PARSERS[types[name]]
        try:
            values[name] = parse(text.strip())
        except ValueError:
            raise ConfigError(f"--set {item}: {name} takes {wanted}, got {text!r}.") from None
    return values


def parse_depths(text: str) -> tuple[int, int]:
    """Parses "2-5" (or "3") into (min_depth, max_depth); anything else is a ConfigError."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not match:
        raise ConfigError(f"--depths must look like 2-5 or 3 (whole numbers), got {text!r}.")
    lo = int(match.group(1))
    return lo, int(match.group(2)) if match.group(2) else lo
