"""Files a run writes and reads: atomic writes under the user's umask, the project's own JSON
read back with a clear error, and output paths proven usable before any training."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import pathlib
import re
import stat
import tempfile
from typing import NoReturn

from policy_gnn_jax.data.on_disk import ARRAY_FILES, META_FILE


class CheckpointError(ValueError):
    """A checkpoint or results file is unreadable, or belongs to another run. Says what to do."""


def in_link_loop(path: pathlib.Path) -> bool:
    """Whether `path` is a symbolic link that leads back to itself."""
    try:
        path.resolve(strict=True)
    except RuntimeError:  # how Python before 3.13 names a loop
        return True
    except OSError as err:
        return err.errno == errno.ELOOP
    return False


def resolve(path: str | os.PathLike) -> pathlib.Path:
    """`path` with its links followed (`Path.resolve`); a loop of links on the way is one
    CheckpointError naming it, not pathlib's RuntimeError."""
    try:
        return pathlib.Path(path).resolve()
    except (RuntimeError, OSError) as err:  # RuntimeError: a loop, before Python 3.13
        if isinstance(err, OSError) and err.errno != errno.ELOOP:
            raise
        raise CheckpointError(
            f"{path} is, or lies under, a link in a loop of links: replace one of them with a "
            f"folder or a file, or choose another path."
        ) from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> pathlib.Path:
    """Writes `data` to `path` atomically (temp file in the same folder, fsync, rename), with the
    permissions any new file gets under the user's umask (a temp file starts at 0600)."""
    path = pathlib.Path(path)
    # The temporary name is bounded: the name itself may already be as long as allowed.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{short_name(path.name)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        if path.absolute() in _MUST_BE_NEW:
            _place_new(tmp, path)
        else:
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


# Output files found absent when their run began (`check_writable_file(overwrite=False)`),
# until that run first writes them: one that another program creates meanwhile is never replaced.
_MUST_BE_NEW: set[pathlib.Path] = set()


def _place_new(tmp: str, path: pathlib.Path) -> None:
    """Gives the written `tmp` the name `path` only if nothing has that name (a hard link fails
    if it has); else keeps it beside, as `<stem>.rescued-<pid><suffix>`, and says so."""
    try:
        os.link(tmp, path)
        os.remove(tmp)  # the name holds it now
    except FileExistsError:
        _keep_beside(tmp, path)
    except OSError as err:  # a file system without hard links: look, then rename
        if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        if os.path.lexists(path):
            _keep_beside(tmp, path)  # raises
        os.replace(tmp, path)
    _MUST_BE_NEW.discard(path.absolute())  # the run's own from now on


def _keep_beside(tmp: str, path: pathlib.Path) -> NoReturn:
    kept = path.with_name(f"{path.stem}.rescued-{os.getpid()}{path.suffix}")
    os.replace(tmp, kept)
    raise CheckpointError(
        f"{path} was created by another program during this run, and is kept; this run's "
        f"result is in {kept}."
    )


def short_name(name: str, size: int = 64) -> str:
    """`name` cut to at most `size` bytes (whole characters): a part of a longer name made
    from it (a temporary file, a rescue folder) that leaves the rest room under NAME_MAX."""
    while len(os.fsencode(name)) > size:
        name = name[:-1]
    return name


def atomic_write_text(path: str | os.PathLike, text: str) -> pathlib.Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj) -> pathlib.Path:
    return atomic_write_text(path, json.dumps(obj, indent=2))


def read_json(path: str | os.PathLike, made_by: str | None = None):
    """Reads a JSON file the project wrote; a corrupt one is a clear CheckpointError. `made_by`:
    the command that writes it, for a file read as an input (deleting it would not remake it)."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise CheckpointError(
            f"{path} does not exist (a relative path is read from the working directory "
            f"{pathlib.Path.cwd()}): run the command from the repository root, or pass the "
            f"file's path."
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


def refuse_url(path: str | os.PathLike, what: str, kind: str) -> None:
    """Remote storage is not supported, and orbax would take `gs:/...` for it."""
    if isinstance(path, str | os.PathLike) and re.match(
        r"[A-Za-z][A-Za-z0-9+.-]*:/", str(os.fspath(path))
    ):
        raise CheckpointError(
            f"{what} {os.fspath(path)} is a URL: remote storage is not supported; give a local "
            f"(or mounted) {kind}."
        )


def check_name_fits(path: pathlib.Path, what: str) -> None:
    """A name longer than the file system allows is one error naming it, before any write."""
    size, limit = len(os.fsencode(path.name)), _name_max(path)
    if size > limit:
        raise CheckpointError(
            f"{what} name {path.name[:40]}... is too long ({size} bytes; this system allows "
            f"{limit}): choose a shorter name."
        )


# The files of a saved fit (`saved_fit`): a script's output written over one would break it.
FIT_FILES = ("results.json", "fit.json", "snapshots.npz", "dataset.npz")


def check_folder_path(path: str | os.PathLike, what: str) -> pathlib.Path:
    """`path` as a folder to use: not an empty path (the current folder, unasked), an existing
    file, nor a link to nothing."""
    if not isinstance(path, str | os.PathLike) or isinstance(os.fspath(path), bytes):
        raise CheckpointError(
            f"the {what} must be a path (text or a pathlib.Path), got {type(path).__name__}."
        )
    if isinstance(path, str) and not path.strip():
        raise CheckpointError(f"the {what} is an empty path: name a folder.")
    refuse_url(path, what, "folder")
    path = pathlib.Path(path)
    if path.is_symlink() and not path.exists():
        if in_link_loop(path):
            raise CheckpointError(
                f"{what} {path} is a link in a loop of links ({path} -> {os.readlink(path)} -> "
                f"...): replace one of them with a folder, or choose another."
            )
        raise CheckpointError(
            f"{what} {path} is a link to {os.readlink(path)}, which does not exist: create that "
            f"folder or choose another."
        )
    if path.exists() and not path.is_dir():
        raise CheckpointError(f"{what} {path} is an existing file, not a folder: choose a folder.")
    return path


# How much deeper than an output or checkpoint folder a run writes (a staging folder and a
# temporary file, a split's folder, orbax's step folders), with room to spare.
DEPTH_WRITTEN = 256


def _path_max(path: pathlib.Path) -> int:
    try:
        return os.pathconf(_existing_parent(path), "PC_PATH_MAX")
    except (OSError, ValueError):
        return 4096


def _name_max(path: pathlib.Path) -> int:
    try:
        return os.pathconf(_existing_parent(path), "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def _existing_parent(path: pathlib.Path) -> pathlib.Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_writable_dir(path: str | os.PathLike, what: str = "output folder") -> pathlib.Path:
    """Creates `path` if needed and proves a file can be written there, before any training:
    its path leaves room for what the run writes inside it."""
    path = check_folder_path(path, what)
    length, limit = len(os.fsencode(str(path.absolute()))), _path_max(path)
    if length + DEPTH_WRITTEN > limit:
        raise CheckpointError(
            f"{what} {str(path)[:60]}... is a path of {length} bytes; a run writes files up "
            f"to {DEPTH_WRITTEN} bytes deeper, and this system allows paths of {limit}: choose "
            f"a shorter folder."
        )
    try:
        make_folders(path)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".write-test.")
        os.close(fd)
        os.remove(probe)
    except OSError as err:
        raise CheckpointError(
            f"cannot write to {what} {path} ({err.strerror or err}): choose a writable folder."
        ) from None
    return path


# Folders this process made for its outputs: a failed command removes those left empty.
FOLDERS_MADE: set[pathlib.Path] = set()


def make_folders(path: pathlib.Path) -> None:
    """`path` and its missing parents, each recorded in FOLDERS_MADE."""
    absent = absent_folders([path])
    path.mkdir(parents=True, exist_ok=True)
    FOLDERS_MADE.update(absent)


def remove_folders_left_empty(made=()) -> None:
    """Removes the folders of `made` and FOLDERS_MADE that hold no file (with their empty
    sub-folders: all of them a failed command's own), the deepest first."""
    folders = {pathlib.Path(f).absolute() for f in (*made, *FOLDERS_MADE)}
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        if not folder.is_dir():
            continue
        for inner, _, _ in sorted(os.walk(folder), key=lambda w: -len(w[0])):
            try:
                os.rmdir(inner)  # refuses (OSError) where anything was written
            except OSError:
                pass


def absent_folders(folders) -> list[pathlib.Path]:
    """Each of `folders` and its parents that does not exist yet, the deepest first."""
    absent = set()
    for folder in folders:
        path = pathlib.Path(folder).absolute()
        while not path.exists() and path != path.parent:
            absent.add(path)
            path = path.parent
    return sorted(absent, key=lambda p: len(p.parts), reverse=True)


def check_writable_file(
    path: str | os.PathLike, what: str = "output file", overwrite: bool | None = None
) -> pathlib.Path:
    """Proves `path` can be written (its folder made if needed) before any work is done.
    `overwrite=False`: an existing file is refused too (None: replacing it is the script's
    documented behaviour, or the file is merged into through `study_files`, which follows a
    link). A script's own output file (`overwrite` given) that is a link, or one name of a file
    with several, is refused: replacing it would leave the file it names with the old result."""
    refuse_url(path, what, "file")  # before pathlib makes gs:// one slash
    _refuse_no_file_name(path, what)  # before pathlib makes "" the current folder, "a/" "a"
    path = pathlib.Path(path)
    check_name_fits(path, what)
    if overwrite is not None and path.is_symlink():  # replaced whole, it would lose the link
        raise CheckpointError(
            f"{what} {path} is a symbolic link (to {os.readlink(path)}): pass the file it "
            f"names itself, or another name."
        )
    if path.name in FIT_FILES and (path.parent / "fit.json").is_file():  # even with overwrite
        raise CheckpointError(
            f"{path} is a file of the saved fit in {path.parent}: writing {what} over it would "
            f"break that fit. Pass another file."
        )
    if path.name in (META_FILE, *ARRAY_FILES) and (path.parent / META_FILE).is_file():
        raise CheckpointError(
            f"{path} is a file of the graph in {path.parent} (a folder of arrays): writing "
            f"{what} over it would break that graph. Pass another file."
        )
    if path.is_dir():
        raise CheckpointError(f"{what} {path} is a folder: pass a file name.")
    if path.name.endswith(".lock"):  # another run's lock on <name> would be written over
        raise CheckpointError(f"{what} {path} is named like a lock file: choose another name.")
    names = path.stat().st_nlink if path.is_file() else 1
    if overwrite is not None and names > 1:  # the other names would keep the old content
        raise CheckpointError(
            f"{what} {path} is one of {names} names of one file (hard links): "
            f"writing here would leave the others with the old content; choose another --out."
        )
    exists = CheckpointError(f"{path} exists: pass --overwrite to replace it, or another --out.")
    if overwrite is False and path.exists():  # a result is never replaced unasked
        raise exists
    check_writable_dir(path.parent, f"the folder for {what} {path.name},")
    if overwrite is not None:  # a script's own output file: one writer until it ends
        hold_output_lock(path)
        if overwrite is False and path.exists():  # written meanwhile by a run now ended
            raise exists
        if overwrite is False:
            _MUST_BE_NEW.add(path.absolute())
    return path


def _refuse_no_file_name(path: str | os.PathLike, what: str) -> None:
    text = os.fspath(path)
    if not isinstance(text, str):
        return
    if not text.strip():
        raise CheckpointError(f"the {what} is an empty path: name a file.")
    if text.endswith(("/", os.sep)):
        raise CheckpointError(f"{what} {text} ends in '/', which names a folder: pass a file name.")


_OUTPUT_LOCKS: dict[pathlib.Path, int] = {}  # lock file -> its open, locked descriptor


def hold_output_lock(path: pathlib.Path) -> None:
    """This process is the only writer of the file `path` until `release_output_locks()` (or
    its end: the kernel releases a lock with its process): `<path>.lock`, held with `flock` and
    holding the owner's process id. A second writer gets one CheckpointError naming it."""
    lock = path.with_name(path.name + ".lock").absolute()
    if lock in _OUTPUT_LOCKS:
        return
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as err:  # a symlink there too (ELOOP): nothing is written through it
        raise CheckpointError(
            f"cannot use {lock} as the lock file of {path.name} ({err.strerror or err}): move "
            f"it away, or choose another --out."
        ) from None
    problem = _not_a_lock_file(fd, lock, path)
    if problem:
        os.close(fd)
        raise CheckpointError(problem)
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    _OUTPUT_LOCKS[lock] = fd


def _not_a_lock_file(fd: int, lock: pathlib.Path, path: pathlib.Path) -> str | None:
    """Why the open file `lock` may not be taken as `path`'s lock (None: it is now locked by
    this process): another run holds it, or it is a user's file (a hard link to one, or text
    that is no process id), which taking it would empty and remove."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        return (f"{lock}, where the lock file of {path.name} goes, is a hard link or not a plain "
                f"file: move it away, or choose another --out.")  # fmt: skip
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        owner = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
        return (f"another run (process {owner}) is writing {path}: wait for it to end, or "
                f"choose another --out.")  # fmt: skip
    held = os.read(fd, 64).decode(errors="replace").strip()
    if held and not held.isdigit():  # a stale lock holds its dead owner's process id
        return (f"{lock}, where the lock file of {path.name} goes, holds something else: move "
                f"it away, or choose another --out.")  # fmt: skip
    return None


def release_output_locks() -> None:
    """Ends `hold_output_lock`'s locks: each file is removed while still locked, then closed."""
    _MUST_BE_NEW.clear()
    for lock, fd in list(_OUTPUT_LOCKS.items()):
        lock.unlink(missing_ok=True)
        os.close(fd)
        del _OUTPUT_LOCKS[lock]
