"""Checkpoints: every seed's training state and the metrics so far, saved every few chunks, so
a killed run resumes and ends bit-identical to an uninterrupted one; another run's (its
fingerprint) is refused. Step `K` (K chunks done) is the folder `K`: `run.npz` (each array under
its path in the tree) and `meta.json`, written as `K.partial-<pid>` and renamed when whole. The
two newest are kept (a crash can cut the last write short); each process has its own folder.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import time
import zipfile

import jax
import numpy as np

from policy_gnn_jax.runtime.locks import LOCK_NAME, FolderLock
from policy_gnn_jax.runtime.outputs import (
    CheckpointError,
    check_folder_path,
    check_writable_dir,
    is_checkpoint_step,
    signals_deferred,
)


def _is_key(x) -> bool:
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def keys_to_data(tree):
    """Typed PRNG keys -> their uint32 key data (what a file can hold)."""
    return jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, tree)


def data_to_keys(tree, like):
    """The inverse of `keys_to_data`, guided by `like` (a tree with the typed keys' places).

    Keys are rewrapped with the default implementation, the one `seed_axis.seed_keys` made them
    with (`jax.random.key`)."""
    return jax.tree.map(
        lambda x, ref: jax.random.wrap_key_data(x) if _is_key(ref) else x, tree, like
    )


def _changes(saved: dict | None, current: dict | None) -> str:
    """What differs between a checkpoint's run and this one, e.g. "seeds: 2 there, 3 here"."""
    if not saved or not current:
        return "another dataset, config, method, seed count, base seed or seed mode"
    names = [k for k in {**saved, **current} if saved.get(k) != current.get(k)]
    shown = [f"{k}: {_shown(saved.get(k))} there, {_shown(current.get(k))} here" for k in names]
    more = f"; and {len(shown) - 4} more" if len(shown) > 4 else ""
    return "; ".join(shown[:4]) + more if shown else "the same fields, other data"


def _shown(value) -> str:
    return "unset" if value is None else str(value)


class Checkpointer:
    """Saves and restores (chunks done, state, metrics so far) of one run in `directory`.
    `fingerprint` identifies the run (`identity`: its fields, to name what differs): a folder
    holding another run's checkpoint is refused, never resumed or overwritten."""

    def __init__(
        self, directory: str | os.PathLike, fingerprint: str, identity: dict | None = None
    ):
        self.fingerprint = fingerprint
        self.identity = identity
        self._opened = time.perf_counter()
        self._restored = None  # (units done, wall seconds) of the checkpoint resumed from
        self.seed_devices = None  # the devices batched seeds ran over (vmap), set by the runner
        self._open(pathlib.Path(directory).absolute())

    def _open(self, directory: pathlib.Path) -> None:
        """Locks `directory` and opens its checkpoint manager."""
        self.directory = check_folder_path(directory, "checkpoint folder")
        # One run at a time writes a checkpoint folder: a second one is refused, naming the first.
        self._lock = FolderLock(self.directory, "checkpoint folder").__enter__()
        try:
            _check_is_checkpoint_folder(self.directory)
            check_writable_dir(self.directory, "checkpoint folder")
            for left in self.directory.glob("*.partial-*"):  # a killed save's: never resumed
                shutil.rmtree(left, ignore_errors=True)
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise

    def restore(self, state_like, metrics_like_fn):
        """(chunks_done, units_done, state, metrics) of the latest checkpoint, or None.
        `state_like`: the state's shapes; `metrics_like_fn`: units done -> the metrics' shapes."""
        step = self.latest()
        if step is None:
            return None
        try:
            meta = json.loads((self.directory / str(step) / "meta.json").read_text())
            fields = {"chunks_done", "units_done", "dtypes"}
            if not isinstance(meta, dict) or not fields <= set(meta):
                raise ValueError("meta.json is not a checkpoint's")
        except (OSError, ValueError) as err:
            raise self._corrupt(step, err) from None
        if meta.get("fingerprint") != self.fingerprint:
            changed = _changes(meta.get("identity"), self.identity)
            raise CheckpointError(
                f"{self.directory} holds a checkpoint of a different run ({changed}). Run the "
                f"command that made it to resume it, or use another checkpoint folder for this one."
            )
        saved = meta.get("seed_devices", self.seed_devices)  # the seed mode is in the fingerprint
        if saved != self.seed_devices:
            raise CheckpointError(
                f"{self.directory} holds a checkpoint of seeds batched over {saved} device(s), "
                f"this run over {self.seed_devices}: under --seed-mode vmap a seed's bits depend "
                f"on it. Resume with --devices {saved}, or use another checkpoint folder."
            )
        target = {
            "state": jax.eval_shape(keys_to_data, state_like),
            "metrics": metrics_like_fn(meta["units_done"]),
        }
        try:
            restored = _read_arrays(self.directory / str(step) / "run.npz", target, meta["dtypes"])
        except Exception as err:  # truncated or damaged: zip, npy and key errors alike
            raise self._corrupt(step, err) from None
        state = data_to_keys(restored["state"], state_like)
        metrics = jax.tree.map(np.asarray, restored["metrics"])
        self._restored = (meta["units_done"], float(meta.get("wall_time_s", 0.0)))
        return meta["chunks_done"], meta["units_done"], state, metrics

    def resumed(self, wall_time_s: float) -> dict | None:
        """For the record: None from the start; else what was done before, and the wall time of
        every process that worked on it, this one's `wall_time_s` added."""
        if self._restored is None:
            return None
        done, before = self._restored
        total = before + wall_time_s
        return {"units_done_before": done, "wall_time_s_before": before, "wall_time_s_total": total}

    def _corrupt(self, step, err) -> CheckpointError:
        detail = " ".join(str(err).split())
        reason = f"{type(err).__name__}: {detail[:300]}{'...' if len(detail) > 300 else ''}"
        if isinstance(err, _OtherStateError):
            reason = ("its state has other fields, shapes or types: another version of policy-"
                      "gnn-jax, or another backbone or agent of your own, wrote it")
        return CheckpointError(
            f"the checkpoint {self.directory}/{step} could not be read ({reason}). Delete that "
            f"step folder to resume from the one before it, or {self.directory} to start the "
            f"run from scratch."
        )

    def save(self, chunks_done: int, units_done: int, state, metrics) -> None:
        run = {"state": keys_to_data(state), "metrics": metrics}
        meta = {
            "fingerprint": self.fingerprint,
            "chunks_done": chunks_done,
            "units_done": units_done,
            "identity": self.identity,
            "seed_devices": self.seed_devices,
            "wall_time_s": (self._restored[1] if self._restored else 0.0)
            + time.perf_counter() - self._opened,
        }
        with signals_deferred():  # Ctrl-C during a save lands after it: the checkpoint is whole
            self._write(chunks_done, run, meta)

    def _write(self, step: int, run, meta: dict) -> None:
        """Writes one step; one that fails (a full disk, a quota) is one CheckpointError."""
        partial = self.directory / f"{step}.partial-{os.getpid()}"
        try:
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir()
            named = jax.tree_util.tree_flatten_with_path(run)[0]
            arrays = {jax.tree_util.keystr(path): np.asarray(x) for path, x in named}
            # numpy stores types it cannot name (bfloat16) as raw bytes: the names go beside.
            meta = {**meta, "dtypes": {name: str(a.dtype) for name, a in arrays.items()}}
            with open(partial / "run.npz", "wb") as f:
                np.savez(f, **arrays)
                _flush(f)
            with open(partial / "meta.json", "w") as f:
                json.dump(meta, f)
                _flush(f)
            final = self.directory / str(step)
            if final.exists():  # the same step again: set aside first, never half deleted
                _discard(final)
            os.replace(partial, final)
            _sync_folder(self.directory)
        except OSError as err:
            shutil.rmtree(partial, ignore_errors=True)
            raise CheckpointError(
                f"cannot write the checkpoint in {self.directory} ({err.strerror or err}): free "
                f"some space or choose another checkpoint folder; the earlier checkpoints are kept."
            ) from None
        for old in self._steps()[:-KEEP]:
            _discard(self.directory / str(old))

    def _steps(self) -> list[int]:
        return sorted(int(p.name) for p in self.directory.iterdir() if p.name.isascii()
                      and p.name.isdigit())  # fmt: skip

    def latest(self) -> int | None:
        """The chunk count of the newest checkpoint saved, or None."""
        steps = self._steps() if self.directory.is_dir() else []
        return steps[-1] if steps else None

    def close(self) -> None:
        self._lock.__exit__(None, None, None)


KEEP = 2  # the newest steps kept: the last one may be cut short by a crash


class _OtherStateError(ValueError):
    """A checkpoint's arrays are not this run's state (other fields, shapes or types)."""


def _read_arrays(path: pathlib.Path, target, dtypes: dict):
    """The tree `target` (of ShapeDtypeStructs) with the arrays of `path`, checked against it
    by each leaf's path in the tree, shape and dtype (`dtypes`: the names saved beside)."""
    named, treedef = jax.tree_util.tree_flatten_with_path(target)
    if not zipfile.is_zipfile(path):  # else numpy would suggest unpickling it
        raise ValueError(f"{path.name} is not an .npz archive: damaged or cut short")
    want = {jax.tree_util.keystr(p): (tuple(x.shape), np.dtype(x.dtype)) for p, x in named}
    if dtypes != {name: str(dtype) for name, (_, dtype) in want.items()}:
        raise _OtherStateError()
    with np.load(path, allow_pickle=False) as stored:
        arrays = {
            name: as_stored(stored[name], want[name][1]) if name in want else stored[name]
            for name in stored.files
        }
    if {name: (a.shape, a.dtype) for name, a in arrays.items()} != want:
        raise _OtherStateError()
    return jax.tree.unflatten(treedef, [arrays[jax.tree_util.keystr(p)] for p, _ in named])


def as_stored(array: np.ndarray, dtype) -> np.ndarray:
    """`array` read from an .npz as `dtype`, where numpy wrote that type as raw records (it has no
    name for JAX's bfloat16 or float8 types); any other array as it is. The caller has checked
    that `dtype` is the type saved."""
    dtype = np.dtype(dtype)
    raw = array.dtype.type is np.void and dtype.type is not np.void
    if raw and array.dtype.itemsize == dtype.itemsize:
        return array.view(dtype)
    return array


def _flush(f) -> None:
    f.flush()
    os.fsync(f.fileno())


def _discard(step: pathlib.Path) -> None:
    """Deletes a step folder once renamed to a name no reader takes for a step (a kill midway
    leaves no half-deleted step)."""
    gone = step.with_name(f"{step.name}.partial-{os.getpid()}-old")
    try:
        os.replace(step, gone)
    except OSError:
        return  # kept: an old step left over costs room, not a result
    shutil.rmtree(gone, ignore_errors=True)


def _sync_folder(folder: pathlib.Path) -> None:
    """Flushes a folder's entries (a rename within it) to disk."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_is_checkpoint_folder(directory: pathlib.Path) -> None:
    """A folder holding anything but checkpoint steps (and its lock) is refused untouched."""
    if not directory.is_dir():
        return
    orbax = sorted(p.parent.name for p in directory.glob("*/_CHECKPOINT_METADATA"))
    if orbax:
        raise CheckpointError(
            f"the checkpoint folder {directory} holds checkpoints in another version's format "
            f"({', '.join(orbax[:3])}; policy-gnn-jax 0.2 wrote them with orbax): finish that "
            f"run with the version that started it, or delete the folder to start it again."
        )
    foreign = sorted(
        p.name
        for p in directory.iterdir()
        if p.name != LOCK_NAME and not is_checkpoint_step(p)
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
