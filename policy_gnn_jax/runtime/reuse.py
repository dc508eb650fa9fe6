"""Which saved run a command that resumes (a `--splits` sweep, the heterophily study) may reuse:
this run's, undamaged, and made under this process's XLA flags."""

from __future__ import annotations

import sys

from policy_gnn_jax import data
from policy_gnn_jax.runtime import records, saved_fit, seed_axis
from policy_gnn_jax.runtime.outputs import CheckpointError


def reusable_record(
    folder,
    ds: data.Dataset,
    config,
    method: str,
    seeds: int,
    seed: int,
    seed_mode: str | None,
    overwrite: bool,
    what: str = "run",
) -> dict | None:
    """`saved_fit.saved_record_of` for a command that reuses saved runs: a damaged one, or one
    made under other XLA flags, is trained again (with a warning if damaged) under --overwrite,
    else refused with what to do. A None `seed_mode` is the backend's
    (`seed_axis.seed_mode_for`)."""
    seed_mode = seed_axis.seed_mode_for(seed_mode)
    try:
        record = saved_fit.saved_record_of(folder, ds, config, method, seeds, seed, seed_mode)
    except CheckpointError as err:
        if overwrite:
            print(f"warning: {folder} cannot be reused; it is trained again ({err})",
                  file=sys.stderr)  # fmt: skip
            return None
        raise CheckpointError(
            f"{folder} holds a {what} that cannot be reused, damaged or of another version "
            f"({err}) Delete {folder}, or pass --overwrite to train it again."
        ) from None
    if record is None:
        return None
    versions = record.get("versions")
    recorded = isinstance(versions, dict) and "xla_flags" in versions
    made = records.xla_flags(versions["xla_flags"]) if recorded else None
    now = records.xla_flags()
    if recorded and made == now:
        return record
    if overwrite:
        return None
    # The flags change the compiled kernels and so the bits: reused, it would mix two programs'
    # numbers in one sweep that its command could not reproduce.
    how = f"made under XLA_FLAGS={made!r}" if recorded else "that does not record its XLA_FLAGS"
    raise CheckpointError(
        f"{folder} holds this {what} {how}, and this process has XLA_FLAGS={now!r}: the flags "
        f"change the compiled kernels and so the numbers. Run with the flags it was made under, "
        f"choose another folder, or pass --overwrite to train it again."
    )
