"""Drives a `trainer.Trainer` over many seeds: one jitted vmap, in chunks, with a progress bar.

Around the compiled loop it does what a long run needs and nothing inside jit can:
- exactly the episodes (or epochs) asked for: full chunks, then one shorter last chunk;
- a memory check before anything is allocated (the compiled chunk's own memory analysis);
- a divergence check after every chunk: NaN/inf in any metric or any trained parameter stops
  the run with the episode and the learning rate to lower;
- checkpoints every few chunks (`checkpoint.Checkpointer`) and resume after a crash.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from tqdm.auto import tqdm

from policy_gnn_jax import checkpoint as checkpoint_lib
from policy_gnn_jax.trainer import Trainer

MAX_SEED = 2**32 - 1

# Which network a metric watches, for the divergence message.
_SOURCE = {"agent_finite": "agent", "td_loss": "agent", "bandit_loss": "agent"}
_FLAG_METRICS = ("backbone_finite", "agent_finite")


class DivergenceError(FloatingPointError):
    """Training produced NaN/inf. The message names the episode and the learning rate to lower."""


class ResourceError(ValueError):
    """The run cannot fit this machine (e.g. too many seeds for the memory). Says what to do."""


def seed_keys(seed: int, num_seeds: int) -> jax.Array:
    """One independent typed PRNG key per seed, all derived from `seed`."""
    if not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED:
        raise ResourceError(f"seed must be an integer in 0..{MAX_SEED}, got {seed!r}.")
    if not isinstance(num_seeds, (int, np.integer)) or num_seeds < 1:
        raise ResourceError(f"the number of seeds must be an integer >= 1, got {num_seeds!r}.")
    return jax.random.split(jax.random.key(seed), num_seeds)


def chunk_lengths(total: int, per_call: int) -> list[int]:
    """Full chunks of `per_call`, then the remainder: exactly `total` units."""
    lengths = [per_call] * (total // per_call)
    return lengths + ([total % per_call] if total % per_call else [])


def available_memory_bytes() -> int | None:
    """Free memory of the default device (GPU: its allocator's limit; CPU: MemAvailable)."""
    stats = jax.devices()[0].memory_stats() if jax.default_backend() != "cpu" else None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_memory(compiled, num_seeds: int, available: int | None) -> None:
    """Refuses a run whose compiled chunk needs more memory than the device has free."""
    analysis = compiled.memory_analysis()
    if analysis is None or available is None:
        return
    needed = (
        analysis.argument_size_in_bytes
        + analysis.output_size_in_bytes
        - analysis.alias_size_in_bytes
        + analysis.temp_size_in_bytes
    )
    if needed > 0.9 * available:
        per_seed = needed / num_seeds
        fits = max(0, int(0.9 * available // max(per_seed, 1)))
        raise ResourceError(
            f"{num_seeds} seeds need about {needed / 2**30:.1f} GiB ({per_seed / 2**20:.1f} MiB "
            f"per seed) but about {available / 2**30:.1f} GiB is free: use at most {fits} seeds "
            f"(--seeds), or run the sweep in several commands with different --seed."
        )


def find_divergence(metrics: dict, offset: int, unit: str, hints: dict) -> str | None:
    """The first NaN/inf (or non-finite parameters) in a chunk's metrics [S, T, ...], as a
    message naming the unit (1-based, counted over the whole run) and the fix; else None."""
    first = None  # (t, priority, seed, name)
    for name, value in metrics.items():
        if name in _FLAG_METRICS:
            bad = ~value.astype(bool)
        elif np.issubdtype(value.dtype, np.floating):
            bad = ~np.isfinite(value)
            bad = bad.reshape(bad.shape[:2] + (-1,)).any(-1)
        else:
            continue
        if bad.any():
            where = np.argwhere(bad)  # [k, (seed, t)]
            seed, t = where[np.argmin(where[:, 1])]
            # At one step, the backbone is blamed first: a NaN backbone makes NaN agent inputs.
            rank = _FLAG_METRICS.index(name) if name in _FLAG_METRICS else len(_FLAG_METRICS)
            candidate = (int(t), rank, int(seed), name)
            first = min(first, candidate) if first else candidate
    if first is None:
        return None
    t, _, seed, name = first
    what = (
        f"the {name.removesuffix('_finite')}'s parameters became NaN/inf"
        if name in _FLAG_METRICS
        else f"the training metric {name!r} became NaN/inf"
    )
    fix = hints.get(_SOURCE.get(name, "backbone"), "lower the learning rates")
    return f"training diverged in {unit} {offset + t + 1} (seed index {seed}): {what}. {fix}."


def run_trainer(
    trainer: Trainer,
    keys: jax.Array,
    *,
    desc: str = "training",
    progress: bool = True,
    hints: dict | None = None,
    checkpoint: checkpoint_lib.Checkpointer | None = None,
    checkpoint_every: int = 5,
):
    """init -> train_chunk ... -> evaluate, each `jax.jit(jax.vmap(.))` over the seeds.

    Args:
      trainer: what to run.
      keys: [S] typed keys.
      desc, progress: the progress bar.
      hints: {"backbone": ..., "agent": ...}: the fix a divergence message gives per network.
      checkpoint: resume from it if it holds a checkpoint of this run, and save to it.
      checkpoint_every: save every this many chunks (and after the last one).

    Returns:
      (final state, metrics as numpy [S, total, ...], evaluate's results as numpy).
    """
    num_seeds = keys.shape[0]
    lengths = chunk_lengths(trainer.total, trainer.per_call)
    chunk_fns = {
        n: jax.jit(jax.vmap(functools.partial(trainer.train_chunk, length=n)), donate_argnums=0)
        for n in set(lengths)
    }
    init_v = jax.jit(jax.vmap(trainer.init))
    state_like = jax.eval_shape(init_v, keys)
    # Compiling the main chunk ahead of time gives its exact memory need before any allocation.
    main = chunk_fns[lengths[0]].lower(state_like).compile()
    check_memory(main, num_seeds, available_memory_bytes())
    compiled = {lengths[0]: main}

    start, done, state, metrics_so_far = 0, 0, None, None
    if checkpoint is not None:
        chunk_metrics = jax.eval_shape(chunk_fns[lengths[0]], state_like)[1]

        def metrics_like(units):
            return jax.tree.map(
                lambda m: jax.ShapeDtypeStruct((m.shape[0], units, *m.shape[2:]), m.dtype),
                chunk_metrics,
            )

        restored = checkpoint.restore(state_like, metrics_like)
        if restored is not None:
            start, done, state, metrics_so_far = restored
            print(
                f"resuming from {checkpoint.directory}: {done} of {trainer.total} "
                f"{trainer.unit}s already done",
                flush=True,
            )
    if state is None:
        state = init_v(keys)
    chunks = [metrics_so_far] if metrics_so_far is not None else []
    # disable=None: tqdm turns itself off when stderr is not a terminal (logs stay readable).
    bar = tqdm(
        total=trainer.total,
        initial=done,
        desc=desc,
        unit=trainer.unit,
        leave=False,
        disable=None if progress else True,
    )
    for index in range(start, len(lengths)):
        n = lengths[index]
        fn = compiled.get(n) or chunk_fns[n]
        state, metrics = fn(state)
        metrics = jax.tree.map(np.asarray, metrics)
        message = find_divergence(metrics, done, trainer.unit, hints or {})
        if message:
            bar.close()
            raise DivergenceError(message)
        chunks.append(metrics)
        done += n
        bar.update(n)
        if checkpoint is not None and (
            (index + 1) % checkpoint_every == 0 or index + 1 == len(lengths)
        ):
            chunks = [_concat(chunks)]  # keep it joined: the next save adds only new chunks
            checkpoint.save(index + 1, done, state, chunks[0])
    bar.close()
    results = jax.tree.map(np.asarray, jax.jit(jax.vmap(trainer.evaluate))(state))
    return state, _concat(chunks), results


def _concat(chunks: list) -> dict:
    if len(chunks) == 1:
        return chunks[0]
    return jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *chunks)


def learning_rate_hints(config, method: str = "policy-gnn") -> dict:
    """The divergence fix per network, naming the CLI flag and the Config field."""
    agent = f"Lower the Q-network learning rate (--q-lr / Config.q_lr, now {config.q_lr:g})"
    if method == "policy-gnn-plus":
        agent = f"Lower the bandit's learning rate (Config.plus_lr, now {config.plus_lr:g})"
    return {
        "backbone": (
            f"Lower the GCN learning rate (--gcn-lr / Config.gcn_lr, now {config.gcn_lr:g})"
        ),
        "agent": agent,
    }
