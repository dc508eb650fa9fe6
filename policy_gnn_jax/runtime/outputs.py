"""Output folders that nothing replaces by accident and two runs never write at once.

- `new_folder`: a default output folder, unique per run (time to the microsecond and the process
  id) and created exclusively, so runs started together never share one.
- `FolderLock`: one writer per folder (an output or a checkpoint folder). The lock is a file in
  the folder, `.policy-gnn.lock`, locked with `flock` and holding its owner's process id and host:
  the kernel releases it when its process ends however it ends, so a killed run never leaves a
  lock behind, and a second writer gets one error that names the owner. Paths are resolved
  first, so a symlink and its target share one lock.
- `check_no_result` / `publish`: a folder that holds any of a result's files is written only when
  asked (`overwrite`), and then only those files are replaced: everything else in the folder
  stays. `fit.json` goes first and comes back last, so a folder is never a complete fit made of
  two runs' files (`load` also checks every file against the manifest in `fit.json`).

Locks are taken with `flock`: reliable on a local disk; on a network file system it depends on
the server.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import pathlib
import shutil
import socket
import stat
import threading

from policy_gnn_jax.runtime import files
from policy_gnn_jax.runtime.checkpoint import CheckpointError, is_checkpoint_step, signals_deferred
from policy_gnn_jax.runtime.files import short_name

# The files a result is made of; `fit.json` (the manifest) is written last.
RESULT_FILES = ("results.json", "dataset.npz", "snapshots.npz", "fit.json")
LOCK_NAME = ".policy-gnn.lock"


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


def rescue_folder(folder: str | os.PathLike) -> pathlib.Path:
    """A new `<folder>.rescued-<time>-<pid>` beside `folder`, for what a run whose lock file was
    removed would have written there. Resolved first (`--out .` has no name of its own), and
    named from at most 160 bytes of the folder's name, so that it can be made."""
    where = files.resolve(folder)
    return new_folder(where.parent, f"{short_name(where.name, 160)}.rescued")


def holds_result(folder: pathlib.Path) -> str | None:
    """The first of a result's files `folder` holds, or None."""
    # lexists: a link to nowhere may be a result on a disk not mounted now
    return next((name for name in RESULT_FILES if os.path.lexists(folder / name)), None)


def check_no_result(folder: str | os.PathLike, overwrite: bool, how: str) -> None:
    """Refuses a folder that already holds a result's file unless `overwrite`; `how` names the
    switch that allows it (`--overwrite`, `overwrite=True`)."""
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
        # A sweep over splits checkpoints each split in <folder>/split-K/.
        steps += [f"{p.name}/{q.name}" for p in folder.glob("split-*") if p.is_dir()
                  for q in p.iterdir() if is_checkpoint_step(q)]  # fmt: skip
        if steps:
            raise CheckpointError(
                f"{folder} is a checkpoint folder (it holds {steps[0]}/): save results elsewhere."
            )
    _check_not_in_checkpoints(folder)
    found = holds_result(folder) if folder.is_dir() else None
    if found and not overwrite:
        raise CheckpointError(
            f"{folder} already holds {found}; nothing was replaced. Choose another folder, or "
            f"pass {how} to replace the result's files ({', '.join(RESULT_FILES)}); other files "
            f"there are kept."
        )


def check_input_kept(folder: str | os.PathLike, dataset) -> None:
    """Refuses an output folder where one of a result's files is the input graph itself
    (`--dataset DIR/dataset.npz --out DIR`): writing the result, or --overwrite, would replace
    it, and a sweep over splits removes it as an earlier result."""
    path = files.resolve(os.fspath(dataset))  # a link to a file there is that file
    if path.name not in RESULT_FILES or not path.is_file():
        return
    where, out = path.parent, files.resolve(folder)
    if where == out or (where.parent == out and where.name.startswith("split-")):
        raise CheckpointError(
            f"the input graph {dataset} is a file a result in {folder} is written to: it would "
            f"be replaced. Choose another --out, or move the graph out of that folder."
        )


def _check_not_in_checkpoints(folder: pathlib.Path) -> None:
    """A result may not sit inside a checkpoint folder: a run checkpointing there replaces and
    deletes its numbered step folders, with whatever was put in them."""
    for parent in folder.absolute().parents:
        try:
            names = [e.name for e in os.scandir(parent)]
        except OSError:
            continue
        candidates = (n for n in names if n.isdigit() or ".orbax-checkpoint-tmp" in n
                      or ".partial-" in n)  # fmt: skip
        if any(is_checkpoint_step(parent / n) for n in candidates):
            raise CheckpointError(
                f"{folder} is inside the checkpoint folder {parent}: a run checkpointing there "
                f"replaces and deletes its step folders. Choose a folder outside it."
            )


def lock_path(folder: str | os.PathLike) -> pathlib.Path:
    return files.resolve(folder) / LOCK_NAME


class FolderLock:
    """`with FolderLock(folder, what):` the only writer of `folder` while the block runs (the
    folder is created if needed).

    Re-entrant within a thread: a lock this thread already holds is not taken again, so a run
    that locks its output folder can call `Fit.save`, which locks it too. Another thread of the
    same process is another writer, refused like another process.
    """

    _held: dict[tuple[pathlib.Path, int], list] = {}  # (lock path, thread) -> [count, fd]

    def __init__(self, folder: str | os.PathLike, what: str = "output folder"):
        self.folder = pathlib.Path(folder)
        self.what = what

    def __enter__(self) -> FolderLock:
        self.path = lock_path(self.folder)
        self.key = (self.path, threading.get_ident())
        held = FolderLock._held.get(self.key)
        if held:
            held[0] += 1
            return self
        try:
            files.make_folders(self.path.parent)  # a failed command removes them if left empty
            fd = self._acquire()
        except IsADirectoryError:
            raise CheckpointError(
                f"{self.path} is a folder, where the {self.what}'s lock file goes: remove it."
            ) from None
        except PermissionError:
            if self.path.exists() or self.path.is_symlink():
                raise CheckpointError(
                    f"the lock file {self.path} belongs to another user: a run of theirs may be "
                    f"writing the {self.what}, or left it. Choose another folder, or ask them."
                ) from None
            raise CheckpointError(
                f"cannot write to the {self.what} {self.folder} (permission denied): choose a "
                f"writable folder."
            ) from None
        except OSError as err:  # a file in the way, read-only, /proc, ...
            raise CheckpointError(
                f"cannot write to the {self.what} {self.folder} ({err.strerror or err}): "
                f"choose a writable folder."
            ) from None
        FolderLock._held[self.key] = [1, fd]
        return self

    def _acquire(self) -> int:
        while True:
            if self.path.is_symlink():  # a planted link would make us write the file it names
                raise CheckpointError(
                    f"{self.path} is a symlink, where the {self.what}'s lock file goes: remove "
                    f"it (nothing was written through it)."
                )
            flags = os.O_CREAT | os.O_RDWR | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(self.path, flags, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = _read_owner(fd)
                os.close(fd)
                raise CheckpointError(
                    f"the {self.what} {self.folder} is in use by another run (process "
                    f"{owner.get('pid', '?')} on {owner.get('host', '?')}, since "
                    f"{owner.get('since', '?')}). Wait for it to finish, or choose another folder."
                ) from None
            # The previous owner may have removed the file between our open and our lock: the
            # lock then guards a file nobody else can see, so take the one at the path again.
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:  # a FIFO, a hard link, ...
                os.close(fd)
                raise CheckpointError(
                    f"{self.path}, where the {self.what}'s lock file goes, is "
                    f"{_not_a_plain_file(info)}, not a plain file of its own: remove it (nothing "
                    f"was written to it)."
                )
            try:
                same = os.stat(self.path).st_ino == info.st_ino
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.write(fd, json.dumps(_owner_record()).encode())
                return fd
            os.close(fd)

    @classmethod
    def holds(cls, folder) -> bool:
        """Whether this thread already holds `folder`'s lock."""
        return (lock_path(folder), threading.get_ident()) in cls._held

    def still_held(self) -> bool:
        """Whether the lock file at the path is still the one this lock holds (someone may
        have deleted it by hand, letting another run take a new one)."""
        held = FolderLock._held.get(self.key)
        try:
            return held is not None and os.stat(self.path).st_ino == os.fstat(held[1]).st_ino
        except FileNotFoundError:
            return False

    def __exit__(self, *exc) -> None:
        held = FolderLock._held.get(self.key)
        if held is None:
            return
        held[0] -= 1
        if held[0]:
            return
        del FolderLock._held[self.key]
        if self.still_held_by(held[1]):  # never another run's lock, made after ours was deleted
            self.path.unlink()  # while still locked: a waiter then retries on a fresh file
        os.close(held[1])

    def still_held_by(self, fd: int) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False


def _read_owner(fd: int) -> dict:
    try:
        owner = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}


def _owner_record() -> dict:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": datetime.datetime.now().isoformat(timespec="seconds"),
    }


def staging_folder(folder: str | os.PathLike) -> pathlib.Path:
    """A fresh, empty folder inside `folder` to write the new files into before `publish`."""
    folder = pathlib.Path(folder)
    staging = folder / f".staging-{os.getpid()}-{threading.get_ident()}"
    try:
        for old in folder.glob(".staging-*-*"):  # left by a crash: its process is gone
            parts = old.name.split("-")
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                if not _alive(parts[1]):  # only folders named as this module names them
                    shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
    except OSError as err:
        raise CheckpointError(
            f"cannot write to {folder} ({err.strerror or err}): choose a writable folder."
        ) from None
    return staging


def _not_a_plain_file(info: os.stat_result) -> str:
    """What a path that should be a plain file of its own is instead, in words."""
    if stat.S_ISREG(info.st_mode):
        return f"a file with {info.st_nlink} names (hard links)"
    kinds = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))  # fmt: skip
    return next((name for test, name in kinds if test(info.st_mode)), "a special file")


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def publish(staging: pathlib.Path, folder: str | os.PathLike) -> pathlib.Path:
    """Moves the staged result files into `folder`, each by an atomic rename: the old `fit.json`
    first out, the new one last in. Other files in `folder` are not touched."""
    folder = pathlib.Path(folder)
    with signals_deferred():  # a Ctrl-C or SIGTERM lands after the last rename, never between
        try:
            (folder / "fit.json").unlink()
        except FileNotFoundError:
            pass
        for name in RESULT_FILES:
            if (staging / name).exists():
                os.replace(staging / name, folder / name)
        staging.rmdir()
    return folder
