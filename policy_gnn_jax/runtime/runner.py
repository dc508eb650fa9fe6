"""Drives a `trainer.Trainer` over many seeds: one jitted program, in chunks, with a progress bar.

Around the compiled loop it does what a long run needs and nothing inside jit can:
- exactly the episodes (or epochs) asked for: full chunks, then one shorter last chunk;
- a memory check before anything is allocated (`memory.check_memory`);
- a divergence check after every chunk: NaN/inf in any metric or any trained parameter stops
  the run with the episode and the learning rate to lower;
- checkpoints every few chunks (`checkpoint.Checkpointer`) and resume after a crash.
"""

from __future__ import annotations

import functools
import signal

import jax
import numpy as np
from tqdm.auto import tqdm

from policy_gnn_jax.runtime import checkpoint as checkpoint_lib
from policy_gnn_jax.runtime import compilation
from policy_gnn_jax.runtime.divergence import (  # noqa: F401 (DivergenceError: re-exported)
    DivergenceError,
    find_divergence,
)
from policy_gnn_jax.runtime.memory import (
    ResourceError,
    available_memory_bytes,
    check_memory,
    host_devices_for,
)
from policy_gnn_jax.runtime.seed_axis import over_seeds, seed_mode_for, seed_sharding
from policy_gnn_jax.runtime.trainer import Trainer


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's stop, `kill`), SIGHUP (a closed terminal or ssh session) or
    SIGQUIT, handled as Ctrl-C: one line, nothing half-written, exit status 143."""


# The stop signal the command's handler received (`cli.process`). Its KeyboardInterrupt can be
# dropped where Python cannot raise it (JAX's garbage-collection callback prints "Exception
# ignored" and goes on), so the runner also checks after every chunk: a stop is never lost.
stop_signal: list[int] = []


def raise_if_stopped() -> None:
    if stop_signal:
        raise KeyboardInterrupt if stop_signal[0] == signal.SIGINT else Terminated


def chunk_lengths(total: int, per_call: int) -> list[int]:
    """Full chunks of `per_call`, then the remainder: exactly `total` units."""
    lengths = [per_call] * (total // per_call)
    return lengths + ([total % per_call] if total % per_call else [])


def run_trainer(
    trainer: Trainer,
    keys: jax.Array,
    *,
    desc: str = "training",
    progress: bool = True,
    hints: dict | None = None,
    checkpoint: checkpoint_lib.Checkpointer | None = None,
    checkpoint_every: int = 5,
    devices: int | None = None,
    seed_mode: str | None = None,
    compiler_options: dict | None = None,
    matmul_precision: str | None = "highest",
):
    """init -> train_chunk ... -> evaluate, each compiled over the seeds (`build_programs`),
    the seed axis sharded over the local devices (`seed_sharding`).

    Args:
      trainer: what to run.
      keys: [S] typed keys.
      desc, progress: the progress bar.
      hints: {"backbone": ..., "agent": ...}: the fix a divergence message gives per network.
      checkpoint: resume from it if it holds a checkpoint of this run, and save to it.
      checkpoint_every: save every this many chunks (and after the last one).
      devices: shard the seeds over at most this many local devices (default: all).
      seed_mode: "vmap" (batched), "map" (a seed's bits independent of the seed and device
        counts; `over_seeds`) or None (the faster on this backend, `seed_mode_for`).
      compiler_options, matmul_precision: how every program is compiled (`compilation`).

    Returns:
      (final state, metrics as numpy [S, total, ...], evaluate's results as numpy).
    """
    compilation.use_persistent_cache()
    lengths = chunk_lengths(trainer.total, trainer.per_call)
    data = trainer.data
    mode = seed_mode_for(seed_mode)
    sharding, keys, programs, main = _programs_that_fit(
        trainer, keys, lengths, devices, mode, compiler_options, matmul_precision
    )
    run_chunk = {n: main if n == lengths[0] else p for n, p in programs["chunks"].items()}
    if checkpoint is not None and mode == "vmap":
        # A batched seed's bits depend on the seeds each device batches: a resume must match.
        checkpoint.seed_devices = 1 if sharding is None else sharding.mesh.size
    start, done, state, chunks = _start(trainer, checkpoint, programs, lengths[0], sharding)
    if state is None:
        state = programs["init"](data, keys)
    # disable=None: tqdm turns itself off when stderr is not a terminal (logs stay readable).
    bar = tqdm(total=trainer.total, initial=done, desc=desc, unit=trainer.unit, leave=False,
               disable=None if progress else True)  # fmt: skip
    try:
        for index in range(start, len(lengths)):
            raise_if_stopped()
            state, metrics = run_chunk[lengths[index]](data, state)
            metrics = jax.tree.map(np.asarray, metrics)
            message = find_divergence(metrics, done, trainer.unit, hints or {})
            if message:
                raise DivergenceError(message)
            chunks.append(metrics)
            done += lengths[index]
            bar.update(lengths[index])
            last = index + 1 == len(lengths)
            if checkpoint is not None and ((index + 1) % checkpoint_every == 0 or last):
                chunks = [_concat(chunks)]  # keep it joined: the next save adds only new chunks
                checkpoint.save(index + 1, done, state, chunks[0])
    finally:
        bar.close()
    results = jax.tree.map(np.asarray, programs["evaluate"](data, state))
    raise_if_stopped()  # a stop noted where it could not be raised (`cli.process._stop`)
    return state, _concat(chunks), results


def _programs_that_fit(trainer, keys, lengths, devices, mode, options, precision):
    """(sharding, keys on it, programs, first chunk compiled) over at most `devices` devices."""
    limit = devices or host_devices_for(trainer.data, mode)
    while True:
        sharding = seed_sharding(keys.shape[0], limit)
        seeds = functools.partial(over_seeds, mode=mode, sharding=sharding)
        placed = keys if sharding is None else jax.device_put(keys, sharding)
        programs = build_programs(trainer, placed, seeds, sharding, lengths, options, precision)
        main = programs["chunks"][lengths[0]].compile(trainer.data, programs["state_like"])
        cpu = sharding is not None and jax.default_backend() == "cpu"  # one memory shared
        copies = sharding.mesh.size if cpu else 1
        try:
            check_memory(main, keys.shape[0], available_memory_bytes(),
                         programs["resident_bytes"], copies)  # fmt: skip
            return sharding, placed, programs, main
        except ResourceError:
            if copies == 1 or devices is not None:
                raise
            limit = 1  # host devices chosen here that do not fit together: one device may


def _start(trainer, checkpoint, programs, main_length: int, sharding):
    """(next chunk index, units done, state or None, metrics so far): from `checkpoint` if it
    holds this run, else from the beginning."""
    if checkpoint is None:
        return 0, 0, None, []
    state_like = programs["state_like"]
    chunk_metrics = programs["chunks"][main_length].eval_shape(trainer.data, state_like)[1]

    def metrics_like(units):
        return jax.tree.map(
            lambda m: jax.ShapeDtypeStruct((m.shape[0], units, *m.shape[2:]), m.dtype),
            chunk_metrics,
        )

    restored = checkpoint.restore(state_like, metrics_like)
    if restored is None:
        return 0, 0, None, []
    start, done, state, metrics_so_far = restored
    if sharding is not None:
        state = jax.device_put(state, sharding)
    print(
        f"resuming from {checkpoint.directory}: {done} of {trainer.total} {trainer.unit}s "
        f"already done",
        flush=True,
    )
    return start, done, state, [metrics_so_far]


def build_programs(
    trainer: Trainer,
    keys,
    seeds,
    sharding,
    lengths: list[int],
    compiler_options: dict | None = None,
    matmul_precision: str | None = "highest",
) -> dict:
    """The run's compiled programs over the seeds (`compilation.Program`), each taking the
    trainer's `data` first: "init" (data, keys -> state), "chunks" (one per chunk length, data,
    state -> (state, metrics)) and "evaluate" (data, state -> results); "state_like", the
    state's shapes; and "resident_bytes", the size of `data` (in memory before a run)."""
    options = dict(options=compiler_options, precision=matmul_precision)
    data = trainer.data
    init = compilation.Program(seeds(trainer.init), **options)
    state_like = init.eval_shape(data, keys)
    if sharding is not None:  # the compiled chunk expects its input spread over the devices
        state_like = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), state_like
        )
    chunks = {
        n: compilation.Program(
            seeds(functools.partial(trainer.train_chunk, length=n)), donate=(1,), **options
        )
        for n in sorted(set(lengths))
    }
    evaluate = compilation.Program(seeds(trainer.evaluate), **options)
    return {
        "init": init,
        "chunks": chunks,
        "evaluate": evaluate,
        "state_like": state_like,
        "resident_bytes": sum(int(getattr(x, "nbytes", 0)) for x in jax.tree.leaves(data)),
    }


def _concat(chunks: list) -> dict:
    if len(chunks) == 1:
        return chunks[0]
    return jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *chunks)
