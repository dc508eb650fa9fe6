"""Graphs kept in files: a folder of `.npy` arrays whose features and edges are memory-mapped,
not read, so a graph far larger than is comfortable in memory is used in place.

A folder holds `features.npy` (float32 [N, F], C order), `edges.npy` (int32 [2, E]: symmetric,
no self-loops or duplicates, sorted by (receiver, sender)), `labels.npy` ([N] class ids, -1 for
none), `train_index.npy`, `val_index.npy`, `test_index.npy` (node ids) and `meta.json`
({"name": ..., "num_classes": ...}). `meta.json` is written last, so a folder without it is an
unfinished write and is refused. `load_arrays` reads any such folder; `csbm_files.write_csbm`
writes a contextual SBM of any size in this form.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np

from policy_gnn_jax.data.arrays import from_arrays
from policy_gnn_jax.data.checks import InvalidDatasetError
from policy_gnn_jax.data.dataset import DataError, Dataset, check_path_argument

ARRAY_FILES = (
    "features.npy",
    "edges.npy",
    "labels.npy",
    "train_index.npy",
    "val_index.npy",
    "test_index.npy",
)
META_FILE = "meta.json"


def load_arrays(folder, name: str | None = None) -> Dataset:
    """The graph in `folder` (see the module docstring) as a `Dataset`, through `from_arrays`.

    Features and edges are memory-mapped read-only and used in place (so the files must not
    change while the dataset is in use); labels and splits are read. The checks read the mapped
    files a block at a time.

    Args:
      folder: a folder written by `write_csbm`, or by hand in the same form.
      name: the dataset's name (default: meta.json's "name").

    Raises:
      DataError: the folder, a file or meta.json is missing or unreadable.
      ValueError (InvalidDatasetError): an array of the wrong shape or type, or what
        `from_arrays` refuses.
    """
    folder = pathlib.Path(check_path_argument(folder, "the folder of arrays"))
    if not folder.is_dir():
        raise DataError(
            f"{folder} is not a folder: pass a folder holding {', '.join(ARRAY_FILES)} and "
            f"{META_FILE} (data.write_csbm writes one)."
        )
    meta = _read_meta(folder)
    missing = [f for f in ARRAY_FILES if not (folder / f).is_file()]
    if missing:
        raise DataError(
            f"{folder} has no {', '.join(missing)}: write the folder again (write_csbm(..., "
            f"overwrite=True)), or add the missing arrays."
        )
    arrays = {f: _open(folder / f, mmap=f in ARRAY_FILES[:2]) for f in ARRAY_FILES}
    try:  # `from_arrays` checks every shape, type and value
        return from_arrays(
            *arrays.values(),
            name=meta.get("name", "custom") if name is None else name,
            num_classes=meta["num_classes"],
            edges_layout="2xE",
            source=str(folder.absolute()),  # where `Fit.save` finds it, from any folder
        )
    except InvalidDatasetError as err:  # which folder: the values' checks do not know it
        raise InvalidDatasetError(f"in {folder} (its .npy files and {META_FILE}): {err}") from None


def _read_meta(folder: pathlib.Path) -> dict:
    path = folder / META_FILE
    if not path.is_file():
        raise DataError(
            f"{folder} has no {META_FILE}, so its write did not finish (or it is not a graph "
            f"folder): write it again (write_csbm(..., overwrite=True)), or add {META_FILE} "
            f'with {{"name": ..., "num_classes": ...}}.'
        )
    try:
        meta = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path} cannot be read ({err}): write the folder again.") from err
    if not isinstance(meta, dict) or "num_classes" not in meta:
        raise DataError(f'{path} has no "num_classes": add it (the number of classes).')
    return meta


def _open(path: pathlib.Path, mmap: bool) -> np.ndarray:
    try:
        array = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise DataError(
            f"{path} is not a readable .npy file ({err}): write it again (np.save)."
        ) from err
    if not isinstance(array, np.ndarray):  # np.load opens an .npz archive whatever its name
        array.close()
        raise DataError(
            f"{path} is an .npz archive, not one .npy array: write the array with np.save."
        )
    return array
