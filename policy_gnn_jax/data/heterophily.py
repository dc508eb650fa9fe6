"""Heterophilous benchmarks (Platonov et al., ICLR 2023) from their `.npz` files, checksums first.

Planetoid's graphs are homophilous: a node's neighbours mostly share its class, so aggregating
more hops rarely hurts, and an adaptive-depth policy is never tested where depth can do harm.
These graphs (actor, chameleon-filtered, minesweeper, texas, wisconsin, cornell) are the opposite,
and come with ten fixed splits each, as released with `yandex-research/heterophilous-graphs`:

    np.load("<file>.npz"): node_features float32 [N, F], node_labels int64 [N],
    edges int64 [E, 2] (undirected, each edge stored once),
    train_masks / val_masks / test_masks bool [10, N] (ten splits, disjoint within a split)

The files are found, checked and downloaded as Planetoid's (`load_heterophily` says how); the
URL and checksums live here. A `Dataset` holds one split: features as given (not row-normalised,
as the benchmark's code does), reverse edges added; two-class graphs (minesweeper) are scored by
ROC AUC, as the benchmark does, the others by accuracy (`Dataset.metric`).
"""

from __future__ import annotations

import os
import pathlib
import zipfile

import numpy as np

from policy_gnn_jax.data import arrays as arrays_lib
from policy_gnn_jax.data import feature_input, planetoid
from policy_gnn_jax.data.checks import InvalidDatasetError
from policy_gnn_jax.data.dataset import DataError, Dataset, MissingDataError
from policy_gnn_jax.data.edge_input import symmetric_edges

HETEROPHILY_NAMES = (
    "actor",
    "chameleon-filtered",
    "minesweeper",
    "texas",
    "wisconsin",
    "cornell",
)
HETEROPHILY_URL = "https://github.com/yandex-research/heterophilous-graphs/raw/main/data"
HETEROPHILY_FILES = {name: name.replace("-", "_") + ".npz" for name in HETEROPHILY_NAMES}
# SHA-256 of each file as published at HETEROPHILY_URL (hashed from unchanged upstream copies).
HETEROPHILY_SHA256 = {
    "actor.npz": "c350eef06b2c2a9bf8218be2b57cac6d4003d0922eb597a039e9123f75817816",
    "chameleon_filtered.npz": "bf46f07e1fb5249280447e5fe3100f3e82fc4b93ad1e13ffcfdec924b6ac0bb5",
    "cornell.npz": "684c54ba3daa13b0ba1f04a3d6dd1b1175c1ae9bdeb982851fd4ff96d3aac298",
    "minesweeper.npz": "e664c8dacf1e8ac466c2c09ed4b237bd2c5541f47a6eae9c6092cb87f16412b3",
    "texas.npz": "b164b99e6c3d43e4ab07488ec59bd8c815f90cbc1bd4cf425ce587d2b534d844",
    "wisconsin.npz": "2543c89838cfc75f737f7c4664cc1d097f8268602c20b2d1bd4f21407df9c074",
}
NUM_SPLITS = 10
SPLITS = ("train", "val", "test")
ARRAYS = ("node_features", "node_labels", "edges", *(f"{s}_masks" for s in SPLITS))


def default_cache_dir() -> pathlib.Path:
    """$XDG_CACHE_HOME/policy_gnn_jax/heterophily (default ~/.cache/...)."""
    return planetoid.default_cache_dir().parent / "heterophily"


def is_npz_path(name_or_path: str | os.PathLike) -> bool:
    """Whether `name_or_path` names a file (it ends in .npz) rather than a benchmark; a folder
    of `.npy` arrays so named (it holds a meta.json) is not one."""
    path = os.fspath(name_or_path)
    return path.lower().endswith(".npz") and not os.path.isfile(os.path.join(path, "meta.json"))


def _benchmark_name(name: str) -> str:
    name = name.lower()
    if name not in HETEROPHILY_NAMES:
        raise DataError(
            f"Unknown heterophilous dataset {name!r}: choose one of {HETEROPHILY_NAMES}, or pass "
            f"the path of a file of their format (ending in .npz)."
        )
    return name


def resolve_file(
    name: str,
    data_dir: str | os.PathLike | None = None,
    download: bool = True,
    cache_dir: str | os.PathLike | None = None,
) -> pathlib.Path:
    """The verified file of benchmark `name`, found or downloaded as `load_heterophily` says."""
    filename = HETEROPHILY_FILES[_benchmark_name(name)]
    folders, target = planetoid.data_folders(data_dir, cache_dir, default_cache_dir(), filename)
    url, expected = f"{HETEROPHILY_URL}/{filename}", HETEROPHILY_SHA256[filename]
    path = planetoid.find_or_download(filename, folders, target, url, download, expected)
    return planetoid.check_sha256(
        path, expected, f"the benchmark's {filename}", url,
        " To load another file of this format on purpose, pass its path (ending in .npz): a "
        "path is read without a checksum.",
    )  # fmt: skip


def read_npz(path: pathlib.Path) -> dict[str, np.ndarray]:
    """The six arrays of a file of the benchmark's format, shapes checked. Never unpickles."""
    if path.is_dir():
        raise DataError(f"{path} is a folder, not a .npz file: pass the path of the file itself.")
    if not path.is_file():
        raise MissingDataError(f"No such file {path}: pass the path of an existing .npz file.")
    if not zipfile.is_zipfile(path):
        raise DataError(f"{path} is not a .npz (zip) file: save it with numpy.savez.")
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [k for k in ARRAYS if k not in archive.files]
            if missing:
                raise DataError(
                    f"{path} lacks the arrays {missing}: a file of this format holds {ARRAYS}."
                )
            arrays = {k: archive[k] for k in ARRAYS}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise DataError(f"{path} could not be read ({err!r}): re-create it with savez.") from None
    _check_shapes(arrays, path)
    return arrays


def _check_shapes(arrays: dict[str, np.ndarray], path: pathlib.Path) -> None:
    features, labels, edges = arrays["node_features"], arrays["node_labels"], arrays["edges"]
    n = labels.shape[0] if labels.ndim == 1 else -1
    problems = []
    if n < 0 or not np.issubdtype(labels.dtype, np.integer):
        problems.append(f"node_labels must be integers [N], got {labels.dtype} {labels.shape}")
    if features.ndim != 2 or features.shape[0] != n:
        problems.append(f"node_features must be [N={n}, F], got {features.shape}")
    if edges.ndim != 2 or edges.shape[1] != 2 or not np.issubdtype(edges.dtype, np.integer):
        problems.append(f"edges must be integers [E, 2], got {edges.dtype} {edges.shape}")
    masks = [arrays[f"{s}_masks"] for s in SPLITS]
    for split, mask in zip(SPLITS, masks):
        if mask.dtype != np.bool_ or mask.ndim != 2 or mask.shape[1] != n:
            problems.append(
                f"{split}_masks must be bool [splits, N={n}], got {mask.dtype} {mask.shape}"
            )
    if not problems and len({m.shape[0] for m in masks}) != 1:
        problems.append(f"the masks hold different numbers of splits: {[m.shape for m in masks]}")
    if not problems and masks[0].shape[0] == 0:
        problems.append("the masks hold no split (their first axis, the splits, is empty)")
    if problems:
        raise DataError(f"{path} is not of the benchmark's format: " + "; ".join(problems) + ".")


def check_split(split, count: int, filename: str) -> int:
    """`split` if it is a whole number in 0..count - 1, else DataError naming the range."""
    if isinstance(split, bool) or not isinstance(split, (int, np.integer)):
        raise DataError(
            f"split must be a whole number in 0..{count - 1}, got {split!r}: pass the index of one "
            f"of the {count} splits of {filename}."
        )
    if not 0 <= split < count:
        raise DataError(
            f"split {split} is out of range: {filename} holds {count} splits, numbered "
            f"0..{count - 1}."
        )
    return int(split)


def _to_dataset(name: str, arrays: dict, split: int, path: pathlib.Path) -> Dataset:
    labels = arrays["node_labels"]
    n = labels.shape[0]
    edges = arrays["edges"]
    split = check_split(split, arrays["train_masks"].shape[0], path.name)
    train, val, test = (arrays[f"{s}_masks"][split] for s in SPLITS)
    try:  # the Dataset's checks refuse overlapping parts
        # The checks from_arrays runs on a user's arrays, on the file's values as stored.
        features = feature_input.as_features(arrays["node_features"])
        labels, classes = arrays_lib._as_labels(labels, n, None)
        present = np.unique(labels[labels >= 0])
        if present.size == 2 and classes != 2:  # two classes numbered otherwise than 0 and 1
            raise InvalidDatasetError(
                f"the labels hold two classes, numbered {present.tolist()}: number them 0 and 1 "
                f"(1 the positive class), so that the graph is scored as a two-class one (ROC "
                f"AUC), not as {classes} classes by accuracy."
            )
        return Dataset(
            name=name,
            features=features,
            labels=labels,
            edges=symmetric_edges(edges[:, 0], edges[:, 1], n),
            train_index=np.flatnonzero(train).astype(np.int32),
            val_index=np.flatnonzero(val).astype(np.int32),
            test_index=np.flatnonzero(test).astype(np.int32),
            num_classes=classes,
            source=planetoid._folders_of([path]),
            split=split,
            # the benchmark scores its two-class graphs (minesweeper) by ROC AUC
            metric="roc_auc" if classes == 2 else "accuracy",
        )
    except InvalidDatasetError as err:
        raise DataError(f"split {split} of {path} does not make a valid graph: {err}") from err


def num_splits(name_or_path: str | os.PathLike) -> int:
    """How many splits `load_heterophily` accepts: NUM_SPLITS for a benchmark (its checksum pins
    the file), the masks' first dimension for a path (the file is read)."""
    if is_npz_path(name_or_path):
        return read_npz(pathlib.Path(name_or_path))["train_masks"].shape[0]
    _benchmark_name(os.fspath(name_or_path))
    return NUM_SPLITS


def load_heterophily(
    name_or_path: str | os.PathLike,
    split: int = 0,
    data_dir: str | os.PathLike | None = None,
    download: bool = True,
    cache_dir: str | os.PathLike | None = None,
) -> Dataset:
    """Loads one split of a heterophilous benchmark, verifying the file's SHA-256 first.

    A benchmark's file is found as Planetoid's are: with `data_dir`, in that folder only (a
    missing file is downloaded into it, if allowed); without it, in $POLICY_GNN_DATA, then the
    cache, and a file missing from both is downloaded into the cache (unless `download` is False
    or $POLICY_GNN_OFFLINE is set). A file whose SHA-256 is not the pinned one is refused.

    A path ending in .npz is read as given, WITHOUT a checksum (nothing is searched or
    downloaded), so any graph saved in this format runs unchanged; it is read with
    `allow_pickle=False`, so an unverified file never runs code.

    `split` (0..num_splits - 1) picks the file's train/val/test masks; `cache_dir` overrides
    `default_cache_dir()`. The Dataset is named after the benchmark (or the file's stem).
    Raises DataError (MissingDataError for a missing file that cannot be downloaded).
    """
    if is_npz_path(name_or_path):
        path = pathlib.Path(name_or_path)
        # A file named like a built-in dataset keeps its extension: it cannot pass for it.
        built_in = (*HETEROPHILY_NAMES, *planetoid.PLANETOID_NAMES, "ogbn-arxiv", "csbm", "planted")
        name = path.name if path.stem.lower() in built_in else path.stem
    else:
        name = _benchmark_name(os.fspath(name_or_path))
        check_split(split, NUM_SPLITS, HETEROPHILY_FILES[name])  # before any download
        path = resolve_file(name, data_dir, download, cache_dir)
    return _to_dataset(name, read_npz(path), split, path)
