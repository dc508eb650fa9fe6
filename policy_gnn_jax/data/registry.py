"""Datasets by name: the Planetoid ones, ogbn-arxiv, the heterophilous benchmarks (or any `.npz`
file of their format, by path), a folder of memory-mapped arrays (`on_disk.py`, by path) and the
generators."""

from __future__ import annotations

import inspect
import os
import pathlib
import warnings

from policy_gnn_jax.data.dataset import DataError, Dataset, check_path_argument
from policy_gnn_jax.data.generators import make_csbm, make_planted_depth
from policy_gnn_jax.data.heterophily import HETEROPHILY_NAMES, is_npz_path, load_heterophily
from policy_gnn_jax.data.ogb import OGB_NAMES, load_ogbn_arxiv
from policy_gnn_jax.data.on_disk import META_FILE, load_arrays
from policy_gnn_jax.data.planetoid import PLANETOID_NAMES, load_planetoid

DATASET_NAMES = (*PLANETOID_NAMES, *OGB_NAMES, *HETEROPHILY_NAMES, "csbm", "planted")


def check_name(name: str | os.PathLike) -> str:
    """The lower-cased name, or the path unchanged for an existing file ending in .npz (read by
    `load_heterophily`); DataError for anything else (a typo is an error, never a dataset
    "skipped" for missing files)."""
    if not isinstance(name, str | os.PathLike):
        raise DataError(f"the dataset's name must be text or a path, got {type(name).__name__}.")
    name = os.fspath(name)
    if is_array_folder(name):
        return name
    if (pathlib.Path(name) / "features.npy").is_file():  # an array folder whose write never ended
        load_arrays(name)  # says what is missing
    if is_npz_path(name):
        if pathlib.Path(name).is_dir():
            raise DataError(
                f"{os.fspath(name)} is a folder, not a .npz file: pass the path of the file "
                f"itself (a dataset ending in .npz is a file of the heterophilous benchmarks' "
                f"format)."
            )
        if not pathlib.Path(name).is_file():
            raise DataError(
                f"No such file {os.fspath(name)}: a dataset ending in .npz is the path of a file "
                f"of the heterophilous benchmarks' format; check the path."
            )
        return os.fspath(name)
    if name.lower() not in DATASET_NAMES:
        raise DataError(
            f"Unknown dataset {name!r}: choose one of {DATASET_NAMES}, or pass the path of a "
            f".npz file of the heterophilous benchmarks' format or of a folder of arrays with a "
            f"{META_FILE} (data.write_csbm writes one)."
        )
    return name.lower()


def is_array_folder(name: str) -> bool:
    """Whether `name` is a folder of `.npy` arrays (`on_disk.py`): one holding a meta.json. A
    built-in dataset's name always means the built-in one: pass `./cora` for a folder so named."""
    if os.fspath(name).lower() in DATASET_NAMES:
        return False
    return (pathlib.Path(name) / META_FILE).is_file()


# Datasets with one fixed split and no arguments.
PLANETOID_LIKE = ("cora", "citeseer", "pubmed", "ogbn-arxiv")


def load_dataset(name: str, data_dir=None, download: bool = True, **kwargs) -> Dataset:
    """Loads a Planetoid dataset, ogbn-arxiv or a heterophilous benchmark (a name in
    HETEROPHILY_NAMES or a .npz path; keyword `split`, default 0, picks one of its fixed splits),
    or generates `csbm` / `planted` (keyword arguments go to the generator). Raises DataError for
    an unknown name."""
    name = check_name(name)
    if name.lower() in DATASET_NAMES and (pathlib.Path(name) / META_FILE).is_file():
        warnings.warn(  # said once a process (this line), not silently passed over
            f"a folder of arrays ./{name} is here, but {name!r} names the built-in dataset, "
            f"which is the one used: pass ./{name} to use the folder.",
            stacklevel=1,
        )
    if data_dir is not None:
        check_path_argument(data_dir, "data_dir")
    if not isinstance(download, bool):  # "no" would read as true
        raise DataError(f"download must be True or False, got {download!r}.")
    generators = {"csbm": make_csbm, "planted": make_planted_depth}
    if name in generators:
        takes = tuple(inspect.signature(generators[name]).parameters)
    else:
        takes = ("split",) if name not in PLANETOID_LIKE and not is_array_folder(name) else ()
    unused = sorted(set(kwargs) - set(takes))
    if unused:
        raise DataError(
            f"{name} takes no {', '.join(unused)} (it takes: {', '.join(takes) or 'none'})."
        )
    own = {"generated": name in generators, "a file": is_npz_path(name),
           "a folder of arrays": is_array_folder(name)}  # fmt: skip
    if data_dir is not None and any(own.values()):  # made, or read from its own path
        kind = next(k for k, v in own.items() if v)
        raise DataError(
            f"{name} is {kind}: it takes no data_dir (got {str(data_dir)!r}). Pass it alone, or "
            f"a benchmark's name with data_dir."
        )
    if own["a folder of arrays"]:
        return load_arrays(name)
    if name == "csbm":
        return make_csbm(**kwargs)
    if name == "planted":
        return make_planted_depth(**kwargs)
    if name == "ogbn-arxiv":
        return load_ogbn_arxiv(data_dir=data_dir, download=download)
    if name in HETEROPHILY_NAMES or is_npz_path(name):
        return load_heterophily(name, data_dir=data_dir, download=download, **kwargs)
    return load_planetoid(name, data_dir=data_dir, download=download)
