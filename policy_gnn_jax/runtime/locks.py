"""One writer per output folder or file, as docs/reliability.md's promise 4 says: `FolderLock`
for a run's folders, `claim_output_file` / `hold_output_lock` for a script's output file. Each
is an exclusive `flock` on a lock file holding the owner's process id: the kernel releases it
however its process ends, and a second writer is told which process holds it.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import threading

from policy_gnn_jax.runtime.outputs import CheckpointError, check_writable_file, real_path

LOCK_NAME = ".policy-gnn.lock"


def claim_output_file(path, what: str = "output file", overwrite: bool = False) -> pathlib.Path:
    """A script's own output file: `outputs.check_writable_file`, then this process is its only
    writer until it ends (`hold_output_lock`), so a second run writing it is refused."""
    path = check_writable_file(path, what, overwrite)
    hold_output_lock(path)
    return path


_OUTPUT_LOCKS: dict[pathlib.Path, int] = {}  # lock file -> its open, locked descriptor


def hold_output_lock(path: pathlib.Path) -> None:
    """This process is the only writer of the file `path` until `release_output_locks()` (or
    its end): `<path>.lock`, locked with `flock` and holding the owner's process id."""
    lock = path.with_name(path.name + ".lock").absolute()
    if lock in _OUTPUT_LOCKS:
        return
    _OUTPUT_LOCKS[lock] = _take_lock(
        lock,
        0o644,
        cannot=lambda why: (
            f"cannot make {lock}, the lock file of {path.name} ({why}): choose another --out."
        ),
        busy=lambda owner: (
            f"another run (process {owner or 'unknown'}) is writing {path}: wait "
            f"for it to end, or choose another --out."
        ),
        busy_errors=(OSError,),
    )


def _take_lock(lock: pathlib.Path, mode: int, *, cannot, busy, busy_errors=(BlockingIOError,),
               before=None) -> int:  # fmt: skip
    """The open descriptor of `lock`, locked with `flock` and holding this process's id, or a
    CheckpointError: `cannot(reason)` where it cannot be opened (`before()` runs first, inside
    the same check), `busy(owner's id)` where another process holds it."""
    while True:
        try:
            if before is not None:
                before()
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, mode)
        except OSError as err:
            raise CheckpointError(cannot(err.strerror or err)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except busy_errors:
            owner = os.pread(fd, 64, 0).decode(errors="replace").strip()
            os.close(fd)
            raise CheckpointError(busy(owner)) from None
        if _is_at(fd, lock):
            break
        os.close(fd)  # its owner removed it after this open: lock the file there now
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


def _is_at(fd: int, path: pathlib.Path) -> bool:
    """Whether the open file `fd` is still the file at `path`. A lock's owner removes the file
    as it lets go (while still holding it), so a file opened before that is nobody's lock."""
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def release_output_locks() -> None:
    """Ends `hold_output_lock`'s locks: each file is removed while still locked, then closed."""
    for lock, fd in list(_OUTPUT_LOCKS.items()):
        lock.unlink(missing_ok=True)
        os.close(fd)
        del _OUTPUT_LOCKS[lock]


class FolderLock:
    """`with FolderLock(folder, what):` the only writer of `folder` while the block runs (the
    folder is created if needed). Re-entrant within a thread, so a run that locks its output
    folder can call `Fit.save`, which locks it too; another thread is another writer."""

    _held: dict[tuple[pathlib.Path, int], list] = {}  # (lock path, thread) -> [count, fd]

    def __init__(self, folder: str | os.PathLike, what: str = "output folder"):
        self.folder = pathlib.Path(folder)
        self.what = what

    def __enter__(self) -> FolderLock:
        self.path = real_path(self.folder) / LOCK_NAME  # a link and its target share one lock
        self.key = (self.path, threading.get_ident())
        held = FolderLock._held.get(self.key)
        if held:
            held[0] += 1
            return self
        fd = _take_lock(
            self.path,
            0o666,
            cannot=lambda why: (
                f"cannot write to the {self.what} {self.folder} ({why}): choose a writable folder."
            ),
            busy=lambda owner: (
                f"the {self.what} {self.folder} is in use by another run (process "
                f"{owner or '?'}). Wait for it to finish, or choose another folder."
            ),
            before=lambda: self.folder.mkdir(parents=True, exist_ok=True),
        )
        FolderLock._held[self.key] = [1, fd]
        return self

    def __exit__(self, *exc) -> None:
        held = FolderLock._held.get(self.key)
        if held is None:
            return
        held[0] -= 1
        if held[0]:
            return
        del FolderLock._held[self.key]
        self.path.unlink(missing_ok=True)  # while still locked: a waiter retries on a new file
        os.close(held[1])
