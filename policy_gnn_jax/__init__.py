"""policy_gnn_jax: Policy-GNN (Lai et al., KDD 2020) as pure, jitted, vmapped JAX.

Public API (see README, "Use it on your own graph"):

    from_arrays, from_jraph, Dataset, load_dataset   build or load a graph
    Config                                            the run configuration (Config.paper/tiny)
    fit, Fit, load                                    train over seeds; predict; save and load
    Backbone, Agent                                   the interfaces a new GNN or RL agent fills
    ConfigError, DataError, InvalidDatasetError,      what bad input raises (all but DataError and
    CheckpointError, ResourceError, DivergenceError   DivergenceError are ValueErrors)

Modules (imports flow downwards):
  config, data, treeutil -> graph -> gcn, qnet, replay, normaliser, action_buffers
  -> backbone, agent -> dqn, env, audit -> trainer -> train, baseline
  -> checkpoint, records -> runner -> api -> cli
"""

from policy_gnn_jax.agent import Agent
from policy_gnn_jax.api import METHODS, Fit, fit, load
from policy_gnn_jax.backbone import Backbone, gcn_backbone
from policy_gnn_jax.checkpoint import CheckpointError
from policy_gnn_jax.config import Config, ConfigError
from policy_gnn_jax.data import (
    DataError,
    Dataset,
    InvalidDatasetError,
    from_arrays,
    from_jraph,
    load_dataset,
)
from policy_gnn_jax.runner import DivergenceError, ResourceError

__version__ = "0.2.0"

__all__ = [
    "METHODS",
    "Agent",
    "Backbone",
    "CheckpointError",
    "Config",
    "ConfigError",
    "DataError",
    "Dataset",
    "DivergenceError",
    "Fit",
    "InvalidDatasetError",
    "ResourceError",
    "fit",
    "from_arrays",
    "from_jraph",
    "gcn_backbone",
    "load",
    "load_dataset",
]
