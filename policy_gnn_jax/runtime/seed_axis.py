"""The seed axis of a run: one key per seed, how the seeds run (batched or one after another),
and how they spread over devices. Seeds never interact, so each runs its own loop."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from policy_gnn_jax.runtime.memory import ResourceError

MAX_SEED = 2**32 - 1


def seed_keys(seed: int, num_seeds: int) -> jax.Array:
    """One independent typed PRNG key per seed, all derived from `seed`."""
    if not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED:
        raise ResourceError(f"seed must be an integer in 0..{MAX_SEED}, got {seed!r}.")
    if not isinstance(num_seeds, (int, np.integer)) or not 1 <= num_seeds <= 2**31 - 1:
        raise ResourceError(
            f"the number of seeds must be a whole number in 1..{2**31 - 1}, got {num_seeds!r}."
        )
    return jax.random.split(jax.random.key(seed), num_seeds)


def check_devices(devices: int, name: str = "devices") -> None:
    """`devices` (the argument `name`) must be a count of this process's local devices."""
    count = len(jax.local_devices())
    if not 1 <= devices <= count:
        raise ResourceError(f"{name} must be in 1..{count} (the local devices), got {devices}.")


def seed_sharding(num_seeds: int, devices: int | None = None) -> NamedSharding | None:
    """The seed axis split over local devices: a one-axis `Mesh` ("seeds") and the
    `NamedSharding` that puts each device's share of seeds on it; None on one device.

    Seeds never interact, so every device runs its seeds' whole loop with no communication, and
    each seed's arithmetic is the same as on one device. Uses the most devices (at most
    `devices`, default all local ones) that divide the seeds evenly: 10 seeds on 8 devices use 5.
    On several hosts, call `jax.distributed.initialize()` first (docs/scale.md).
    """
    available = jax.local_devices()
    if devices is not None:
        check_devices(devices)
    limit = devices or len(available)
    count = max(d for d in range(1, limit + 1) if num_seeds % d == 0)
    if count == 1:
        return None
    mesh = Mesh(np.array(available[:count]), ("seeds",))
    return NamedSharding(mesh, PartitionSpec("seeds"))


SEED_MODES = ("vmap", "map")


def seed_mode_for(mode: str | None) -> str:
    """The seed mode a run uses: `mode`, or where it is None "map" on a CPU, where Policy-GNN's
    step measured 1.7x cheaper mapped, and "vmap" on an accelerator, where batching pays
    (docs/performance.md, "Batched and mapped seeds"; the fixed-depth GCN costs the same either
    way on a CPU)."""
    if mode is None:
        return "map" if jax.default_backend() == "cpu" else "vmap"
    if mode not in SEED_MODES:
        raise ResourceError(f"seed mode must be one of {SEED_MODES} or None, got {mode!r}.")
    return mode


def over_seeds(fn, mode: str, sharding: NamedSharding | None):
    """`fn(data, x)` (one seed's `x`) over a leading seed axis of `x`, every seed reading the
    same `data`: batched (`vmap`) or one seed after another (`map`), and with a sharding, each
    device running its own seeds (`shard_map`, `data` replicated).

    "map" makes a seed's bits independent of how many seeds and devices run: XLA vectorises a
    batched reduction differently for different batch sizes (a sum over rows of [64, 16] rounds
    differently under vmap batches of 1, 2 and 8 on the CPU), so under "vmap" a seed's bits
    depend on the seeds per device. On a CPU "map" is also the faster (`seed_mode_for`): a
    mapped seed skips the backbone's work on the steps where it does not train, which a batched
    one computes and discards.
    """
    if mode not in SEED_MODES:
        raise ResourceError(f"seed mode must be one of {SEED_MODES}, got {mode!r}.")
    if mode == "vmap":
        batched = jax.vmap(fn, in_axes=(None, 0))
    else:
        batched = functools.partial(_map_seeds, fn)
    if sharding is None:
        return batched
    spec = sharding.spec
    # check_vma off: the graph, the same on every device, mixes into per-seed carries, which
    # the replication checker cannot type.
    return jax.shard_map(
        batched,
        mesh=sharding.mesh,
        in_specs=(PartitionSpec(), spec),
        out_specs=spec,
        check_vma=False,
    )


def _map_seeds(fn, data, xs):
    """`fn` over the seeds one after another, as a loop of the same form for any number of
    seeds, so that XLA compiles the body alike and a seed's bits do not depend on the count: the
    trip count passes an optimisation barrier (XLA removes a loop it knows runs once and
    compiles the body with what surrounds it), and a single seed sits in two slots (XLA turns a
    slice of an axis of one into a reshape). Either rounds differently (measured: one seed of a
    run over 3 processes, alone in its process, trained another Q-network than in a one-process
    run). The second slot is never computed."""
    one_seed = functools.partial(fn, data)
    count = jax.tree.leaves(xs)[0].shape[0]
    if count == 1:
        xs = jax.tree.map(lambda x: jnp.concatenate([x, x]), xs)
    shapes, treedef = jax.tree.flatten(jax.eval_shape(one_seed, jax.tree.map(lambda x: x[0], xs)))

    def seed(i, done):
        out = jax.tree.leaves(one_seed(jax.tree.map(lambda x: x[i], xs)))
        return [d.at[i].set(o) for d, o in zip(done, out, strict=True)]

    empty = [jnp.zeros((max(count, 2), *s.shape), s.dtype) for s in shapes]
    trips = jax.lax.optimization_barrier(jnp.int32(count))
    done = jax.lax.fori_loop(0, trips, seed, empty)
    return jax.tree.unflatten(treedef, [d[:count] for d in done])
