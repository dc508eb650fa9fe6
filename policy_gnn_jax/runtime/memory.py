"""What a run needs of this machine's memory, checked before anything is allocated: the compiled
chunk's own memory analysis against the free memory, and how many host devices the graph's
copies fit in."""

from __future__ import annotations

import jax


class ResourceError(ValueError):
    """The run cannot fit this machine (e.g. too many seeds for the memory). Says what to do."""


def available_memory_bytes() -> int | None:
    """Free memory of the default device (GPU: its allocator's limit; CPU: MemAvailable)."""
    stats = jax.devices()[0].memory_stats() if jax.default_backend() != "cpu" else None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
    return host_memory_bytes()


def host_memory_bytes() -> int | None:
    """The host's MemAvailable (no device is started to read it)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def host_devices_for(data, mode: str) -> int | None:
    """On a CPU, one device for batched seeds (their bits depend on the seeds per device), else
    as many as keep the graph's copies under a quarter of free memory; elsewhere None (all)."""
    if jax.default_backend() != "cpu":
        return None
    free = host_memory_bytes()
    graph = sum(int(getattr(x, "nbytes", 0)) for x in jax.tree.leaves(data))
    if mode == "vmap" or not free or not graph:
        return 1 if mode == "vmap" else None
    return max(1, min(len(jax.local_devices()), int(0.25 * free // graph)))


def check_memory(
    compiled, num_seeds: int, available: int | None, resident: int = 0, copies: int = 1
) -> None:
    """Refuses a run whose compiled chunk needs more memory than is free. `resident`: bytes of
    the graph, already there; `copies`: devices sharing that memory (XLA counts per device)."""
    analysis = compiled.memory_analysis()
    if analysis is None or available is None:
        return
    per_device = (
        analysis.argument_size_in_bytes
        + analysis.output_size_in_bytes
        - analysis.alias_size_in_bytes
        + analysis.temp_size_in_bytes
    )
    needed = copies * per_device - resident  # the other devices' copies of the graph are new
    if needed > 0.9 * available:
        per_seed = needed / num_seeds
        fits = max(0, int(0.9 * available // max(per_seed, 1)))
        if fits == 0:  # no seed count helps: the model itself is too large here
            raise ResourceError(
                f"one seed needs about {per_seed / 2**30:.1f} GiB but about "
                f"{available / 2**30:.1f} GiB is free: the model is too large for this device. "
                f"Lower its sizes (hidden widths, q_hidden, buffer_size, replay_capacity, "
                f"subgraph_nodes and subgraph_edges for the subgraph and host engines, the "
                f"number of classes) or use a device with more memory."
            )
        raise ResourceError(
            f"{num_seeds} seeds need about {needed / 2**30:.1f} GiB ({per_seed / 2**20:.1f} MiB "
            f"per seed) but about {available / 2**30:.1f} GiB is free: use at most {fits} seeds "
            f"(--seeds), or run the sweep in several commands with different --seed."
        )
