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
  config, metrics, data -> graph -> backbones, agents -> mdp, fixed_depth -> methods -> fits
  -> api, loading -> split_sweep (several splits as one program) -> cli
  runtime (the Trainer interface, the runner over seeds, checkpoints, records) sits under mdp
  and fixed_depth and knows none of them. contrib/ builds on all of it; the core never imports it.
"""

import importlib
import threading

# name -> (module, attribute; None: the module itself). Imported on first use, so `import
# policy_gnn_jax.cli` starts without JAX and the command can catch a Ctrl-C while it loads.
_EXPORTS = {
    "methods": ("policy_gnn_jax.methods", None),
    "Method": ("policy_gnn_jax.methods", "Method"),
    "Agent": ("policy_gnn_jax.agents", "Agent"),
    "dqn_agent": ("policy_gnn_jax.agents", "dqn_agent"),
    "random_agent": ("policy_gnn_jax.agents", "random_agent"),
    "METHODS": ("policy_gnn_jax.api", "METHODS"),
    "Fit": ("policy_gnn_jax.fits", "Fit"),
    "fit": ("policy_gnn_jax.api", "fit"),
    "load": ("policy_gnn_jax.loading", "load"),
    "Backbone": ("policy_gnn_jax.backbones", "Backbone"),
    "flax_backbone": ("policy_gnn_jax.backbones", "flax_backbone"),
    "make_backbone": ("policy_gnn_jax.backbones", "make_backbone"),
    "gcn_backbone": ("policy_gnn_jax.backbones", "gcn_backbone"),
    "Config": ("policy_gnn_jax.config", "Config"),
    "ConfigError": ("policy_gnn_jax.config", "ConfigError"),
    "DataError": ("policy_gnn_jax.data", "DataError"),
    "Dataset": ("policy_gnn_jax.data", "Dataset"),
    "InvalidDatasetError": ("policy_gnn_jax.data", "InvalidDatasetError"),
    "from_arrays": ("policy_gnn_jax.data", "from_arrays"),
    "from_jraph": ("policy_gnn_jax.data", "from_jraph"),
    "load_dataset": ("policy_gnn_jax.data", "load_dataset"),
    "CheckpointError": ("policy_gnn_jax.runtime.checkpoint", "CheckpointError"),
    "DivergenceError": ("policy_gnn_jax.runtime.runner", "DivergenceError"),
    "ResourceError": ("policy_gnn_jax.runtime.memory", "ResourceError"),
}


# JAX's own imports are not safe from several threads at once: first uses take turns.
_IMPORTING = threading.RLock()


# The subpackages and modules, each an attribute on first use too (`pg.data.write_csbm`).
_SUBMODULES = ("agents", "api", "backbones", "cli", "config", "contrib", "data", "fits",
               "fixed_depth", "graph", "mdp", "methods", "metrics", "runtime",
               "split_sweep")  # fmt: skip


def __getattr__(name: str):
    if name in _SUBMODULES:
        with _IMPORTING:
            return importlib.import_module(f"policy_gnn_jax.{name}")  # sets the attribute
    if name not in _EXPORTS:
        raise AttributeError(f"module 'policy_gnn_jax' has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    with _IMPORTING:
        value = importlib.import_module(module)
    value = value if attribute is None else getattr(value, attribute)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS) | set(_SUBMODULES))


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
