"""Output folders that nothing replaces by accident and two runs never write at once.

- `new_folder`: a default output folder, unique per run (time to the microsecond and the process
  id) and created exclusively, so runs started together never share one.
- `FolderLock`: one writer per folder (an output or a checkpoint folder). The lock is a file
  beside the folder holding its owner's process id and host; a second writer gets one error that
  names the owner, and a lock whose owner process is gone is taken over.
- `check_no_result` / `publish`: a folder that holds a result is replaced only when asked
  (`overwrite`), and then in one rename: the new files are written into a staging folder beside
  it, which takes its place, so a reader sees the old result or the new one, never a mix.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import shutil
import socket

from policy_gnn_jax.runtime.checkpoint import CheckpointError

# The files that make a folder hold a result (`results.json`) or a saved fit (`fit.json`).
RESULT_FILES = ("results.json", "fit.json")


def new_folder(root: str | os.PathLike, stem: str) -> pathlib.Path:
    """A new folder `root/stem-<date>-<time to the microsecond>-<pid>`, created exclusively."""
    root = pathlib.Path(root)
    root.mkdir(parents=True, exist_ok=True)
    while True:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
        folder = root / f"{stem}-{stamp}-{os.getpid()}"
        try:
            folder.mkdir()
            return folder
        except FileExistsError:  # the same microsecond in this process: take the next one
            continue


def holds_result(folder: pathlib.Path) -> str | None:
    """The first result file `folder` holds, or None."""
    return next((name for name in RESULT_FILES if (folder / name).exists()), None)


def check_no_result(folder: str | os.PathLike, overwrite: bool, how: str) -> None:
    """Refuses a folder that already holds a result unless `overwrite`; `how` names the switch
    that allows it (`--overwrite`, `overwrite=True`)."""
    folder = pathlib.Path(folder)
    if folder.exists() and not folder.is_dir():
        raise CheckpointError(f"{folder} is an existing file, not a folder: choose a folder.")
    found = holds_result(folder) if folder.is_dir() else None
    if found and not overwrite:
        raise CheckpointError(
            f"{folder} already holds a result ({found}); nothing was replaced. Choose another "
            f"folder, or pass {how} to replace it."
        )


def lock_path(folder: str | os.PathLike) -> pathlib.Path:
    """The lock file of `folder`: beside it, so the folder itself can be swapped whole."""
    folder = pathlib.Path(folder).absolute()
    return folder.parent / f".{folder.name}.lock"


def _owner_alive(owner: dict) -> bool:
    if owner.get("host") != socket.gethostname():
        return True  # another machine's process: it cannot be checked from here, so it stands
    try:
        os.kill(int(owner["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, KeyError, ValueError, TypeError):
        return True
    return True


class FolderLock:
    """`with FolderLock(folder, what):` the only writer of `folder` while the block runs.

    Re-entrant within a process: a lock this process already holds is not taken again, so a
    run that locks its output folder can call `Fit.save`, which locks it too.
    """

    _held: dict[pathlib.Path, int] = {}

    def __init__(self, folder: str | os.PathLike, what: str = "output folder"):
        self.folder = pathlib.Path(folder).absolute()
        self.path = lock_path(self.folder)
        self.what = what

    def __enter__(self) -> FolderLock:
        if FolderLock._held.get(self.path):
            FolderLock._held[self.path] += 1
            return self
        for _ in range(2):  # a second try after removing a stale lock
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
            except FileExistsError:
                self._refuse_or_clear()
                continue
            except OSError as err:  # the folder's parent is a file, read-only, /proc, ...
                raise CheckpointError(
                    f"cannot write to the {self.what} {self.folder} ({err.strerror or err}): "
                    f"choose a writable folder."
                ) from None
            with os.fdopen(fd, "w") as f:
                json.dump(_owner_record(), f)
            FolderLock._held[self.path] = 1
            return self
        raise CheckpointError(f"could not lock the {self.what} {self.folder}: try again.")

    def _refuse_or_clear(self) -> None:
        try:
            owner = json.loads(self.path.read_text())
        except (OSError, ValueError):
            owner = {}
        if isinstance(owner, dict) and owner and _owner_alive(owner):
            raise CheckpointError(
                f"the {self.what} {self.folder} is in use by another run (process "
                f"{owner.get('pid')} on {owner.get('host')}, since {owner.get('since')}). Wait "
                f"for it to finish, or choose another folder. If no such run exists, delete "
                f"{self.path}."
            )
        try:  # its owner is gone (or the file is unreadable): the lock is stale
            self.path.unlink()
        except FileNotFoundError:
            pass

    def __exit__(self, *exc) -> None:
        count = FolderLock._held.get(self.path, 0)
        if count > 1:
            FolderLock._held[self.path] = count - 1
            return
        FolderLock._held.pop(self.path, None)
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


def _owner_record() -> dict:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": datetime.datetime.now().isoformat(timespec="seconds"),
    }


def write_lock_for_test(folder: str | os.PathLike, pid: int) -> pathlib.Path:
    """Writes a lock of `folder` owned by `pid` on this host (tests: a folder in use)."""
    path = lock_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**_owner_record(), "pid": pid}))
    return path


def staging_folder(folder: str | os.PathLike) -> pathlib.Path:
    """A fresh, empty folder beside `folder` to write the new files into before `publish`."""
    folder = pathlib.Path(folder).absolute()
    staging = folder.parent / f".{folder.name}.staging-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)  # left by a crash of this very process id
    try:
        staging.mkdir(parents=True)
    except OSError as err:
        raise CheckpointError(
            f"cannot write beside {folder} ({err.strerror or err}): choose a writable folder."
        ) from None
    return staging


def publish(staging: pathlib.Path, folder: str | os.PathLike) -> pathlib.Path:
    """Puts the staged files in place of `folder`'s.

    A folder that does not exist or is empty is replaced by the staging folder in one rename. A
    folder holding a result (the caller has checked `overwrite`) is renamed aside first and
    deleted once the new one is in place. A folder holding only other files keeps them: each
    staged file replaces its namesake atomically, the last one written last.
    """
    folder = pathlib.Path(folder).absolute()
    if not folder.exists() or (folder.is_dir() and not any(folder.iterdir())):
        os.replace(staging, folder)
        return folder
    if holds_result(folder):
        old = folder.parent / f".{folder.name}.replaced-{os.getpid()}"
        shutil.rmtree(old, ignore_errors=True)
        os.replace(folder, old)
        os.replace(staging, folder)
        shutil.rmtree(old, ignore_errors=True)
        return folder
    for path in sorted(staging.iterdir(), key=lambda p: p.name == "fit.json"):
        os.replace(path, folder / path.name)
    staging.rmdir()
    return folder
