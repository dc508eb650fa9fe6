"""Policy-GNN+ as a method of the library (`methods.Method`, the name `policy-gnn-plus`): its
trainer, depths and record fields from `plus.py`, its config `PlusConfig`. `methods.get` imports
this module the first time the name is asked for.
"""

from __future__ import annotations

from policy_gnn_jax import backbones, data, methods
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.contrib.adaptive_depth.plus import (
    PlusData,
    depths_of,
    make_context,
    make_trainer,
    plus_data,
)
from policy_gnn_jax.contrib.adaptive_depth.plus_config import PlusConfig
from policy_gnn_jax.runtime import records


def record_fields(config, metrics, results) -> dict:
    return {
        **records.depth_fields(config, results),
        "val_metric_note": "on the selection half of the validation nodes (the other half "
        "trains the bandit)",
        "best_epoch": results["best_epoch"].tolist(),
        "test_depths": results["test_depths"].tolist(),
        "val_metric_curve": {
            "per_epoch_mean_over_seeds": metrics["val_metric"].mean(0).tolist(),
        },
        "policy_half_metric_curve": {
            "per_epoch_mean_over_seeds": metrics["policy_half_metric"].mean(0).tolist(),
        },
    }


def _method_trainer(config, ds: data.Dataset, g: graph_lib.Graph, backbone, agent):
    del backbone, agent  # takes neither: `Method.check_parts` refuses them before this
    return make_trainer(config, ds, g)


def _method_depth_fn(config, ds: data.Dataset, g: graph_lib.Graph, agent):
    del agent
    ctx, signals_ = make_context(config, ds, g), plus_data(config, ds, g).graph_signals
    return lambda params, policy, key, g, nodes: depths_of(
        ctx, PlusData(g, signals_), params, policy, nodes
    )


def _hints(config) -> dict:
    hints = methods.learning_rate_hints(config)
    hints["agent"] = f"Lower the bandit's learning rate (Config.plus_lr, now {config.plus_lr:g})"
    return hints


METHOD = methods.register(
    methods.Method(
        name="policy-gnn-plus",
        make_trainer=_method_trainer,
        backbone=backbones.for_policy,
        depth_fn=_method_depth_fn,
        record_fields=record_fields,
        hints=_hints,
        takes_backbone=False,
        ignores=frozenset(("depth", "random_policy", *methods.MDP_ONLY_FIELDS)),
        config_type=PlusConfig,
    )
)
