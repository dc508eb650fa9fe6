"""What `Config`'s presets start from, and its fields grouped by what they configure (`--help`
lists them by section; a method names the sections it never reads)."""

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


SECTIONS: dict[str, tuple[str, ...]] = {
    "backbone": ("backbone", "hidden", "dropout", "input_dropout", "gcn_lr", "weight_decay",
                 "teleport", "ego_head", "layer_norm"),
    "mdp": ("min_depth", "max_depth", "num_episodes", "steps_per_episode", "num_walkers",
            "buffer_size", "transition", "reward_scale", "reward_window", "normaliser_window"),
    "agent": ("q_hidden", "q_lr", "gamma", "replay_capacity", "batch_size", "target_period",
              "dqn_updates_per_step", "eps_start", "eps_end", "eps_every",
              "eps_horizon_fraction", "random_policy"),
    "fixed_depth": ("depth", "epochs"),
    "engine": ("engine", "subgraph_nodes", "subgraph_edges", "fanouts"),
    "run": ("episodes_per_call", "audit", "reproducible", "matmul_precision"),
}  # fmt: skip
