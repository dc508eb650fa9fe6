"""What identifies a run, for its checkpoints and saved fits: the data, the config, the method,
the seeds and the seed mode, hashed (`run_fingerprint`) and by name (`run_identity`, so a refused
checkpoint can say what changed)."""

from __future__ import annotations

import dataclasses
import hashlib
import json

from policy_gnn_jax import data
from policy_gnn_jax.runtime import records


def run_fingerprint(
    ds: data.Dataset,
    config,
    method: str,
    seeds: int,
    seed: int,
    custom: tuple[str, ...] = (),
    seed_mode: str | None = None,
) -> str:
    """Identifies a run for its checkpoints and saved fits: same data, config (a `Config` or its
    saved dict), method, seeds and seed mode (the modes round differently, so a state of one
    cannot go on in the other), and which parts were the caller's own (a custom backbone or
    agent cannot be told apart by content)."""
    values = config if isinstance(config, dict) else dataclasses.asdict(config)
    parts = [ds.fingerprint(), values, method, seeds, seed]
    parts += [ds.num_classes]  # sizes the output layer; not in the arrays' fingerprint
    parts += [list(custom)] if custom else []
    parts += [seed_mode] if seed_mode is not None else []
    blob = json.dumps(parts, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def run_identity(
    ds: data.Dataset,
    config,
    method: str,
    seeds: int,
    seed: int,
    custom: tuple[str, ...] = (),
    seed_mode: str | None = None,
) -> dict:
    """What `run_fingerprint` hashes, by name and as JSON values: a checkpoint keeps it, so a
    refused one can say which of these changed."""
    values = config if isinstance(config, dict) else dataclasses.asdict(config)
    identity = {
        "dataset": f"{ds.name} (fingerprint {ds.fingerprint()[:12]})",
        "classes": ds.num_classes,
        "method": method,
        "seeds": seeds,
        "seed": seed,
        "seed_mode": seed_mode,
        "own parts": list(custom),
        **{f"config {name}": value for name, value in values.items()},
    }
    return json.loads(json.dumps(identity))


def checkpoint_key(*run) -> tuple[str, dict]:
    """(fingerprint, identity) of a run's checkpoints: the run's, and this process's XLA_FLAGS
    where set, since they change the compiled kernels and so a resume's bits (unset: the run's
    fingerprint as it is)."""
    fingerprint, identity = run_fingerprint(*run), run_identity(*run)
    flags = records.xla_flags()
    if flags is None:
        return fingerprint, identity
    keyed = hashlib.sha256(f"{fingerprint} XLA_FLAGS={flags}".encode()).hexdigest()
    return keyed, {**identity, "XLA_FLAGS": flags}
