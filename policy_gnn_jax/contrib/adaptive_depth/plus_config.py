"""Policy-GNN+'s config: `Config` with the method's switches (`plus.py`), which no other method
reads. The defaults are the combination chosen on Cora's and CiteSeer's validation
(experiments/adaptive_depth.py ablate; docs/adaptive-depth.md, "Policy-GNN+")."""

from __future__ import annotations

import dataclasses

from policy_gnn_jax.config import Config, ConfigError
from policy_gnn_jax.config.checks import checked_init

PLUS_TRAIN_DEPTHS = ("random", "policy", "all")
PLUS_SIGNALS = ("all", "graph", "depth")
PLUS_REWARDS = ("loglik", "correct")


@dataclasses.dataclass(frozen=True)
class PlusConfig(Config):
    """`Config` and Policy-GNN+'s switches; it trains for `epochs` full-batch epochs."""

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

    def __post_init__(self):
        super().__post_init__()
        for name, allowed in (
            ("plus_train_depths", PLUS_TRAIN_DEPTHS),
            ("plus_signals", PLUS_SIGNALS),
            ("plus_reward", PLUS_REWARDS),
        ):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}.")
        if not 0.0 <= self.plus_warmup_fraction <= 1.0:
            raise ConfigError("plus_warmup_fraction must be in [0, 1].")
        if not 0.0 < self.plus_policy_fraction < 1.0:
            raise ConfigError(
                f"plus_policy_fraction must be in (0, 1), got {self.plus_policy_fraction}."
            )
        if not (self.plus_lr > 0 and self.plus_l2 >= 0):
            raise ConfigError("plus_lr must be > 0 and plus_l2 >= 0.")


PlusConfig.__init__ = checked_init(
    PlusConfig.__init__, tuple(f.name for f in dataclasses.fields(PlusConfig))
)
