"""Runs a trainer over many seeds as one jitted vmap, in chunks so a progress bar can advance."""

from __future__ import annotations

import jax
import numpy as np
from tqdm.auto import tqdm


def seed_keys(seed: int, num_seeds: int) -> jax.Array:
    """One independent typed PRNG key per seed, all derived from `seed`."""
    return jax.random.split(jax.random.key(seed), num_seeds)


def run_vmapped(
    init,
    train_chunk,
    evaluate,
    keys: jax.Array,
    num_chunks: int,
    desc: str = "training",
    unit: str = "chunk",
    progress: bool = True,
):
    """init -> train_chunk x num_chunks -> evaluate, each `jax.jit(jax.vmap(.))` over seeds.

    Args:
      init: key -> state.
      train_chunk: state -> (state, metrics with a leading time axis).
      evaluate: state -> dict of per-seed results.
      keys: [S] typed keys.
      num_chunks: how many times to call train_chunk.
      desc, unit, progress: the progress bar.

    Returns:
      (final state, metrics as numpy [S, T, ...] over all chunks, evaluate's dict as numpy).
    """
    init_v = jax.jit(jax.vmap(init))
    chunk_v = jax.jit(jax.vmap(train_chunk), donate_argnums=0)
    eval_v = jax.jit(jax.vmap(evaluate))
    state = init_v(keys)
    chunks = []
    # disable=None: tqdm turns itself off when stderr is not a terminal (logs stay readable).
    bar = tqdm(
        range(num_chunks), desc=desc, unit=unit, leave=False, disable=None if progress else True
    )
    for _ in bar:
        state, metrics = chunk_v(state)
        chunks.append(jax.tree.map(np.asarray, metrics))
    metrics = jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *chunks)
    _check_finite(metrics)
    results = jax.tree.map(np.asarray, eval_v(state))
    return state, metrics, results


def run_trainer(trainer, keys: jax.Array, **kwargs):
    """`run_vmapped` for any trainer with init / train_chunk / evaluate / num_chunks fields."""
    return run_vmapped(
        trainer.init, trainer.train_chunk, trainer.evaluate, keys, trainer.num_chunks, **kwargs
    )


def _check_finite(metrics) -> None:
    for name, value in metrics.items():
        if np.issubdtype(value.dtype, np.floating) and not np.all(np.isfinite(value)):
            bad = np.argwhere(~np.isfinite(value))[0]
            raise FloatingPointError(
                f"NaN/inf in training metric {name!r} (seed index {bad[0]}, step {bad[1]}). "
                f"Lower the learning rates (--gcn-lr, --q-lr) or check the input features."
            )
