"""Backbones: GNNs whose every depth comes out of one forward pass, as pure functions.

- `gcn.py`: the `Backbone` interface every backbone fills, the ops they share, and the paper's
  shared GCN (`--backbone gcn`, the default);
- `readout.py`: the legacy readout GCN (`--backbone gcn-readout`), kept so its results reproduce;
- `decoupled.py`: an MLP, then parameter-free propagation (`--backbone decoupled`); depths 0..K.

`make_backbone` builds the one `Config.backbone` names.
"""

from __future__ import annotations

from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.backbones import decoupled, gcn, readout
from policy_gnn_jax.backbones.gcn import Backbone, flax_backbone

__all__ = ["Backbone", "flax_backbone", "for_fixed_depth", "for_policy", "make_backbone"]


def make_backbone(
    config, g: graph_lib.Graph, min_depth: int, max_depth: int
) -> gcn.Backbone:
    """The backbone `config.backbone` names, able to compute depths `min_depth..max_depth`."""
    if config.backbone == "gcn":
        return gcn.gcn_backbone(config, g, max_depth=max_depth, min_depth=min_depth)
    if config.backbone == "gcn-readout":
        return readout.gcn_readout_backbone(config, g, max_depth=max_depth)
    if config.backbone == "decoupled":
        return decoupled.decoupled_backbone(config, g, max_depth=max_depth, min_depth=min_depth)
    raise ValueError(f"unknown backbone {config.backbone!r}")  # Config refuses it first


def for_policy(config, g: graph_lib.Graph) -> gcn.Backbone:
    """The backbone the MDP loop trains: every depth the policy may pick."""
    return make_backbone(config, g, config.min_depth, config.max_depth)


def for_fixed_depth(config, g: graph_lib.Graph) -> gcn.Backbone:
    """The backbone the fixed-depth baseline trains: `config.depth` only (where it can)."""
    return make_backbone(config, g, config.depth, config.depth)
