"""A saved fit on disk: four files tied together by a manifest, written all at once.

A folder holds `results.json` (the record), `dataset.npz`, `snapshots.npz` (each seed's selected
parameters and policy) and `fit.json`, which lists the SHA-256 of the other three. `write` puts
them in a staging folder that replaces the target in one rename (`outputs.publish`), under the
folder's lock, and refuses a folder that already holds a result unless `overwrite`. `read`
checks every file against the manifest first: a file damaged, truncated or copied from another
fit is one `CheckpointError` naming it, never a fit that predicts otherwise than its record.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import pathlib
import shutil
import zipfile

import numpy as np
import scipy.sparse as sp

from policy_gnn_jax import data
from policy_gnn_jax.config import Config, ConfigError
from policy_gnn_jax.runtime import locks, outputs
from policy_gnn_jax.runtime.fingerprint import run_fingerprint
from policy_gnn_jax.runtime.outputs import CheckpointError

# 4: the record's scores are test_metric and val_metric (3: test_accuracy, val_accuracy; 1 and 2,
# from 0.2 and earlier, fingerprint runs without the split's part sizes). Earlier ones are refused.
FORMAT = 4
MANIFEST_FILES = ("results.json", "dataset.npz", "snapshots.npz")


def config_from_dict(values: dict, config_type: type[Config] = Config) -> Config:
    """A `config_type` from its saved dict (JSON turns tuples into lists). ConfigError if it
    names a field this version does not have, lacks one it has, or holds a value it refuses."""
    fields = {f.name for f in dataclasses.fields(config_type)}
    unknown, missing = set(values) - fields, fields - set(values)
    if unknown or missing:
        named = [f"unknown fields {sorted(unknown)}"] * bool(unknown)
        named += [f"no fields {sorted(missing)}"] * bool(missing)
        raise ConfigError(f"the config has {' and '.join(named)}")
    # JSON turned every tuple field (q_hidden, fanouts) into a list.
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    return config_type(**values)


def _sha256(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()


def kept_in_its_folder(ds: data.Dataset) -> bool:
    """Whether the dataset is a folder of memory-mapped arrays (`data.load_arrays`): a fit
    refers to that folder instead of copying a graph that may not fit in memory."""
    return isinstance(ds.features, np.memmap) and data.is_array_folder(ds.source)


def dataset_bytes(ds: data.Dataset) -> bytes:
    """The dataset as an .npz. Dense features are saved as their rows under `dense_values`, so
    the loaded dataset is dense too and keeps the same fingerprint. A folder of memory-mapped
    arrays is saved as its absolute path alone (`read` opens it again and checks its
    fingerprint)."""
    buffer = io.BytesIO()
    f = ds.features
    if kept_in_its_folder(ds):
        np.savez(
            buffer,
            array_folder=np.array(os.path.abspath(ds.source)),
            name=np.array(ds.name),
            num_classes=np.array(ds.num_classes),  # meta.json's, which the fingerprint omits
        )
        return buffer.getvalue()
    if data.is_dense_features(f):
        features = dict(dense_values=np.asarray(f), shape=np.array(f.shape))
    else:
        features = dict(indptr=f.indptr, indices=f.indices, values=f.data, shape=np.array(f.shape))
    np.savez_compressed(
        buffer,
        name=np.array(ds.name),
        **features,
        labels=ds.labels,
        edges=ds.edges,
        train_index=ds.train_index,
        val_index=ds.val_index,
        test_index=ds.test_index,
        num_classes=np.array(ds.num_classes),
        # Where it was read from and which fixed split it is (-1: the benchmark has one).
        source=np.array(ds.source),
        split=np.array(-1 if ds.split is None else ds.split),
        metric=np.array(ds.metric),
    )
    return buffer.getvalue()


def _dataset_from(blob: bytes) -> data.Dataset:
    with np.load(io.BytesIO(blob)) as z:
        if "array_folder" in z:
            return _dataset_in_folder(str(z["array_folder"]), str(z["name"]), int(z["num_classes"]))
        if "dense_values" in z:
            features = z["dense_values"]
        else:
            shape = tuple(z["shape"])
            features = sp.csr_matrix((z["values"], z["indices"], z["indptr"]), shape=shape)
        return data.Dataset(
            name=str(z["name"]),
            features=features,
            labels=z["labels"],
            edges=z["edges"],
            train_index=z["train_index"],
            val_index=z["val_index"],
            test_index=z["test_index"],
            num_classes=int(z["num_classes"]),
            source=str(z["source"]),
            split=int(z["split"]) if int(z["split"]) >= 0 else None,
            metric=str(z["metric"]),
        )


def _dataset_in_folder(folder: str, name: str, num_classes: int) -> data.Dataset:
    try:
        ds = data.load_arrays(folder, name=name)
    except (data.DataError, ValueError, OSError) as err:
        raise CheckpointError(
            f"this fit's graph is the folder of arrays {folder}, which cannot be read now "
            f"({err}): put the folder back where it was, unchanged, and load again."
        ) from None
    if ds.num_classes != num_classes:
        raise CheckpointError(
            f"{folder}/meta.json says {ds.num_classes} classes, but this fit was trained with "
            f"{num_classes}: restore meta.json's num_classes ({num_classes})."
        )
    return ds


def write(folder, record: dict, ds: data.Dataset, leaves: list, meta: dict, overwrite: bool):
    """Writes a fit into `folder` (see the module docstring); returns the folder."""
    if not isinstance(overwrite, bool | np.bool_):
        raise ConfigError(f"overwrite must be True or False, got {overwrite!r}.")
    overwrite = bool(overwrite)
    folder = outputs.check_folder_path(folder, "fit's folder")
    with locks.FolderLock(folder, "output folder"):  # checked as the owner: no other writer
        outputs.check_no_result(folder, overwrite, "overwrite=True")  # again, as the owner
        staging = outputs.staging_folder(folder)
        try:
            snapshots = io.BytesIO()
            np.savez(snapshots, *leaves)
            blobs = {
                "results.json": json.dumps(record, indent=2).encode(),
                "dataset.npz": dataset_bytes(ds),
                "snapshots.npz": snapshots.getvalue(),
            }
            for name, blob in blobs.items():
                outputs.atomic_write_bytes(staging / name, blob)
            manifest = {name: _sha256(blob) for name, blob in blobs.items()}
            outputs.atomic_write_json(staging / "fit.json", {**meta, "files": manifest})
            return outputs.publish(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def read(folder) -> tuple[dict, dict, data.Dataset, list[np.ndarray]]:
    """(fit.json, the record, the dataset, the snapshot leaves) of a saved fit, each file checked
    against the manifest first."""
    folder = outputs.check_folder_path(folder, "saved fit's folder")
    splits = sorted(p.name for p in folder.glob("split-*") if (p / "fit.json").is_file())
    if not (folder / "fit.json").is_file() and splits:  # the command's --splits output
        raise CheckpointError(
            f"{folder} holds a sweep over splits, one saved fit per split: load one of them, "
            f"e.g. {folder / splits[0]}."
        )
    if not (folder / "fit.json").is_file():
        raise CheckpointError(
            f"{folder} holds no saved fit (no fit.json): pass a folder written by Fit.save or by "
            f"the policy-gnn command's --out."
        )
    meta = outputs.read_json(folder / "fit.json")
    # `num_leaves` is written for the format; `load` matches the leaves against the config.
    if not isinstance(meta, dict) or "config" not in meta or "num_leaves" not in meta:
        raise CheckpointError(
            f"{folder}/fit.json is not the fit.json of a saved fit (it holds "
            f"{type(meta).__name__} {str(meta)[:60]}): save the fit again."
        )
    if meta.get("format") != FORMAT:
        found = meta.get("format")
        old = type(found) is int and found in (1, 2)
        who = "policy-gnn-jax 0.2 or earlier" if old else "another version"
        raise CheckpointError(
            f"{folder} is a fit saved by {who} (format {found!r}), which this version (format "
            f"{FORMAT}) does not read: fit it again, or load it with the version that saved it."
        )
    _check_meta(folder, meta)
    blobs = {name: _read_bytes(folder / name) for name in MANIFEST_FILES}
    for name, expected in meta["files"].items():
        if _sha256(blobs[name]) != expected:
            raise CheckpointError(
                f"{folder}/{name} is not the file this fit saved (its SHA-256 differs from "
                f"fit.json's manifest: changed, damaged, or copied from another fit). Save the "
                f"fit again."
            )
    record = outputs.read_json(folder / "results.json")
    try:
        ds = _dataset_from(blobs["dataset.npz"])
    except CheckpointError:  # already names its file and fix (a folder of arrays)
        raise
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise CheckpointError(f"{folder}/dataset.npz is damaged ({err}): save again.") from None
    if meta["dataset_fingerprint"] != ds.fingerprint():
        if kept_in_its_folder(ds):
            raise CheckpointError(
                f"the folder of arrays {ds.source}, this fit's graph, changed since the fit was "
                f"saved: restore the arrays it was trained on (or fit again)."
            )
        raise CheckpointError(f"{folder}/dataset.npz does not match fit.json: save again.")
    try:  # its leaves are checked against the config's structure by `load`
        with np.load(io.BytesIO(blobs["snapshots.npz"])) as z:
            leaves = [z[f"arr_{i}"] for i in range(len(z.files))]
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise CheckpointError(f"{folder}/snapshots.npz is damaged ({err}): save again.") from None
    return meta, record, ds, leaves


def _check_meta(folder: pathlib.Path, meta: dict) -> None:
    """fit.json's fields, each of its type: a hand-edited one is named, not a KeyError."""
    kinds = {
        "method": str,
        "config": dict,
        "dataset_fingerprint": str,
        "run_fingerprint": str,
        "num_leaves": int,
        "dtypes": list,
        "custom": list,
        "files": dict,
    }
    for key, kind in kinds.items():
        required = key != "custom"  # written only for a fit with parts of its own
        if (key in meta or required) and not isinstance(meta.get(key), kind):
            raise CheckpointError(
                f"{folder}/fit.json's {key!r} is {meta.get(key)!r}, not a {kind.__name__}: the "
                f"file was edited or damaged. Save the fit again."
            )
    if sorted(meta["files"]) != sorted(MANIFEST_FILES):
        raise CheckpointError(
            f"{folder}/fit.json's manifest lists {sorted(meta['files'])}, not "
            f"{sorted(MANIFEST_FILES)}: the file was edited. Save the fit again."
        )


def _read_bytes(path: pathlib.Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise CheckpointError(
            f"{path} cannot be read ({err.strerror or err}): the saved fit is incomplete; save "
            f"it again."
        ) from None


def saved_record_of(
    folder, ds: data.Dataset, config, method: str, seeds: int, seed: int, seed_mode: str
) -> dict | None:
    """The record of the fit saved in `folder` when it is exactly this run: the same data, config
    (as the method runs it: `Method.prepare`), method, seeds, base seed and seed mode; else None
    (nothing there, or another run's). A damaged file raises CheckpointError naming it."""
    manifest = pathlib.Path(folder) / "fit.json"
    if not manifest.is_file():
        return None
    saved = outputs.read_json(manifest)
    found = saved.get("run_fingerprint") if isinstance(saved, dict) else None
    if found != run_fingerprint(ds, config, method, seeds, seed):
        return None
    _, record, _, _ = read(folder)  # every file checked against the manifest
    return record if record.get("seed_mode") == seed_mode else None
