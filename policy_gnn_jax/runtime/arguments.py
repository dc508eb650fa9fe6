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
    """JAX settings the library's programs cannot run under, refused in one sentence each
    (else they fail deep inside a trace, or silently compute otherwise)."""
    if jax.config.jax_enable_x64:  # every program is written, and checked, in 32 bits
        raise config_lib.ConfigError(
            "64-bit JAX is on (JAX_ENABLE_X64 or jax.config.update('jax_enable_x64', True)): "
            "policy-gnn-jax computes in 32 bits, and its results would silently differ. Turn it "
            "off for this process."
        )
    for name in ("jax_transfer_guard", "jax_transfer_guard_host_to_device",
                 "jax_transfer_guard_device_to_host"):  # fmt: skip
        if getattr(jax.config, name, None) == "disallow":  # the library moves arrays implicitly
            raise config_lib.ConfigError(
                f"JAX's {name.upper()}=disallow (or jax.config.update({name!r}, 'disallow')) is "
                f"set: the library moves arrays between host and device implicitly, which it "
                f"forbids. Unset it, or use 'log' to see the transfers."
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
    # The library's code relies on numpy's broadcasting and type promotion.
    strict = {
        "jax_numpy_rank_promotion": ("raise", "JAX_NUMPY_RANK_PROMOTION", "allow"),
        "jax_numpy_dtype_promotion": ("strict", "JAX_NUMPY_DTYPE_PROMOTION", "standard"),
    }
    for name, (refused, variable, usual) in strict.items():
        if getattr(jax.config, name) == refused:
            raise config_lib.ConfigError(
                f"JAX's strict mode {variable}={refused} (or jax.config.update({name!r}, "
                f"{refused!r})) is on: policy-gnn-jax's programs use numpy's usual rules. Set it "
                f"to {usual!r} for this process (your own code can keep it inside "
                f"jax.{name[4:]}({refused!r}))."
            )
