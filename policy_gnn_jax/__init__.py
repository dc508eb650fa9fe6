"""policy_gnn_jax: Policy-GNN (Lai et al., KDD 2020) as pure, jitted, vmapped JAX.

Public API (README, "Use it on your own graph"; docs/usage.md):

    from_arrays, from_jraph, Dataset, load_dataset   build or load a graph
    Config                                            the run configuration (Config.paper/tiny)
    fit, Fit, load                                    train over seeds; predict; save and load
    Backbone, make_backbone, flax_backbone            the backbone interface, the built-in ones
    Agent, dqn_agent, random_agent                    the agent interface, the built-in ones
    Method, methods                                   the method registry fit(method=...) reads
    ConfigError, DataError, InvalidDatasetError,      what bad input raises (all but DataError and
    CheckpointError, ResourceError, DivergenceError   DivergenceError are ValueErrors)

Layers (imports flow one way, left to right):
  config, treeutil, data -> graph -> backbones, agents -> mdp, fixed_depth -> methods -> api -> cli
  runtime (the Trainer interface, the runner over seeds, checkpoints, records) sits under mdp
  and fixed_depth and knows none of them. contrib/ builds on all of it; the core never imports it.
"""

from policy_gnn_jax import methods
from policy_gnn_jax.agents import Agent, dqn_agent, random_agent
from policy_gnn_jax.api import METHODS, Fit, fit, load
from policy_gnn_jax.backbones import Backbone, flax_backbone, make_backbone
from policy_gnn_jax.backbones.gcn import gcn_backbone
from policy_gnn_jax.config import Config, ConfigError
from policy_gnn_jax.data import (
    DataError,
    Dataset,
    InvalidDatasetError,
    from_arrays,
    from_jraph,
    load_dataset,
)
from policy_gnn_jax.methods import Method
from policy_gnn_jax.runtime.checkpoint import CheckpointError
from policy_gnn_jax.runtime.runner import DivergenceError, ResourceError

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
    "Method",
    "ResourceError",
    "dqn_agent",
    "fit",
    "flax_backbone",
    "from_arrays",
    "from_jraph",
    "gcn_backbone",
    "load",
    "load_dataset",
    "make_backbone",
    "methods",
    "random_agent",
]
