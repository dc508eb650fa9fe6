"""Backbones: GNNs whose every depth comes out of one forward pass, as pure functions.

- `gcn.py`: the `Backbone` interface every backbone fills, the ops they share, and the paper's
  shared GCN (`--backbone gcn`, the default);
- `readout.py`: the legacy readout GCN (`--backbone gcn-readout`), kept so its results reproduce;
- `decoupled.py`: an MLP, then parameter-free propagation (`--backbone decoupled`); depths 0..K.

Here: the backbone a config names (`make_backbone`), with the optimiser every built-in one
trains with (`make_optimizer`).
"""

from __future__ import annotations

import jax
import optax

from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.backbones import decoupled, gcn, readout
from policy_gnn_jax.backbones.gcn import Backbone, flax_backbone

__all__ = [
    "Backbone",
    "flax_backbone",
    "for_fixed_depth",
    "for_policy",
    "gcn_backbone",
    "make_backbone",
    "make_optimizer",
]

# The weights that read the features: W_1 of every GCN, and W_0 (depth 1) of the paper structure.
FIRST_LAYER = ("w_1", "w_0")


def make_optimizer(lr: float, weight_decay: float) -> optax.GradientTransformation:
    """Adam with coupled L2 on the first layer's weights (Kipf & Welling's choice).

    The decay is added to the gradient before Adam, as torch's Adam `weight_decay`. Decaying only
    the weights that read the features (`FIRST_LAYER`) measured better than decaying every
    weight on Cora and CiteSeer validation (docs/algorithm.md section 12).
    """

    def first_layer_only(params):
        return jax.tree_util.tree_map_with_path(
            lambda path, _: any(getattr(k, "key", None) in FIRST_LAYER for k in path), params
        )

    return optax.chain(
        optax.add_decayed_weights(weight_decay, mask=first_layer_only), optax.adam(lr)
    )


def gcn_backbone(
    config, g: graph_lib.Graph, max_depth: int | None = None, min_depth: int = 1
) -> Backbone:
    """The paper's shared GCN a config describes (hidden size, dropouts, Adam + first-layer L2)
    for depths `min_depth..max_depth` (default: 1..`config.max_depth`)."""
    max_depth = max_depth or config.max_depth
    model = gcn.SharedGCN(
        hidden=config.hidden,
        num_classes=g.num_classes,
        max_depth=max_depth,
        min_depth=min_depth,
        dropout=config.dropout,
        input_dropout=config.input_dropout,
    )
    return _with_optimizer(config, model, min_depth, max_depth)


def make_backbone(config, g: graph_lib.Graph, min_depth: int, max_depth: int) -> Backbone:
    """The backbone `config.backbone` names, able to compute depths `min_depth..max_depth`:
    only those (no unused layer costs time) where its structure allows."""
    if config.backbone == "gcn":
        return gcn_backbone(config, g, max_depth=max_depth, min_depth=min_depth)
    if config.backbone == "gcn-readout":  # every depth from 1 shares the readout
        model, min_depth = readout.make_readout_gcn(config, g, max_depth), 1
    elif config.backbone == "decoupled":
        model = decoupled.make_decoupled(config, g, min_depth, max_depth)
    else:
        raise ValueError(f"unknown backbone {config.backbone!r}")  # Config refuses it first
    return _with_optimizer(config, model, min_depth, max_depth)


def _with_optimizer(config, model, min_depth: int, max_depth: int) -> Backbone:
    """`model` as a Backbone trained with the optimiser the config describes."""
    optimizer = make_optimizer(config.gcn_lr, config.weight_decay)
    return flax_backbone(model, optimizer, min_depth, max_depth)


def for_policy(config, g: graph_lib.Graph) -> Backbone:
    """The backbone the MDP loop trains: every depth the policy may pick."""
    return make_backbone(config, g, config.min_depth, config.max_depth)


def for_fixed_depth(config, g: graph_lib.Graph) -> Backbone:
    """The backbone the fixed-depth baseline trains: `config.depth` only (where it can)."""
    return make_backbone(config, g, config.depth, config.depth)
