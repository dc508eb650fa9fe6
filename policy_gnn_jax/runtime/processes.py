"""Seeds over several processes (joined by `cluster.py`): which seeds each process runs, where
it checkpoints them, and the gather of every process's per-seed arrays.

Seeds never interact, so processes need no collective operation: each runs its own block of
the seeds on its local devices, and the per-seed arrays meet through the key-value store of
JAX's coordination service (the one `jax.distributed.initialize` starts). That works on every
backend (CPU processes included) and keeps each process's arrays local. Under `seed_mode="map"`
a seed's bits do not depend on which other seeds share its program, so a run over N processes
equals a one-process run bit for bit.
"""

from __future__ import annotations

import io
import itertools
import pathlib

import jax
import numpy as np

from policy_gnn_jax.config import ConfigError
from policy_gnn_jax.runtime import cluster


def seed_block(num_seeds: int) -> tuple[int, int]:
    """[low, high) of the seeds this process runs: contiguous blocks in process order, the
    first `num_seeds % count` one seed longer."""
    processes, me = cluster.count(), cluster.index()
    if num_seeds < processes:
        raise ConfigError(
            f"{num_seeds} seeds cannot be shared by {processes} processes: use at least "
            f"{processes} seeds, or fewer processes."
        )
    base, extra = divmod(num_seeds, processes)
    low = me * base + min(me, extra)
    return low, low + base + (1 if me < extra else 0)


def checkpoint_folder(directory) -> pathlib.Path:
    """Where this process checkpoints its seeds: `directory` in one process, else its own
    `process-I-of-N` folder inside (a rerun over another number of processes is refused there,
    `check_checkpoint_layout`)."""
    check_checkpoint_layout(directory)
    if cluster.count() == 1:
        return pathlib.Path(directory)
    return pathlib.Path(directory) / f"process-{cluster.index()}-of-{cluster.count()}"


def check_checkpoint_layout(directory) -> None:
    """Refuses a checkpoint folder written by a run over another number of processes: its
    seeds were split otherwise, so no process could resume its own block."""
    folder = pathlib.Path(directory)
    found = sorted(p.name for p in folder.glob("process-*-of-*")) if folder.is_dir() else []
    steps = [p.name for p in folder.iterdir() if p.name.isdigit()] if folder.is_dir() else []
    if steps and cluster.count() > 1:  # a one-process run's numbered steps
        raise ConfigError(
            f"{folder} holds the checkpoints of a run in one process (step {max(steps)}), this "
            f"run has {cluster.count()}: rerun it in one process to resume it, or use another "
            f"--checkpoint-dir."
        )
    others = [name for name in found if not name.endswith(f"-of-{cluster.count()}")]
    if others:
        total = others[0].rsplit("-", 1)[-1]
        also = f" (and of a one-process run: step {max(steps)})" if steps else ""
        raise ConfigError(
            f"{folder} holds the checkpoints of a run over {total} processes ({others[0]}){also}, "
            f"this run has {cluster.count()}: rerun it with --num-processes {total} to resume it, "
            f"or use another --checkpoint-dir."
        )


_GATHERS = itertools.count()


def gather(tree, run):
    """`tree` (arrays with a leading seed axis, the same structure in every process) of every
    process, joined along that axis in process order; every process gets the whole. One
    process: `tree` as it is. Every process must call it the same number of times.

    `run()` identifies what each process ran (e.g. the run's fingerprint; called only over
    several processes, as it may hash the whole dataset): processes started with different
    data, configs or seeds are refused here, not joined into one record."""
    if cluster.count() == 1:
        return tree
    tag = f"gather-{next(_GATHERS)}"  # the same in every process: they gather in one order
    leaves, treedef = jax.tree.flatten(tree)
    mine = _to_bytes([np.frombuffer(run().encode(), np.uint8), *leaves])
    cluster.publish(f"{tag}/{cluster.index()}", mine)
    parts = [_from_bytes(cluster.fetch(f"{tag}/{p}")) for p in range(cluster.count())]
    cluster.barrier(f"{tag}/read")  # no process leaves while another may still read its part
    runs = [bytes(part[0]).decode() for part in parts]
    other = next((p for p, r in enumerate(runs) if r != runs[0]), None)
    if other is not None:
        raise cluster.ProcessError(
            f"process {other} ran another run than process 0 (other data, config, method or "
            f"seeds): start every process with the same command, apart from --process-id."
        )
    joined = [
        np.concatenate(column, axis=0) for column in zip(*[p[1:] for p in parts], strict=True)
    ]
    return jax.tree.unflatten(treedef, joined)


def _to_bytes(leaves: list) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, *[np.asarray(leaf) for leaf in leaves])
    return buffer.getvalue()


def _from_bytes(blob: bytes) -> list[np.ndarray]:
    with np.load(io.BytesIO(blob), allow_pickle=False) as stored:
        return [stored[f"arr_{i}"] for i in range(len(stored.files))]
