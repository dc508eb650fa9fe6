"""A contextual SBM of any size written as a folder of arrays (`on_disk.py`'s form), in bounded
memory: features a block of rows at a time, edges drawn in batches, each file complete before
it takes its name, `meta.json` last."""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import pathlib

import numpy as np

from policy_gnn_jax.data.checks import InvalidDatasetError
from policy_gnn_jax.data.dataset import DataError
from policy_gnn_jax.data.generators import (
    _check_csbm_args,
    _check_whole,
    _planetoid_style_split,
)
from policy_gnn_jax.data.on_disk import ARRAY_FILES, META_FILE


class FolderExistsError(InvalidDatasetError, FileExistsError):
    """A folder holding an earlier write, or a file: a ValueError and a FileExistsError."""


# Edge draws made at once: their temporaries stay near 100 MB however large the graph.
EDGE_DRAWS = 2**22
# Held (flock) by the folder's one writer: two writes at once would mix two graphs' files.
LOCK_FILE = ".write_csbm.lock"


def write_csbm(
    folder,
    num_nodes: int,
    num_classes: int = 4,
    num_features: int = 64,
    homophily: float = 0.8,
    avg_degree: float = 8.0,
    feature_signal: float = 1.0,
    seed: int = 0,
    num_train_per_class: int = 20,
    num_val: int = 500,
    num_test: int = 1000,
    rows_per_chunk: int = 65536,
    overwrite: bool = False,
) -> pathlib.Path:
    """Writes `make_csbm`'s contextual SBM into `folder` as memory-mappable files.

    The model and the arguments are `make_csbm`'s, but the random numbers are drawn in another
    order (features block by block, in float32), so the graph differs from `make_csbm`'s with
    the same seed. The same arguments and seed give the same files, whatever `rows_per_chunk`.

    Features are generated and written `rows_per_chunk` rows at a time; the edge list is sorted
    in memory as one int64 per directed edge (about 0.7 GB for 1e7 nodes of degree 8). Each file
    is renamed into place when whole, `meta.json` last: an interrupted write leaves none, and
    `load_arrays` refuses the folder. One writer at a time; `overwrite` replaces the files of an
    earlier write (without it such a folder is refused). Returns the folder.
    """
    _check_csbm_args(
        num_nodes,
        num_classes,
        num_features,
        homophily,
        avg_degree,
        num_train_per_class,
        num_val,
        num_test,
        seed,
        feature_signal,
    )
    _check_whole("write_csbm", rows_per_chunk=(rows_per_chunk, 1))
    arguments = dict(
        num_nodes=int(num_nodes),
        num_classes=int(num_classes),
        num_features=int(num_features),
        homophily=float(homophily),
        avg_degree=float(avg_degree),
        feature_signal=float(feature_signal),
        seed=int(seed),
        num_train_per_class=int(num_train_per_class),
        num_val=int(num_val),
        num_test=int(num_test),
    )
    created = not pathlib.Path(folder).exists() if isinstance(folder, str | os.PathLike) else False
    with _only_writer(folder, created):
        return _write_locked(folder, overwrite, rows_per_chunk, arguments)


@contextlib.contextmanager
def _only_writer(folder, created: bool):
    """This process is the only writer of `folder` (made if needed) while the block runs: a
    second is refused. The kernel releases the lock however the process ends; the lock file
    goes while still held, and one taken on a file its owner just removed is taken again."""
    path = pathlib.Path(folder) if isinstance(folder, str | os.PathLike) and str(folder) else None
    if path is not None and created:
        with contextlib.suppress(OSError):  # _prepare_folder names what cannot be made
            path.mkdir(parents=True)
    lock = path / LOCK_FILE if path is not None and path.is_dir() else None
    while lock is not None:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataError(
                f"another process is writing {folder}: wait for it to end, or write into "
                f"another folder."
            ) from None
        with contextlib.suppress(FileNotFoundError):
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                break
        os.close(fd)
    try:
        yield
    finally:
        if lock is not None:
            lock.unlink(missing_ok=True)
            os.close(fd)
            if created and not any(path.iterdir()):
                path.rmdir()


def _write_locked(folder, overwrite, rows_per_chunk, arguments) -> pathlib.Path:
    folder = _prepare_folder(folder, overwrite)
    try:
        num_edges = _write_arrays(folder, rows_per_chunk, **arguments)
    except BaseException as err:  # an interrupt too: no hidden temporary file of GBs is left
        for name in ARRAY_FILES:  # the folder, if this write made it, goes with the lock
            _partial(folder, name).unlink(missing_ok=True)
        if isinstance(err, OSError):  # a full disk, a quota, a file-size limit, ...
            raise DataError(
                f"cannot write {folder} ({err.strerror or err}): free some space or choose "
                f"another folder; no graph was written."
            ) from None
        raise
    meta = dict(name="csbm", num_classes=arguments["num_classes"], num_edges=num_edges)
    _write_meta(folder, {**meta, "generator": "write_csbm", "arguments": arguments})
    return folder


def _write_arrays(folder, rows_per_chunk, *, num_nodes, num_classes, num_features, homophily,
                  avg_degree, feature_signal, seed, num_train_per_class, num_val,
                  num_test) -> int:  # fmt: skip
    """Draws the graph and writes its arrays, each renamed into place once all are written;
    returns the number of directed edges."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, num_nodes, dtype=np.int32)
    means = rng.normal(size=(num_classes, num_features))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    shifts = (feature_signal * means).astype(np.float32)
    rows = _feature_rows(rng, labels, shifts, rows_per_chunk)
    written = [_write_npy(folder, "features.npy", np.float32, (num_nodes, num_features), rows)]
    keys = _edge_keys(rng, labels, num_classes, homophily, avg_degree)
    rows = _edge_rows(keys, num_nodes)
    written.append(_write_npy(folder, "edges.npy", np.int32, (2, keys.size), rows))
    num_edges = int(keys.size)
    del keys  # the largest array: gone before the splits' temporaries
    splits = _planetoid_style_split(
        rng, labels, num_classes, num_train_per_class, num_val, num_test
    )
    for name, array in zip(ARRAY_FILES[2:], (labels, *splits), strict=True):
        written.append(_save(folder, name, array))
    for partial, name in written:
        os.replace(partial, folder / name)
    return num_edges


def _prepare_folder(folder, overwrite) -> pathlib.Path:
    """The folder, created; refused if it holds an earlier write and `overwrite` is off. With
    `overwrite`, the old `meta.json` goes first, so a rewrite cut short is never complete."""
    if not isinstance(overwrite, bool | np.bool_):
        raise InvalidDatasetError(f"overwrite must be True or False, got {overwrite!r}.")
    if not isinstance(folder, str | os.PathLike) or not str(folder).strip():
        raise InvalidDatasetError(
            f"folder must be the path of a folder to write into, got {folder!r}."
        )
    folder = pathlib.Path(folder)
    if folder.exists() and not folder.is_dir():
        raise FolderExistsError(f"{folder} is a file, not a folder: pass a folder to write into.")
    present = [name for name in (*ARRAY_FILES, META_FILE) if (folder / name).exists()]
    if present and not overwrite:
        raise FolderExistsError(
            f"{folder} already holds {', '.join(present)}; nothing was replaced. Write into "
            f"another folder, or pass overwrite=True to replace them."
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DataError(
            f"cannot create {folder} ({err.strerror or err}): pass a folder you can write to."
        ) from None
    (folder / META_FILE).unlink(missing_ok=True)
    return folder


def _partial(folder: pathlib.Path, name: str) -> pathlib.Path:
    return folder / f".{name}.partial"


def _save(folder: pathlib.Path, name: str, array: np.ndarray) -> tuple[pathlib.Path, str]:
    """Writes a small array under its temporary name; returns (that path, the final name)."""
    path = _partial(folder, name)
    with open(path, "wb") as file:  # a file object: np.save would add ".npy" to the name
        np.save(file, array)
    return path, name


def _write_npy(folder, name: str, dtype, shape: tuple, blocks) -> tuple[pathlib.Path, str]:
    """Writes a .npy file from `blocks`, arrays whose values in order are the array's in C
    order, under its temporary name; returns (that path, the final name).

    Plain writes rather than a writable memory map: the written pages then count as the page
    cache's, not as this process's resident memory, and nothing is held but one block.
    """
    path = _partial(folder, name)
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False}
    written = 0
    with open(path, "wb") as file:
        np.lib.format.write_array_header_1_0(file, {**header, "shape": shape})
        for block in blocks:
            file.write(np.ascontiguousarray(block, dtype=dtype).data)
            written += block.size
    assert written == math.prod(shape), (name, written, shape)
    return path, name


def _feature_rows(rng, labels, shifts, rows_per_chunk):
    """`shifts[label] + N(0, I)` per row, a block of rows at a time."""
    for start in range(0, labels.size, rows_per_chunk):
        stop = min(start + rows_per_chunk, labels.size)
        block = rng.standard_normal((stop - start, shifts.shape[1]), dtype=np.float32)
        block += shifts[labels[start:stop]]
        yield block


def _edge_keys(rng, labels, num_classes, homophily, avg_degree) -> np.ndarray:
    """The sorted, distinct keys `receiver * N + sender` of the symmetric edge list.

    Each draw is one undirected edge (both directions are kept): a random sender, and a
    receiver of its class with probability `homophily`, else of another class, uniformly.
    Self-loops (a draw into an empty class) and duplicates are dropped.
    """
    n = labels.size
    draws = max(1, int(round(n * avg_degree / 2)))
    members = np.argsort(labels, kind="stable").astype(np.int32)  # nodes grouped by class
    counts = np.bincount(labels, minlength=num_classes)
    starts = np.cumsum(counts) - counts
    keys = np.empty(2 * draws, np.int64)
    filled = 0
    for done in range(0, draws, EDGE_DRAWS):
        size = min(EDGE_DRAWS, draws - done)
        senders = rng.integers(0, n, size)
        same = rng.random(size) < homophily
        other = (labels[senders] + rng.integers(1, num_classes, size)) % num_classes
        target = np.where(same, labels[senders], other)
        offset = rng.integers(0, np.maximum(counts[target], 1))
        receivers = np.where(counts[target] > 0, members[starts[target] + offset], senders)
        keep = senders != receivers
        senders, receivers = senders[keep], receivers[keep]
        kept = senders.size
        keys[filled : filled + kept] = receivers * n + senders
        keys[filled + kept : filled + 2 * kept] = senders * n + receivers
        filled += 2 * kept
    keys = keys[:filled]
    keys.sort()
    return keys[: _drop_repeats(keys)]


def _drop_repeats(keys: np.ndarray) -> int:
    """Moves the distinct values of sorted `keys` to its front, in place, a block at a time;
    returns how many there are."""
    written, last = 0, None
    for start in range(0, keys.size, EDGE_DRAWS):
        block = keys[start : start + EDGE_DRAWS]
        fresh = np.empty(block.size, bool)
        fresh[0] = last is None or block[0] != last
        fresh[1:] = block[1:] != block[:-1]
        last = block[-1]
        kept = block[fresh]  # a copy: the writes below may reach into this block
        keys[written : written + kept.size] = kept
        written += kept.size
    return written


def _edge_rows(keys: np.ndarray, num_nodes: int):
    """The senders, then the receivers, of the sorted keys, a block at a time."""
    for row in (np.remainder, np.floor_divide):
        for start in range(0, keys.size, EDGE_DRAWS):
            yield row(keys[start : start + EDGE_DRAWS], num_nodes)


def _write_meta(folder: pathlib.Path, meta: dict) -> None:
    path = _partial(folder, META_FILE)
    path.write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(path, folder / META_FILE)
