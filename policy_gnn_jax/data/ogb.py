"""ogbn-arxiv from OGB's released zip, without torch or the `ogb` package.

The zip (http://snap.stanford.edu/ogb/data/nodeproppred/arxiv.zip) holds gzipped CSVs:

    arxiv/raw/edge.csv.gz           one directed citation "src,dst" per line
    arxiv/raw/node-feat.csv.gz      N lines of 128 comma-separated floats
    arxiv/raw/node-label.csv.gz     N lines, one class id (40 classes)
    arxiv/split/time/{train,valid,test}.csv.gz   node ids, one per line (the time split)

The citation edges are symmetrised, as OGB's GCN baselines do (`to_undirected`); features are used
as given (no row normalisation). OGB publishes no checksums, so the SHA-256 of the first copy
this loader sees (downloaded, or found in a folder) is recorded in the cache, and every later
load verifies the zip against it: a changed or damaged file is an error, never a silently
different dataset.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import pathlib
import zipfile

import numpy as np
import scipy.sparse as sp

from policy_gnn_jax.data import planetoid
from policy_gnn_jax.data.dataset import DataError, Dataset
from policy_gnn_jax.data.edge_input import symmetric_edges

OGB_NAMES = ("ogbn-arxiv",)
ARXIV_URL = "http://snap.stanford.edu/ogb/data/nodeproppred/arxiv.zip"
ARXIV_ZIP = "arxiv.zip"
ARXIV_MEMBERS = {
    "edges": "arxiv/raw/edge.csv.gz",
    "features": "arxiv/raw/node-feat.csv.gz",
    "labels": "arxiv/raw/node-label.csv.gz",
    "train": "arxiv/split/time/train.csv.gz",
    "valid": "arxiv/split/time/valid.csv.gz",
    "test": "arxiv/split/time/test.csv.gz",
}
RECORD_FILE = "sha256.json"


def default_cache_dir() -> pathlib.Path:
    """$XDG_CACHE_HOME/policy_gnn_jax/ogb (default ~/.cache/...)."""
    return planetoid.default_cache_dir().parent / "ogb"


def _recorded(cache: pathlib.Path) -> dict:
    path = cache / RECORD_FILE
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise DataError(
            f"{path} (the recorded SHA-256 of OGB files) is unreadable ({err}): delete it; the "
            f"next load records the zip's checksum again."
        ) from None


def _record(cache: pathlib.Path, filename: str, sha: str) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    text = json.dumps({**_recorded(cache), filename: sha}, indent=1)
    tmp = planetoid.partial_file(cache / RECORD_FILE)
    tmp.write_text(text)
    os.replace(tmp, cache / RECORD_FILE)  # atomic: a crash leaves the old record or the new


def verified_zip(
    data_dir=None, download: bool = True, cache_dir=None
) -> tuple[pathlib.Path, str, bool]:
    """The arxiv zip (from `data_dir`, $POLICY_GNN_DATA or the cache; else downloaded into the
    cache), checked against the SHA-256 recorded at its first load.

    Returns (path, sha, first): `first` when no checksum is recorded yet; the caller records it
    once the zip has parsed (a damaged first copy is never trusted)."""
    cache = pathlib.Path(cache_dir) if cache_dir else default_cache_dir()  # holds the record
    folders, target = planetoid.data_folders(data_dir, cache, cache, ARXIV_ZIP)
    # No checksum to check a download against yet: the first copy's is recorded once it parses.
    found = planetoid.find_or_download(ARXIV_ZIP, folders, target, ARXIV_URL, download)
    sha = planetoid.sha256_of(found)
    expected = _recorded(cache).get(ARXIV_ZIP)
    if expected is not None and sha != expected:
        raise DataError(
            f"{found} is not the copy first loaded here: its SHA-256 is {sha}, recorded "
            f"{expected} in {cache / RECORD_FILE}. Re-download it from {ARXIV_URL}; if you "
            f"replaced it on purpose, delete the {ARXIV_ZIP} entry of that record."
        )
    return found, sha, expected is None


def _read_csv(archive: zipfile.ZipFile, member: str, dtype, columns: int | None):
    try:
        raw = gzip.decompress(archive.read(member))
    except KeyError:
        raise DataError(
            f"{archive.filename} has no {member}: it is not OGB's ogbn-arxiv zip ({ARXIV_URL})."
        ) from None
    values = np.loadtxt(io.BytesIO(raw), delimiter=",", dtype=dtype, ndmin=2)
    if columns is not None and values.size and values.shape[1] != columns:
        raise DataError(f"{member} has {values.shape[1]} columns, expected {columns}.")
    return values


def load_ogbn_arxiv(data_dir=None, download: bool = True, cache_dir=None) -> Dataset:
    """ogbn-arxiv with OGB's time split (train to 2017, valid 2018, test 2019).

    Raises:
      DataError: the zip is missing (and cannot be downloaded), changed since its first load,
        or not laid out as OGB's.
    """
    path, sha, first = verified_zip(data_dir, download, cache_dir)
    try:
        with zipfile.ZipFile(path) as archive:
            edges = _read_csv(archive, ARXIV_MEMBERS["edges"], np.int64, 2)
            features = _read_csv(archive, ARXIV_MEMBERS["features"], np.float32, None)
            labels = _read_csv(archive, ARXIV_MEMBERS["labels"], np.int64, 1)[:, 0]
            splits = [
                _read_csv(archive, ARXIV_MEMBERS[s], np.int64, 1)[:, 0]
                for s in ("train", "valid", "test")
            ]
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as err:
        raise DataError(
            f"{path} could not be read as OGB's ogbn-arxiv zip ({err}): delete it (a download "
            f"cut short, or another file), and load again to download it, or place a copy "
            f"from {ARXIV_URL} there."
        ) from None
    n = features.shape[0]
    if labels.shape != (n,):
        raise DataError(f"{path}: {labels.shape[0]} labels for {n} feature rows.")
    for name, index in zip(("train", "valid", "test", "edge"), [*splits, edges.reshape(-1)]):
        if index.size and (index.min() < 0 or index.max() >= n):
            raise DataError(f"{path}: a {name} node id is outside 0..{n - 1}.")
    ds = Dataset(
        name="ogbn-arxiv",
        features=sp.csr_matrix(features),
        labels=labels.astype(np.int32),
        edges=symmetric_edges(edges[:, 0], edges[:, 1], n),
        train_index=splits[0].astype(np.int32),
        val_index=splits[1].astype(np.int32),
        test_index=splits[2].astype(np.int32),
        num_classes=int(labels.max()) + 1,
        source=str(path.parent.absolute()),
    )
    if first:  # trust on first use (OGB publishes no checksum), once the zip has parsed
        _record(pathlib.Path(cache_dir) if cache_dir else default_cache_dir(), ARXIV_ZIP, sha)
    return ds
