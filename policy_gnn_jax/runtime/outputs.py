"""Everything a run writes, as docs/reliability.md promises it: atomic files, and output folders
that hold one run's result and are replaced only when asked (one writer per folder or file is
`locks.py`).

- `atomic_write_bytes` (and `_text`, `_json`): a temporary file beside the target, flushed to
  disk, then renamed over it: a reader sees the old file or the new one, never half of one.
- `new_folder`: a default output folder, unique per run and created exclusively.
- `check_no_result` / `staging_folder` / `publish`: a folder that holds a result is written only
  with `overwrite`, and then only the result's files are replaced; `fit.json` leaves first and
  comes back last, so a folder never holds a complete fit made of two runs' files.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import pathlib
import shutil
import signal
import tempfile
import threading


class CheckpointError(ValueError):
    """An output that cannot be written or would replace a result, or a saved file (a result, a
    fit, a checkpoint) that is damaged or belongs to another run. Says what to do."""


# The files a result is made of; `fit.json` (the manifest) is written last.
RESULT_FILES = ("results.json", "dataset.npz", "snapshots.npz", "fit.json")
# The signals a run stops on (held back while a checkpoint or a result is written).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def real_path(path) -> pathlib.Path:
    """`path` with its links followed. A loop of links stays as it is, for its first use to
    report as an OSError (`Path.resolve` raises RuntimeError on one before Python 3.13)."""
    return pathlib.Path(os.path.realpath(os.fspath(path)))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> pathlib.Path:
    """Writes `data` to `path` atomically, with the permissions the user's umask gives any new
    file (a temporary file starts at 0600)."""
    path = pathlib.Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as err:
        if os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(err, OSError):  # a full disk, a quota, a file-size limit, ...
            raise CheckpointError(
                f"cannot write {path} ({err.strerror or err}): free some space or choose "
                f"another folder; nothing was replaced."
            ) from None
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> pathlib.Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj) -> pathlib.Path:
    return atomic_write_text(path, json.dumps(obj, indent=2))


def read_json(path: str | os.PathLike, made_by: str | None = None):
    """Reads a JSON file the project wrote; a missing or corrupt one is a CheckpointError naming
    the fix. `made_by`: the command that writes it, for a file read as an input."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise CheckpointError(
            f"{path} does not exist (a relative path is read from the working directory "
            f"{pathlib.Path.cwd()}): pass the file's path."
        )
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        fix = ("If it is a file this project wrote, restore it from a copy (or delete it, and the "
               "command makes it again); if it is another file, pass another name."
               if made_by is None else
               f"Restore it from a copy, or write it again with {made_by}.")  # fmt: skip
        raise CheckpointError(
            f"{path} is not JSON, or is corrupt or truncated ({err}). {fix}"
        ) from None


def check_folder_path(path, what: str) -> pathlib.Path:
    """`path` as a folder to use: a path (not bytes or a number), not empty (the current folder,
    unasked), not an existing file. `~` is expanded, as a shell would."""
    if not isinstance(path, str | os.PathLike) or isinstance(os.fspath(path), bytes):
        raise CheckpointError(
            f"the {what} must be a path (text or a pathlib.Path), got {type(path).__name__}."
        )
    if not str(os.fspath(path)).strip():
        raise CheckpointError(f"the {what} is an empty path: name a folder.")
    path = pathlib.Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise CheckpointError(f"{what} {path} is an existing file, not a folder: choose a folder.")
    return path


def check_writable_dir(path, what: str = "output folder") -> pathlib.Path:
    """Creates `path` if needed and proves a file can be written there, before any training."""
    path = check_folder_path(path, what)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".write-test.")
        os.close(fd)
        os.remove(probe)
    except OSError as err:
        raise CheckpointError(
            f"cannot write to {what} {path} ({err.strerror or err}): choose a writable folder."
        ) from None
    return path


def check_writable_file(path, what: str = "output file", overwrite: bool | None = None):
    """Proves the file `path` can be written (its folder made if needed) before any work.

    `overwrite=False`: an existing file is refused (a result is never replaced unasked); True:
    it may be replaced; None: the file is merged into, not replaced (a study's results). A
    script's own output file is also locked: `locks.claim_output_file`."""
    text = os.fspath(path) if isinstance(path, str | os.PathLike) else path
    if not isinstance(text, str):
        raise CheckpointError(f"the {what} must be a file's path, got {path!r}.")
    if not text.strip():
        raise CheckpointError(f"the {what} is an empty path: name a file.")
    if text.endswith(("/", os.sep)):
        raise CheckpointError(f"{what} {text} ends in '/', which names a folder: pass a file name.")
    path = pathlib.Path(text).expanduser()
    if path.is_dir():
        raise CheckpointError(f"{what} {path} is a folder: pass a file name.")
    if overwrite is False and path.exists():
        raise CheckpointError(f"{path} exists: pass --overwrite to replace it, or another --out.")
    check_writable_dir(path.parent, f"the folder for {what} {path.name},")
    return path


def new_folder(root: str | os.PathLike, stem: str) -> pathlib.Path:
    """A new folder `root/stem-<date>-<time to the microsecond>-<pid>`, created exclusively."""
    root = pathlib.Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        while True:
            stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
            folder = root / f"{stem}-{stamp}-{os.getpid()}"
            try:
                folder.mkdir()
                return folder
            except FileExistsError:  # the same microsecond in this process: take the next one
                continue
    except OSError as err:
        raise CheckpointError(
            f"cannot make an output folder under {root.absolute()} ({err.strerror or err}): "
            f"pass --out with a writable folder."
        ) from None


def holds_result(folder: pathlib.Path) -> str | None:
    """The first of a result's files `folder` holds, or None."""
    return next((name for name in RESULT_FILES if os.path.lexists(folder / name)), None)


def is_checkpoint_step(path: pathlib.Path) -> bool:
    """A step a checkpointer wrote (`runtime/checkpoint.py`; `_CHECKPOINT_METADATA`: in 0.2's
    orbax format), or one it was writing."""
    if not path.is_dir():
        return False
    markers = ("meta.json", "_CHECKPOINT_METADATA")
    return ".partial-" in path.name or (
        path.name.isdigit() and any((path / m).exists() for m in markers)
    )


def check_no_result(folder, overwrite: bool, how: str) -> None:
    """Refuses a folder that already holds a result's file unless `overwrite` (`how` names the
    switch), and a checkpoint folder: a result there would be deleted with its steps."""
    folder = pathlib.Path(folder)
    if folder.exists() and not folder.is_dir():
        raise CheckpointError(f"{folder} is an existing file, not a folder: choose a folder.")
    if folder.is_dir():
        for name in RESULT_FILES:
            if (folder / name).exists() and not (folder / name).is_file():
                raise CheckpointError(
                    f"{folder / name} is not a file (a folder?): move it away; nothing was "
                    f"replaced."
                )
        steps = [p.name for p in folder.iterdir() if is_checkpoint_step(p)]
        steps += [f"{p.name}/{q.name}" for p in folder.glob("split-*") if p.is_dir()
                  for q in p.iterdir() if is_checkpoint_step(q)]  # fmt: skip
        if steps:
            raise CheckpointError(
                f"{folder} is a checkpoint folder (it holds {steps[0]}/): save results elsewhere "
                f"(to resume it, pass it as the checkpoint folder)."
            )
    found = holds_result(folder) if folder.is_dir() else None
    if found and not overwrite:
        raise CheckpointError(
            f"{folder} already holds {found}; nothing was replaced. Choose another folder, or "
            f"pass {how} to replace the result's files ({', '.join(RESULT_FILES)}); other files "
            f"there are kept."
        )


def staging_folder(folder: str | os.PathLike) -> pathlib.Path:
    """A fresh, empty folder inside `folder` to write the new files into before `publish`."""
    staging = pathlib.Path(folder) / f".staging-{os.getpid()}-{threading.get_ident()}"
    try:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
    except OSError as err:
        raise CheckpointError(
            f"cannot write to {folder} ({err.strerror or err}): choose a writable folder."
        ) from None
    return staging


def publish(staging: pathlib.Path, folder: str | os.PathLike) -> pathlib.Path:
    """Moves the staged result files into `folder`, each by an atomic rename: the old `fit.json`
    first out, the new one last in. Other files in `folder` are not touched."""
    folder = pathlib.Path(folder)
    with signals_deferred():  # a Ctrl-C or SIGTERM lands after the last rename, never between
        (folder / "fit.json").unlink(missing_ok=True)
        for name in RESULT_FILES:
            if (staging / name).exists():
                os.replace(staging / name, folder / name)
        staging.rmdir()
    return folder


@contextlib.contextmanager
def signals_deferred():
    """Holds the stop signals back while the block runs, then lets the first one through."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = {
        s: signal.signal(s, lambda signum, frame: received.append(signum)) for s in STOP_SIGNALS
    }
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if received:  # now, under the handlers the run had
        handler = previous[received[0]]
        if callable(handler):
            handler(received[0], None)
        else:
            signal.raise_signal(received[0])
