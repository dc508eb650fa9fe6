"""The backbones a config can name (`Config.backbone`, `--backbone`), built by one function.

- `gcn`: the paper's shared GCN (ALGORITHM.md section 2), the default;
- `gcn-readout`: the shared GCN with a linear readout, this project's structure until 2026-11
  (the README's earlier results were measured with it), kept so they reproduce bit for bit;
- `decoupled`: an MLP, then parameter-free propagation (`decoupled.py`); depths 0..K.
"""

from __future__ import annotations

from policy_gnn_jax import backbone as backbone_lib
from policy_gnn_jax import decoupled
from policy_gnn_jax import graph as graph_lib


def make_backbone(
    config, g: graph_lib.Graph, min_depth: int, max_depth: int
) -> backbone_lib.Backbone:
    """The backbone `config.backbone` names, able to compute depths `min_depth..max_depth`."""
    if config.backbone == "gcn":
        return backbone_lib.gcn_backbone(config, g, max_depth=max_depth, min_depth=min_depth)
    if config.backbone == "gcn-readout":
        return backbone_lib.gcn_readout_backbone(config, g, max_depth=max_depth)
    if config.backbone == "decoupled":
        return decoupled.decoupled_backbone(config, g, max_depth=max_depth, min_depth=min_depth)
    raise ValueError(f"unknown backbone {config.backbone!r}")  # Config refuses it first


def for_policy(config, g: graph_lib.Graph) -> backbone_lib.Backbone:
    """The backbone the MDP loop trains: every depth the policy may pick."""
    return make_backbone(config, g, config.min_depth, config.max_depth)


def for_fixed_depth(config, g: graph_lib.Graph) -> backbone_lib.Backbone:
    """The backbone the fixed-depth baseline trains: `config.depth` only (where it can)."""
    return make_backbone(config, g, config.depth, config.depth)
