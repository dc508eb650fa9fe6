"""The `policy-gnn` command (also `python experiments/run.py` and `python -m policy_gnn_jax.cli`).

The command itself is `command.py`; this module stays light (no JAX), so that a JAX setting JAX
refuses while it loads is one `error:` line (`launch`). Every name of `command` (`main`,
`entry`, `exit_status`, ...) is available here too, imported on first use.
"""

from __future__ import annotations

import importlib
import math
import os
import pathlib
import sys

HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"


def launch() -> int:
    """The installed `policy-gnn` command: imports the command, then runs it."""
    use_every_core()
    problem = jax_environment_problem()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    return importlib.import_module("policy_gnn_jax.cli.command").entry()


def use_every_core() -> None:
    """One host CPU device per core this process may use, unless XLA_FLAGS sets the count: on a
    CPU the runner then splits mapped seeds over the cores, which run side by side (the README's
    command in 0.6x the time on two cores) with the bits of one device. Read when JAX starts, so
    set here, before it does; on a GPU or TPU machine the host devices go unused."""
    flags = os.environ.get("XLA_FLAGS", "")
    cores = usable_cores()
    if HOST_DEVICES_FLAG not in flags and cores > 1:
        os.environ["XLA_FLAGS"] = f"{flags} {HOST_DEVICES_FLAG}={cores}".strip()


def usable_cores() -> int:
    """The cores this process may use: its affinity, capped by a container's CPU quota."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    quota = _cpu_quota()
    return max(1, min(cores or 1, math.ceil(quota))) if quota else cores or 1


CGROUP = pathlib.Path("/sys/fs/cgroup")


def _cpu_quota() -> float | None:
    """The CPUs a container's quota allows (`docker --cpus`), which the affinity does not show:
    cgroup v2's `cpu.max` or v1's `cpu.cfs_quota_us` over its period; None where unlimited."""
    try:
        if (CGROUP / "cpu.max").is_file():
            quota, period = (CGROUP / "cpu.max").read_text().split()[:2]
        else:
            quota = (CGROUP / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (CGROUP / "cpu" / "cpu.cfs_period_us").read_text().strip()
        quota, period = (-1, 1) if quota == "max" else (int(quota), int(period))
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def jax_environment_problem() -> str | None:
    """Imports JAX; what is wrong if it refuses its environment, else None. JAX reads every
    JAX_* variable while it is imported, and one it cannot parse raises a ValueError there."""
    try:
        importlib.import_module("jax")
    except ValueError as err:
        named = sorted(v for v in os.environ if v.startswith("JAX_"))
        if not named:
            raise
        return (
            f"JAX cannot start with this environment ({err}): fix or unset the variable it "
            f"names (set now: {', '.join(named)})."
        )
    return None


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    # The package's import lock (the package is always imported before this module): JAX's
    # imports are not safe from several threads at once.
    with sys.modules["policy_gnn_jax"]._IMPORTING:
        command = importlib.import_module("policy_gnn_jax.cli.command")
    return getattr(command, name)
