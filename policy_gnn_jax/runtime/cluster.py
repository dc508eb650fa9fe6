"""Joining other processes: JAX's distributed runtime started from the command's flags or a
cluster launcher's environment, the processes' meeting before a run, their leaving in order,
and the coordination service's key-value store in short, interruptible waits (what
`processes.py` gathers the seeds through).

JAX aborts a process (a C++ stack trace, status 134) when the process it waits for is missing
or gone; the waits here are short loops that notice a stopped process by its heartbeat and say
which one stopped, in one line.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time

import jax

from policy_gnn_jax.config import ConfigError

# Variables that say a launcher started several copies of the command (SLURM's srun, Open MPI's
# mpirun, or JAX's own variables): then a command with no process flags joins them.
_LAUNCHER_COUNTS = ("SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "JAX_NUM_PROCESSES")
# How long a process waits for the others' seeds after its own are done. Processes run equal
# blocks, so the wait is the spread between them; a process that died ends the run sooner
# (the coordination service's heartbeat).
GATHER_TIMEOUT_ENV = "POLICY_GNN_GATHER_TIMEOUT_S"
_DEFAULT_GATHER_TIMEOUT_S = 3600
# How long processes wait for each other to start.
CONNECT_TIMEOUT_ENV = "POLICY_GNN_CONNECT_TIMEOUT_S"
_DEFAULT_CONNECT_TIMEOUT_S = 300
# A process that sends no heartbeat for this long counts as stopped.
HEARTBEAT_S = 30
# How often a waiting process asks whether the one it waits for is still there.
_POLL_MS = 2000
# The coordination service's messages are capped; larger blobs travel in pieces.
_PIECE_BYTES = 1 << 20


class ProcessError(RuntimeError):
    """Another process failed, or did not answer in time."""


def launched_by_cluster() -> bool:
    """Whether the environment says a launcher started more than one copy of this command."""
    for name in _LAUNCHER_COUNTS:
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 1:
            return True
    return False


def connect(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> None:
    """Starts JAX's distributed runtime: with the three arguments, as given (`HOST:PORT` of
    process 0, how many processes, this one's id); with none, from the cluster's environment.
    Must run before JAX starts its backend. It waits $POLICY_GNN_CONNECT_TIMEOUT_S (else 300 s)
    for the others."""
    timeout_s = _seconds_from_env(CONNECT_TIMEOUT_ENV, _DEFAULT_CONNECT_TIMEOUT_S)
    given = [coordinator, num_processes, process_id]
    if any(v is not None for v in given) and any(v is None for v in given):
        raise ConfigError(
            "--coordinator, --num-processes and --process-id go together: pass all three, or "
            "none under a cluster launcher (SLURM, Open MPI) that sets them."
        )
    if num_processes is not None:
        _check_process_numbers(coordinator, num_processes, process_id)
        if num_processes == 1:
            return  # one process: nothing to coordinate
    # Without it, JAX aborts every other process (a C++ stack trace, status 134) when one
    # stops; with it they go on, and `processes.gather` says which process stopped.
    jax.config.update("jax_enable_recoverability", True)
    # JAX's preemption notice takes SIGTERM for itself, and the command must still stop on it.
    jax.config.update("jax_enable_preemption_service", False)
    try:
        _initialize(coordinator, num_processes, process_id, timeout_s)
    except (RuntimeError, ValueError) as err:
        detail = " ".join(str(err).split())[:300]
        if "Failed to start RPC server" in detail:  # process 0 could not listen on the port
            raise ProcessError(
                f"process 0 could not listen at {coordinator} ({detail}): the port is probably "
                f"in use; pick a free port for --coordinator and start every process with it."
            ) from None
        launcher = [f"{v}={os.environ[v]}" for v in _LAUNCHER_COUNTS if os.environ.get(v)]
        where = coordinator or f"the address of the launcher's environment ({', '.join(launcher)})"
        raise ProcessError(
            f"could not join the other processes at {where} ({detail}). Start every process "
            f"with the same --coordinator and --num-processes, each with its own --process-id."
        ) from None


_abandoned = False  # a join that did not complete (stopped, timed out, failed): never joined


def _initialize(coordinator, num_processes, process_id, timeout_s: float) -> None:
    """`jax.distributed.initialize` in a thread of its own, waited for here in short waits. JAX's
    own wait for a process that never comes cannot be interrupted and ends in an abort (a C++
    stack trace, status 134); here a signal stops it, and after `timeout_s` it is a RuntimeError
    (`connect` says it in one line). JAX is given a minute longer, so that this wait ends first."""
    global _abandoned
    failed = []

    def join():
        try:  # whole seconds, and a C int: at least 1, at most about 68 years
            timeout = max(1, min(math.ceil(timeout_s) + 60, 2**31 - 1))
            jax.distributed.initialize(coordinator, num_processes, process_id,
                                       initialization_timeout=timeout,
                                       heartbeat_timeout_seconds=HEARTBEAT_S)  # fmt: skip
        except Exception as err:  # JAX's own types: raised again in the calling thread
            failed.append(err)

    thread = threading.Thread(target=join, daemon=True)
    start, told, _abandoned = time.monotonic(), False, True
    thread.start()
    while thread.is_alive():
        thread.join(0.5)
        waited = time.monotonic() - start
        if thread.is_alive() and waited >= timeout_s:
            raise RuntimeError(f"not every process joined in {timeout_s:g} s")
        if not told and waited > 5:
            print("waiting for the other processes to join ...", file=sys.stderr, flush=True)
            told = True
    if failed:
        raise failed[0]
    _abandoned = False  # joined: only now do the others hear from this process


def _check_process_numbers(coordinator: str, num_processes, process_id) -> None:
    host, _, port = str(coordinator).rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(
            f"--coordinator must be HOST:PORT (process 0's address), got {coordinator!r}."
        )
    if num_processes < 1:
        raise ConfigError(f"--num-processes must be >= 1, got {num_processes}.")
    if not 0 <= process_id < num_processes:
        raise ConfigError(
            f"--process-id must be in 0..{num_processes - 1} (one id per process), "
            f"got {process_id}."
        )


def count() -> int:
    return jax.process_count()


def index() -> int:
    return jax.process_index()


_agreed = False


def agree(refusal: str | None = None) -> None:
    """The processes' meeting before any of them trains: each says whether it refused the run
    (`refusal`, its error) and hears the others, so that a run refused by one process (an
    --out that holds a result, a bad flag) ends every process with one line instead of leaving
    them to train for nothing. Once per run; nothing in one process."""
    global _agreed
    if not _joined() or count() == 1 or _agreed:
        return
    _agreed = True
    client = _client()
    client.key_value_set(f"policy_gnn/start/{index()}", refusal or "")
    barrier("start")
    said = [client.blocking_key_value_get(f"policy_gnn/start/{p}", _POLL_MS)
            for p in range(count())]  # fmt: skip
    barrier("start-read")  # no process leaves, with the service, before all have read
    refused = next((p for p, text in enumerate(said) if text), None)
    if refusal is None and refused is not None:  # a refusing process says its own error
        raise ProcessError(f"process {refused} refused the run: {said[refused]}")


def leave() -> None:
    """Leaves the distributed runtime, process 0 last: its coordination service going away
    makes JAX abort a process still connected to it. Every process meets first (a bounded
    wait: one that died is not waited for, and says nothing more: the run has reported it,
    or had finished); the others disconnect, and process 0 waits until they have before it
    stops the service. Nothing in one process."""
    if not _joined():
        return
    try:
        if count() > 1:
            barrier("leave", HEARTBEAT_S)
            if index() == 0:
                deadline = time.monotonic() + HEARTBEAT_S
                while len(_live()) > 1 and time.monotonic() < deadline:
                    time.sleep(0.1)
        jax.distributed.shutdown()
    except Exception:  # a process stopped: the run has said so already, or had finished
        pass


def _joined() -> bool:
    """Whether this process joined others (asked without starting a backend)."""
    from jax._src import distributed

    return distributed.global_state.client is not None and not _abandoned


def _client():
    """The coordination service's store (set by `connect`; asked only over several processes)."""
    from jax._src import distributed  # the one handle on it

    return distributed.global_state.client


def publish(key: str, blob: bytes) -> None:
    pieces = [blob[i : i + _PIECE_BYTES] for i in range(0, len(blob), _PIECE_BYTES)] or [b""]
    client = _client()
    for i, piece in enumerate(pieces):
        client.key_value_set_bytes(f"policy_gnn/{key}/{i}", piece)
    client.key_value_set(f"policy_gnn/{key}/pieces", str(len(pieces)))


def fetch(key: str) -> bytes:
    """The blob `publish` stored under `key` by process `owner`, waiting for it while that
    process is alive (at most the gather timeout)."""
    owner = int(key.rsplit("/", 1)[-1])
    pieces = int(_wait_for(f"policy_gnn/{key}/pieces", owner, _gather_timeout_s()))
    client = _client()
    return b"".join(
        client.blocking_key_value_get_bytes(f"policy_gnn/{key}/{i}", _POLL_MS)
        for i in range(pieces)
    )


def _wait_for(key: str, owner: int, timeout_s: float) -> str:
    """The value process `owner` stores under `key`, asked for in short waits: between them
    a signal can stop this process (a long wait inside the client would hold it back), and a
    stopped owner is noticed (no heartbeat for HEARTBEAT_S)."""
    deadline = time.monotonic() + timeout_s
    client = _client()
    while True:
        try:
            return client.blocking_key_value_get(key, _POLL_MS)
        except Exception:  # not there yet (the client raises its own types), or no service
            if not _alive(owner):
                raise ProcessError(
                    f"process {owner} stopped before handing over its seeds. Nothing was "
                    f"written; rerun every process (with --checkpoint-dir, each resumes from "
                    f"its last checkpoint)."
                ) from None
            if time.monotonic() > deadline:
                raise ProcessError(
                    f"process {owner} did not answer within {timeout_s:g} s "
                    f"({GATHER_TIMEOUT_ENV}). Nothing was written."
                ) from None


def barrier(name: str, timeout_s: float | None = None) -> None:
    """Every process reaches `name` before any goes on (through the store, in short waits)."""
    _client().key_value_set(f"policy_gnn/barrier/{name}/{index()}", "here")
    for p in range(count()):
        _wait_for(f"policy_gnn/barrier/{name}/{p}", p, timeout_s or _gather_timeout_s())


def _alive(process: int) -> bool:
    """Whether `process` still sends heartbeats (False too when the coordination service,
    which lives in process 0, is gone)."""
    try:
        return process in _live()
    except Exception:
        return False


def _live() -> dict:
    """The processes still connected (the service wants the asking process in the list)."""
    return _client().get_live_nodes(list(range(count())))


def _gather_timeout_s() -> float:
    return _seconds_from_env(GATHER_TIMEOUT_ENV, _DEFAULT_GATHER_TIMEOUT_S)


def _seconds_from_env(name: str, default: float) -> float:
    value = os.environ.get(name, "")
    try:
        seconds = float(value) if value else default
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise ConfigError(f"{name} must be a number of seconds > 0, got {value!r}.")
    return seconds
