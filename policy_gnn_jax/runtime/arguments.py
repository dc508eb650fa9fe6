"""What `fit` (and `split_sweep.fit_splits`) is given, checked before anything is built: a
wrong type would otherwise fail deep inside JAX, or after the first chunk has trained."""

from __future__ import annotations

import jax
import numpy as np

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import data
from policy_gnn_jax.runtime import seed_axis


def check_fit_arguments(
    dataset, config, seeds, progress, checkpoint_every, devices, seed_mode, seed
):
    """What `fit` is given, checked before anything is built (a wrong type would otherwise
    fail deep inside JAX, or after the first chunk has trained). Returns seed, seeds and
    progress as Python's int and bool (numpy's are welcome; the record is JSON), and the seed
    mode the run uses (None: the backend's, `seed_axis.seed_mode_for`)."""
    if isinstance(seed, bool | np.bool_):
        raise config_lib.ConfigError(f"seed must be a whole number, got {seed!r}.")
    if not isinstance(dataset, data.Dataset):
        raise data.InvalidDatasetError(
            f"dataset must be a policy_gnn_jax.Dataset (from_arrays, from_jraph, load_dataset), "
            f"got {type(dataset).__name__}."
        )
    if not isinstance(config, config_lib.Config):
        raise config_lib.ConfigError(
            f"config must be a policy_gnn_jax.Config, got {type(config).__name__}: build one "
            f"with Config(**values) or Config.paper(**overrides)."
        )
    for name, value in {"seeds": seeds, "checkpoint_every": checkpoint_every}.items():
        if not _whole(value) or value < 1:
            raise config_lib.ConfigError(f"{name} must be a whole number >= 1, got {value!r}.")
    if devices is not None and (not _whole(devices) or devices < 1):
        raise config_lib.ConfigError(
            f"devices must be None or a whole number >= 1, got {devices!r}."
        )
    check_jax_modes()
    if not isinstance(progress, (bool, np.bool_)):  # numpy's bools are True or False too
        raise config_lib.ConfigError(f"progress must be True or False, got {progress!r}.")
    if seed_mode is not None and seed_mode not in seed_axis.SEED_MODES:
        raise config_lib.ConfigError(
            f"seed_mode must be one of {seed_axis.SEED_MODES} or None, got {seed_mode!r}."
        )
    seed = int(seed) if isinstance(seed, np.integer) else seed
    return seed, int(seeds), bool(progress), seed_axis.seed_mode_for(seed_mode)


def _whole(value) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def check_jax_modes() -> None:
    """JAX settings under which a run would silently compute otherwise than its record says,
    refused in one sentence each. JAX's debugging and strict modes are out of scope
    (docs/reliability.md): they fail as JAX reports them."""
    if jax.config.jax_enable_x64:  # every program is written, and checked, in 32 bits
        raise config_lib.ConfigError(
            "64-bit JAX is on (JAX_ENABLE_X64 or jax.config.update('jax_enable_x64', True)): "
            "policy-gnn-jax computes in 32 bits, and its results would silently differ. Turn it "
            "off for this process."
        )
    # A seed names its run only under JAX's default random numbers: these settings make every
    # draw another, in a record that could not say so.
    random_settings = {
        "jax_default_prng_impl": ("JAX_DEFAULT_PRNG_IMPL", "threefry2x32"),
        "jax_random_seed_offset": ("JAX_RANDOM_SEED_OFFSET", 0),
        "jax_threefry_partitionable": ("JAX_THREEFRY_PARTITIONABLE", True),
    }
    for name, (variable, usual) in random_settings.items():
        if getattr(jax.config, name, usual) != usual:
            raise config_lib.ConfigError(
                f"JAX's {variable}={getattr(jax.config, name)} (or jax.config.update({name!r}, "
                f"...)) is set: every random draw would differ from the seed's run, so a result "
                f"could not be reproduced from its record. Unset it (JAX's default is {usual!r}) "
                f"for this process."
            )
