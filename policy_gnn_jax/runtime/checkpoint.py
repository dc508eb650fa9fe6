"""Everything the project writes to disk, written so that a crash never leaves a broken file.

- `atomic_write_text` / `atomic_write_bytes`: write a temporary file beside the target, flush it
  to disk, then rename it over the target (atomic on POSIX), so a reader sees the old file or the
  new one, never half of one.
- `read_json`: a corrupt or truncated JSON file is a `CheckpointError` naming it and the fix.
- `Checkpointer`: the whole vmapped training state and the metrics so far, saved every few chunks
  with orbax-checkpoint (which commits each step atomically, as a renamed folder), so a killed run
  resumes where it stopped and ends bit-identical to an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import sys
import threading
import time

import jax
import numpy as np

from policy_gnn_jax.runtime import failed_writes, processes, step_store

# The file helpers live in files.py; callers also reach them through this module.
from policy_gnn_jax.runtime.files import (  # noqa: F401
    CheckpointError,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    check_folder_path,
    check_writable_dir,
    check_writable_file,
    read_json,
)

# Fault injection for the resume test: kill this process (SIGKILL, no clean-up) right after the
# N-th checkpoint is saved. Never set in normal use.
KILL_AFTER_SAVES_ENV = "POLICY_GNN_KILL_AFTER_CHECKPOINTS"


def _is_key(x) -> bool:
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def keys_to_data(tree):
    """Typed PRNG keys -> their uint32 key data (what a file can hold)."""
    return jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, tree)


def data_to_keys(tree, like):
    """The inverse of `keys_to_data`, guided by `like` (a tree with the typed keys' places).

    Keys are rewrapped with the default implementation, the one `runner.seed_keys` made them
    with (`jax.random.key`)."""
    return jax.tree.map(
        lambda x, ref: jax.random.wrap_key_data(x) if _is_key(ref) else x, tree, like
    )


def _changes(saved: dict | None, current: dict | None) -> str:
    """What differs between a checkpoint's run and this one, e.g. "seeds: 2 there, 3 here"."""
    if not saved or not current:  # a checkpoint written before runs kept their identity
        return "another dataset, config, method, seed count, base seed or seed mode"
    names = [k for k in {**saved, **current} if saved.get(k) != current.get(k)]
    shown = [f"{k}: {_shown(saved.get(k))} there, {_shown(current.get(k))} here" for k in names]
    more = f"; and {len(shown) - 4} more" if len(shown) > 4 else ""
    return "; ".join(shown[:4]) + more if shown else "the same fields, other data"


def _shown(value) -> str:
    return "unset" if value is None else str(value)


class Checkpointer:
    """Saves and restores (chunks done, vmapped state, metrics so far) for one run.

    Args:
      directory: the checkpoint folder.
      fingerprint: a string that identifies the run (dataset, config, method, seeds); a folder
        holding another run's checkpoint is refused, never silently resumed or overwritten.
    """

    def __init__(
        self, directory: str | os.PathLike, fingerprint: str, identity: dict | None = None
    ):
        self._kill_after = _kill_after_saves()
        self.fingerprint = fingerprint
        self.identity = identity
        self._opened = time.perf_counter()
        self._restored = None  # (units done, wall seconds) of the checkpoint resumed from
        self._open(pathlib.Path(directory).absolute())
        self._saves = 0

    def _open(self, directory: pathlib.Path) -> None:
        """Locks `directory` and opens its checkpoint manager."""
        from policy_gnn_jax.runtime.outputs import FolderLock

        self.directory = check_folder_path(directory, "checkpoint folder")
        # One run at a time writes a checkpoint folder: a second one is refused, naming the first.
        self._lock = FolderLock(self.directory, "checkpoint folder").__enter__()
        try:
            _check_is_checkpoint_folder(self.directory)
            check_writable_dir(self.directory, "checkpoint folder")
            # One process: orbax; each process of several: its own files (step_store.py).
            several = processes.count() > 1
            store = step_store.FileSteps if several else step_store.OrbaxSteps
            self._manager = store(self.directory)
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise

    def _move_if_lock_lost(self) -> None:
        """If this folder's lock file was deleted while the run held it, another run may now
        write there: the run's next checkpoints go to a new `<folder>.rescued-*` beside it."""
        from policy_gnn_jax.runtime.outputs import rescue_folder

        if self._lock.still_held():
            return
        old = self.directory
        self.close()
        self._open(rescue_folder(old))
        print(
            f"warning: the lock file of {old} was removed while this run held it, so another run "
            f"may write there: this run's checkpoints go to {self.directory} from now on "
            f"(resume with --checkpoint-dir {self.directory}).",
            file=sys.stderr,
            flush=True,
        )

    def restore(self, state_like, metrics_like_fn):
        """Returns (chunks_done, units_done, state, metrics) of the latest checkpoint, or None.

        Args:
          state_like: a tree of arrays or ShapeDtypeStructs with the state's structure.
          metrics_like_fn: units_done -> a tree of ShapeDtypeStructs of the metrics so far.
        """
        step = self._manager.latest_step()
        if step is None:
            return None
        try:
            meta = self._manager.read_meta(step)
        except Exception as err:  # orbax raises many types for a damaged folder
            raise self._corrupt(step, err) from None
        if meta.get("fingerprint") != self.fingerprint:
            saved = meta.get("identity") or {}
            if self.identity and "dataset fingerprint" not in saved and "dataset" in saved:
                raise CheckpointError(
                    f"{self.directory} holds a checkpoint written by an earlier version of "
                    f"policy-gnn-jax, whose dataset fingerprints left out the sizes of the "
                    f"split's parts: it cannot be told apart from a run on other splits, so it "
                    f"is not resumed. Delete {self.directory} to start again, or use another "
                    f"checkpoint folder."
                )
            changed = _changes(meta.get("identity"), self.identity)
            raise CheckpointError(
                f"{self.directory} holds a checkpoint of a different run ({changed}). Run the "
                f"command that made it to resume it, or use another checkpoint folder for this one."
            )
        target = {
            "state": jax.eval_shape(keys_to_data, state_like),
            "metrics": metrics_like_fn(meta["units_done"]),
        }
        with failed_writes.stderr_held() as held:
            try:
                restored = self._manager.read_run(step, target)
            except Exception as err:  # orbax's threads complain as its reads fail: not to users
                held.drop()
                failed_writes.close_quietly(self._manager, self.directory)
                held.wait_until_quiet()
                raise self._corrupt(step, err) from None
        state = data_to_keys(restored["state"], state_like)
        metrics = jax.tree.map(np.asarray, restored["metrics"])
        self._restored = (meta["units_done"], float(meta.get("wall_time_s", 0.0)))
        return meta["chunks_done"], meta["units_done"], state, metrics

    def _wall_before(self) -> float:
        return self._restored[1] if self._restored else 0.0

    def resumed(self, wall_time_s: float) -> dict | None:
        """For the run's record: None for a run from the start; else how much was done before
        and the wall time of every process that worked on it, this one's `wall_time_s` added."""
        if self._restored is None:
            return None
        return {
            "units_done_before": self._restored[0],
            "wall_time_s_before": self._restored[1],
            "wall_time_s_total": self._restored[1] + wall_time_s,
        }

    def _corrupt(self, step, err) -> CheckpointError:
        detail = " ".join(str(err).split())  # one line: orbax and tensorstore span many
        if "opology mismatch" in detail or "device mesh" in detail.lower():
            return CheckpointError(
                f"the checkpoint {self.directory}/{step} was written with another set of devices "
                f"than this process has: resume it with the same devices (the same --devices and "
                f"XLA_FLAGS as the run that wrote it); the checkpoints themselves are intact."
            )
        if "Structure mismatch" in detail or "not found in" in detail:
            # orbax lists every saved key here: thousands of characters that hide the reason.
            reason = (
                "its state has other fields: it was written by another version of policy-gnn-jax"
            )
        else:
            reason = f"{type(err).__name__}: {detail[:300]}{'...' if len(detail) > 300 else ''}"
        return CheckpointError(
            f"the checkpoint {self.directory}/{step} could not be read ({reason}). Delete that "
            f"step folder to resume from the one before it, or {self.directory} to start the "
            f"run from scratch."
        )

    def save(self, chunks_done: int, units_done: int, state, metrics) -> None:
        self._move_if_lock_lost()
        run = {"state": keys_to_data(state), "metrics": metrics}
        meta = {
            "fingerprint": self.fingerprint,
            "chunks_done": chunks_done,
            "units_done": units_done,
            "identity": self.identity,
            "wall_time_s": self._wall_before() + time.perf_counter() - self._opened,
        }
        with signals_deferred():  # Ctrl-C during a save lands after it: the checkpoint is whole
            self._write(chunks_done, run, meta)
        self._saves += 1
        if self._kill_after and self._saves >= self._kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    def _write(self, step: int, run, meta: dict) -> None:
        """Writes one step. A write that fails (a full disk, a quota) is one CheckpointError:
        what orbax and its threads print on the way is dropped with it, kept otherwise."""
        with failed_writes.stderr_held() as held:
            try:
                self._manager.write(step, run, meta)
            except Exception as err:  # OSError, and orbax's ValueErrors for the same
                held.drop()
                failed_writes.close_quietly(self._manager, self.directory)
                held.wait_until_quiet()  # tensorstore's writes still failing, in its threads
                detail = failed_writes.reason(err)
                raise CheckpointError(
                    f"cannot write the checkpoint in {self.directory} ({detail}): free some "
                    f"space or choose another checkpoint folder; the earlier checkpoints are "
                    f"kept."
                ) from None

    def latest(self) -> int | None:
        """The chunk count of the newest checkpoint saved, or None."""
        return self._manager.latest_step()

    def close(self) -> None:
        try:
            self._manager.close()
        finally:
            self._lock.__exit__(None, None, None)


# The signals a run stops on (held back during a save).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


@contextlib.contextmanager
def signals_deferred():
    """Holds the stop signals back while the block runs, then lets the first one through."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    held = STOP_SIGNALS
    previous = {s: signal.signal(s, lambda signum, frame: received.append(signum)) for s in held}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if received:  # now, under the handlers the run had
        handler = previous[received[0]]
        if callable(handler):  # a Python handler: called here, whatever native code did since
            handler(received[0], None)
        else:
            signal.raise_signal(received[0])


def _kill_after_saves() -> int | None:
    text = os.environ.get(KILL_AFTER_SAVES_ENV)
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise CheckpointError(
            f"${KILL_AFTER_SAVES_ENV} (a fault injection for tests) must be a whole number >= 1, "
            f"got {text!r}: unset it."
        )
    return int(text)


def is_checkpoint_step(path: pathlib.Path) -> bool:
    """An entry orbax writes: a numbered step folder it committed (it holds orbax's metadata or
    commit marker), or one of its temporary step folders."""
    if not path.is_dir():
        return False
    if step_store.is_file_step(path):
        return True
    if ".orbax-checkpoint-tmp" in path.name:
        return True
    markers = ("_CHECKPOINT_METADATA", "commit_success.txt")
    return path.name.isdigit() and any((path / m).exists() for m in markers)


def _check_is_checkpoint_folder(directory: pathlib.Path) -> None:
    """A folder holding anything but checkpoint steps (and its lock) is someone's files, not a
    checkpoint: refused without touching it (and without telling anyone to delete it)."""
    if not directory.is_dir():
        return
    foreign = sorted(
        p.name
        for p in directory.iterdir()
        if p.name != ".policy-gnn.lock" and not is_checkpoint_step(p)
    )
    if foreign and all(name.startswith("split-") for name in foreign):
        raise CheckpointError(
            f"the checkpoint folder {directory} holds a --splits sweep's checkpoints "
            f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}): resume it with "
            f"--splits, or pass {directory}/{foreign[0]} for that split alone."
        )
    if foreign:
        listed = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise CheckpointError(
            f"the checkpoint folder {directory} holds files that are not a policy-gnn checkpoint "
            f"({listed}): pass a new or empty folder for the checkpoints (--checkpoint-dir, "
            f"or fit's checkpoint_dir)."
        )
