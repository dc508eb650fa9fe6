"""Run configuration: one frozen dataclass, validated at construction, with named presets.

Every value that sets an array shape is a Python int here, so `make_*` factories can close over
the config and jit compiles once per config. `checks.py` validates a config, `presets.py` holds
what the presets start from and `SECTIONS` (the fields by what they configure), `overrides.py`
reads values from text (`--set`, `--depths`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from policy_gnn_jax.config.checks import (
    AUTO_SUBGRAPH_NODES,
    BACKBONES,
    ENGINES,
    MATMUL_PRECISIONS,
    MAX_DEPTH,
    TRANSITIONS,
    ConfigError,
    checked_init,
    keywords_only,
    validate,
)
from policy_gnn_jax.config.presets import DECOUPLED_DEFAULTS, DECOUPLED_TUNED, SECTIONS


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
    # Decoupled backbone, for heterophilous graphs: a separate ego head added to every depth's
    # propagated logits (a node's own features keep their own weights at any depth), and layer
    # norm on the hidden layer. docs/heterophily.md measures both.
    ego_head: bool = False
    layer_norm: bool = False
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
    target_period: int = 1000  # in DQN updates, which start once the replay holds a batch
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
    # Compilation (runtime/compilation.py). `reproducible`: on a GPU, compile every program so
    # that two processes give bit-identical results (XLA's autotuning off, deterministic ops);
    # False lets XLA pick its fastest kernels per process. CPU runs are bit-identical either way.
    reproducible: bool = True
    # float32 matmul precision (MATMUL_PRECISIONS): "highest" is full float32 everywhere;
    # "default" lets a GPU use TF32 (about 3 significant digits fewer) and a TPU bfloat16 passes.
    matmul_precision: str = "highest"

    def __post_init__(self):
        # numpy scalars (np.int64(32), np.float32(0.9)) become the Python values they stand
        # for, as fit and from_arrays accept them; everything else is checked as given.
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.generic):
                object.__setattr__(self, f.name, value.item())
            elif isinstance(value, tuple) and any(isinstance(v, np.generic) for v in value):
                object.__setattr__(
                    self, f.name, tuple(getattr(v, "item", lambda v=v: v)() for v in value)
                )
        validate(self)

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
    def paper(cls, *positional, **overrides) -> Config:
        """The paper's defaults: depths 2..5, 1000 episodes of 10 steps."""
        keywords_only(positional)
        return cls(**overrides)

    @classmethod
    def decoupled(cls, dataset: str | None = None, **overrides) -> Config:
        """The decoupled backbone: depths 0..16, the fixed-depth baseline at depth 10, and the
        regularisation chosen on `dataset`'s validation nodes where it was tuned
        (`experiments/tune_decoupled.py`; docs/adaptive-depth.md, "The decoupled backbone")."""
        base = dict(DECOUPLED_DEFAULTS)
        if dataset is not None and not isinstance(dataset, str):
            raise ConfigError(f"dataset must be a dataset's name or None, got {dataset!r}.")
        base.update(DECOUPLED_TUNED.get((dataset or "").strip().lower(), {}))
        base.update(overrides)
        return cls(**base)

    @classmethod
    def of(cls, config: Config) -> Config:
        """`config` as a `cls` (a method's own config, or `Config` itself): the fields both
        have, the others at `cls`'s defaults."""
        if type(config) is cls:
            return config
        fields = [f.name for f in dataclasses.fields(cls) if hasattr(config, f.name)]
        return cls(**{name: getattr(config, name) for name in fields})

    @classmethod
    def tiny(cls, *positional, **overrides) -> Config:
        """Small and fast, for tests and smoke runs."""
        keywords_only(positional)
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


Config.__init__ = checked_init(Config.__init__, tuple(f.name for f in dataclasses.fields(Config)))


from policy_gnn_jax.config.overrides import parse_depths, parse_overrides  # noqa: E402

__all__ = [
    "AUTO_SUBGRAPH_NODES",
    "BACKBONES",
    "DECOUPLED_DEFAULTS",
    "DECOUPLED_TUNED",
    "ENGINES",
    "MATMUL_PRECISIONS",
    "MAX_DEPTH",
    "SECTIONS",
    "TRANSITIONS",
    "Config",
    "ConfigError",
    "parse_depths",
    "parse_overrides",
]
