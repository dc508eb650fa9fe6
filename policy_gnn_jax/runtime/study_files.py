"""The JSON files that studies merge their entries into (the headroom analysis, the
adaptive-depth study and its ablation, the heterophily study): read, checked and written back
as one step under a lock, so nothing of another run is lost.

Each script names the shape its file has (`shape_ok`; the studies' own are in
`contrib/study_shapes.py`). A file of another shape is not merged
into (a saved fit's results.json, another tool's JSON): the merge would replace what it held,
and it is refused before any sweep and again at the write. Two runs merging into one file at
once take turns: the read, the merge and the atomic write happen under an exclusive `flock` on
the file's folder (a folder's inode stays while the file is replaced by renames; the lock is
held for milliseconds, and other files in the folder are not affected), so each run's entries
are added to what the other wrote.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pathlib
import sys
from collections.abc import Callable

import numpy as np

from policy_gnn_jax.runtime import outputs, records


def check(path, what: str, shape_ok: Callable[[object], bool]) -> dict:
    """What `path` holds ({} when it does not exist yet). CheckpointError when it is a saved
    fit's file or not a file of this kind (`shape_ok`), naming `what` it should be."""
    path = pathlib.Path(path)
    folder = path.parent
    if path.name in outputs.RESULT_FILES and (folder / "fit.json").is_file():
        raise outputs.CheckpointError(
            f"{path} is a file of the saved fit in {folder}, not {what}: merging into it would "
            f"break that fit. Pass another file."
        )
    if not path.exists():
        return {}
    value = outputs.read_json(path)
    if not shape_ok(value):
        raise outputs.CheckpointError(
            f"{path} is not {what} (its contents have another shape), so nothing is merged "
            f"into it: move it away, or pass another file."
        )
    return value


def merge(path, what: str, shape_ok, update: Callable[[dict], dict],
          then: Callable[[dict], None] | None = None) -> dict:  # fmt: skip
    """Writes `update(what the file holds now)` to `path` (atomically), the read and the write
    under the folder's lock; returns what was written. `update` may refuse (raise): then
    nothing is written. `then(merged)` writes the files made from the merged whole (a table, a
    figure's points beside it) under the same lock, so that two runs' merges never interleave."""
    path = outputs.real_path(path)  # a link: its target is the file merged into
    with _folder_locked(path.parent):
        merged = update(check(path, what, shape_ok))
        outputs.atomic_write_text(path, json.dumps(merged, indent=2))
        if then is not None:
            then(merged)
    return merged


@contextlib.contextmanager
def _folder_locked(folder: pathlib.Path):
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # waits for another run's merge: milliseconds
        yield
    finally:
        os.close(fd)  # releases the lock


def read_cache(path, tag: str, expected: dict, overwrite: bool, what: str) -> dict | None:
    """The arrays a study cached at `path` for exactly `tag` (a JSON of what made them), else
    None: nothing there, or a damaged cache (unreadable, or an array not as `expected`: a shape,
    or an array it must equal), which is made again with a warning. The cache of another run is
    refused unless `overwrite`, naming `what` it holds, so it is never replaced unasked."""
    path = pathlib.Path(path)
    if path.is_dir():
        raise outputs.CheckpointError(f"{path} is a folder, where {what} go: move it away.")
    if not path.exists():
        return None
    try:
        with np.load(path) as z:
            if str(z["tag"]) != tag:
                if overwrite:
                    return None
                raise outputs.CheckpointError(
                    f"{path} holds {what} of another configuration, data or XLA_FLAGS (this "
                    f"process has XLA_FLAGS={records.xla_flags()!r}): nothing was replaced. Pass "
                    f"--overwrite to train them again, or use another --out."
                )
            cached = {k: z[k] for k in expected}
        for key, want in expected.items():
            same = (cached[key].shape == want if isinstance(want, tuple)
                    else np.array_equal(cached[key], want))  # fmt: skip
            if not same:
                raise ValueError(f"its {key} differ from this run's")
        return cached
    except outputs.CheckpointError:
        raise
    except Exception as err:
        print(f"warning: {path} could not be read ({type(err).__name__}: {err}); training its "
              f"runs again.", file=sys.stderr)  # fmt: skip
    return None
