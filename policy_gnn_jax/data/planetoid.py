"""Planetoid (Cora, CiteSeer, PubMed; public split) from the raw `ind.*` files, checksums first.

Every raw file's SHA-256 is checked before it is unpickled, and the graph is assembled exactly as
PyTorch Geometric's `read_planetoid_data` does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import pickle
import threading
import urllib.error
import urllib.request
import warnings

import numpy as np
import scipy.sparse as sp

from policy_gnn_jax.data.dataset import DataError, Dataset, MissingDataError
from policy_gnn_jax.data.dense import row_normalise
from policy_gnn_jax.data.edge_input import symmetric_edges

PLANETOID_NAMES = ("cora", "citeseer", "pubmed")
RAW_SUFFIXES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")

# The canonical public location, the one PyTorch Geometric's Planetoid loader downloads from.
PLANETOID_URL = "https://github.com/kimiyoung/planetoid/raw/master/data"
DATA_ENV = "POLICY_GNN_DATA"
OFFLINE_ENV = "POLICY_GNN_OFFLINE"

# SHA-256 of all 24 raw files at PLANETOID_URL: 23 hashed from verified copies, and
# ind.pubmed.allx from the Git LFS pointer upstream publishes for it. Every file is checked
# before it is unpickled: pickle can run code, so an unverified file is never opened.
PLANETOID_SHA256 = {
    "ind.citeseer.allx": "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",
    "ind.citeseer.ally": "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",
    "ind.citeseer.graph": "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",
    "ind.citeseer.test.index": "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4",
    "ind.citeseer.tx": "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",
    "ind.citeseer.ty": "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",
    "ind.citeseer.x": "d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6",
    "ind.citeseer.y": "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",
    "ind.cora.allx": "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
    "ind.cora.ally": "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
    "ind.cora.graph": "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
    "ind.cora.test.index": "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",
    "ind.cora.tx": "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
    "ind.cora.ty": "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
    "ind.cora.x": "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",
    "ind.cora.y": "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
    "ind.pubmed.allx": "508e538e2abdccdd54c4d3e9f49d638b4af7107d85845f66ddea5a5152658b7e",
    "ind.pubmed.ally": "0c37bbe3b5014ec365e9d393cf4791925e5ed94fb194305d74f064a8d7b50f0e",
    "ind.pubmed.graph": "5b89f0036ca22909471f1e6558eb42fa06e0c730a577bde5b058b40638f81dc9",
    "ind.pubmed.test.index": "b101d421688bbaecbd82e8a18f1e282378d6830f3a37666f28ebc47f844341b5",
    "ind.pubmed.tx": "4eb5f5d0f30f26497eb0ac6ac9719d09c67e284f1ed0385c93f3ef27a671da3d",
    "ind.pubmed.ty": "ee2e0d4819d9fbcc403689c3bf2e49face401b605932f093bc58ab6461130fdd",
    "ind.pubmed.x": "fbe9cb5c47200d1b7769a26e579be3b7130b556831f9d850e77c4c74f2599b33",
    "ind.pubmed.y": "e6c807633307a07ed659249006536a147c7999c797f11a2560752990181b41b3",
}


def default_cache_dir() -> pathlib.Path:
    """The download cache: $XDG_CACHE_HOME/policy_gnn_jax/planetoid (default ~/.cache/...)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "policy_gnn_jax" / "planetoid"


def sha256_of(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _is_offline() -> bool:
    return os.environ.get(OFFLINE_ENV, "").lower() not in ("", "0", "false", "no")


def partial_file(dest: pathlib.Path) -> pathlib.Path:
    """`dest`'s name while it is written: this process's and thread's own, opened with 0666 so
    the umask sets the permissions (a mkstemp file would stay 0600)."""
    return dest.with_name(f"{dest.name}.part-{os.getpid()}-{threading.get_ident()}")


def fetch_url(url: str, dest: pathlib.Path, expected_sha: str | None = None) -> None:
    """Downloads `url` to `dest` atomically, kept only if its SHA-256 is `expected_sha`."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp_name = partial_file(dest)
    fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
            while block := response.read(1 << 20):
                out.write(block)
        got = sha256_of(pathlib.Path(tmp_name))
        if expected_sha is not None and got != expected_sha:
            raise DataError(
                f"Downloaded {url} but its SHA-256 is {got}, expected {expected_sha}. The file was "
                f"not kept. Retry later, or place a verified copy in {dest.parent}."
            )
        os.replace(tmp_name, dest)
    finally:
        if os.path.exists(tmp_name):
            os.remove(tmp_name)


def data_folders(data_dir, cache_dir, default_cache: pathlib.Path, holding: str):
    """(the folders searched, the folder a download goes to): `data_dir` alone when given (it must
    be a folder: never passed over silently for $POLICY_GNN_DATA or the cache), else
    $POLICY_GNN_DATA, then the cache (`cache_dir`, default `default_cache`)."""
    if data_dir is not None:
        if not pathlib.Path(data_dir).is_dir():
            raise DataError(
                f"data folder {data_dir} does not exist or is not a folder: pass the folder that "
                f"holds {holding} (--data-dir / data_dir)."
            )
        return [pathlib.Path(data_dir)], pathlib.Path(data_dir)
    cache = pathlib.Path(cache_dir) if cache_dir else default_cache
    return list(dict.fromkeys([*env_data_dirs(), cache])), cache


def find_or_download(
    filename: str, folders: list, target: pathlib.Path, url: str, download: bool, expected=None,
    label: str | None = None, holding: str = "it",
) -> pathlib.Path:  # fmt: skip
    """The first `folder / filename` of `folders` that exists, else `url` downloaded into
    `target` (kept only if its SHA-256 is `expected`, when given). A file nowhere that cannot be
    downloaded is a MissingDataError saying where it looked and how to provide it."""
    found = next((f / filename for f in folders if (f / filename).is_file()), None)
    if found is not None:
        return found
    label, where = label or filename, ", ".join(str(f) for f in folders)
    sha = f" (SHA-256 {expected})" if expected else ""
    if not download or _is_offline():
        reason = "downloads are disabled" if not download else f"${OFFLINE_ENV} is set"
        raise MissingDataError(
            f"Missing {label}: not found in {where}, and {reason}. Download it from {url}{sha} "
            f"into one of those folders, or point --data-dir / ${DATA_ENV} at a folder holding "
            f"{holding}."
        )
    try:
        fetch_url(url, target / filename, expected)
    except (urllib.error.URLError, OSError, TimeoutError) as err:
        raise MissingDataError(
            f"Missing {label}: not found in {where}, and downloading {url} failed ({err}). If "
            f"this machine is offline, download it elsewhere{sha}, copy it into {target} or any "
            f"folder, and pass that folder with --data-dir or ${DATA_ENV}."
        ) from None
    return target / filename


def check_sha256(path: pathlib.Path, expected: str, what: str, url: str, more: str = ""):
    """`path`, if its SHA-256 is `expected`; else a DataError naming both and where to get it."""
    got = sha256_of(path)
    if got != expected:
        raise DataError(
            f"{path} is corrupt or not {what}: its SHA-256 is {got}, expected {expected} "
            f"({path.stat().st_size} bytes on disk). Delete it and re-download it, or replace it "
            f"with a verified copy from {url}.{more}"
        )
    return path


def resolve_raw_file(
    filename: str,
    search_dirs: list[pathlib.Path],
    cache_dir: pathlib.Path,
    sha_table: dict[str, str],
    download: bool,
) -> pathlib.Path:
    """A verified copy of one raw file (e.g. "ind.cora.x"): from `search_dirs`, then `cache_dir`,
    else downloaded into `cache_dir` if `download`; its SHA-256 must be `sha_table`'s."""
    url, expected = f"{PLANETOID_URL}/{filename}", sha_table[filename]
    folders = list(dict.fromkeys([*search_dirs, cache_dir]))
    path = find_or_download(filename, folders, cache_dir, url, download, expected,
                            f"raw file {filename}", "the ind.* files")  # fmt: skip
    return check_sha256(path, expected, "the original Planetoid file", url)


def env_data_dirs() -> list[pathlib.Path]:
    """$POLICY_GNN_DATA as a list of one folder (empty when unset); a value that names no
    folder is an error, never silently passed over for the cache."""
    value = os.environ.get(DATA_ENV)
    if not value:
        return []
    if not pathlib.Path(value).is_dir():
        raise DataError(
            f"${DATA_ENV} is {value!r}, which is not a folder: point it at the folder holding "
            f"the raw files, or unset it."
        )
    return [pathlib.Path(value)]


def _folders_of(paths) -> str:
    """The folders `paths` lie in, absolute, joined by ", "."""
    return ", ".join(sorted({str(pathlib.Path(p).parent.absolute()) for p in paths}))


def _unpickle(path: pathlib.Path):
    with open(path, "rb") as f, warnings.catch_warnings():
        # The pickles name scipy.sparse.csr, which scipy deprecates but still reads.
        warnings.simplefilter("ignore", DeprecationWarning)
        return pickle.load(f, encoding="latin1")  # written by Python 2


def _read_raw(paths: dict[str, pathlib.Path]):
    raw = {s: _unpickle(paths[s]) for s in RAW_SUFFIXES if s != "test.index"}
    test_ids = np.loadtxt(paths["test.index"], dtype=np.int64).reshape(-1)
    return raw, test_ids


def _assemble_planetoid(name: str, raw: dict, test_ids: np.ndarray) -> Dataset:
    """Builds the graph exactly as PyTorch Geometric's `read_planetoid_data` does."""
    allx, tx = sp.csr_matrix(raw["allx"]), sp.csr_matrix(raw["tx"])
    ally, ty = np.asarray(raw["ally"]), np.asarray(raw["ty"])
    sorted_test = np.sort(test_ids)
    ty_labelled = np.ones(len(ty), dtype=bool)
    if name == "citeseer":
        # CiteSeer's test.index skips 15 ids: they get zero features, no label, and no split.
        span = int(test_ids.max() - test_ids.min()) + 1
        slots = sorted_test - test_ids.min()
        tx_ext = sp.lil_matrix((span, tx.shape[1]), dtype=np.float32)
        tx_ext[slots] = tx
        ty_ext = np.zeros((span, ty.shape[1]), dtype=ty.dtype)
        ty_ext[slots] = ty
        ty_labelled = np.zeros(span, dtype=bool)
        ty_labelled[slots] = True
        tx, ty = tx_ext.tocsr(), ty_ext
    features = sp.vstack([allx, tx]).tolil()
    labels = np.concatenate([ally.argmax(1), ty.argmax(1)]).astype(np.int32)
    has_label = np.concatenate([np.ones(len(ally), dtype=bool), ty_labelled])
    # tx rows follow test.index order; move each to its node id.
    features[test_ids] = features[sorted_test]
    labels[test_ids] = labels[sorted_test]
    has_label[test_ids] = has_label[sorted_test]
    labels[~has_label] = -1
    num_nodes = features.shape[0]
    edges = _edges_from_dict(raw["graph"], num_nodes)
    num_train = np.asarray(raw["y"]).shape[0]
    return Dataset(
        name=name,
        features=row_normalise(features.tocsr().astype(np.float32)),
        labels=labels,
        edges=edges,
        train_index=np.arange(num_train, dtype=np.int32),
        val_index=np.arange(num_train, num_train + 500, dtype=np.int32),
        test_index=sorted_test.astype(np.int32),
        num_classes=ally.shape[1],
    )


def _edges_from_dict(graph: dict, num_nodes: int) -> np.ndarray:
    senders = [int(u) for u, nbrs in graph.items() for _ in nbrs]
    receivers = [int(v) for _, nbrs in graph.items() for v in nbrs]
    return symmetric_edges(np.array(senders), np.array(receivers), num_nodes)


def load_planetoid(
    name: str,
    data_dir: str | os.PathLike | None = None,
    download: bool = True,
    cache_dir: str | os.PathLike | None = None,
    sha_table: dict[str, str] | None = None,
) -> Dataset:
    """Loads a Planetoid dataset (public split), verifying every raw file's SHA-256.

    With `data_dir`, files are read from that folder only (a missing one is downloaded into it,
    if allowed). Without it, $POLICY_GNN_DATA is searched, then the cache, and a file missing
    from both is downloaded into the cache (unless `download` is False or $POLICY_GNN_OFFLINE is
    set). The Dataset's `source` names the folders the files came from.

    `name`: "cora", "citeseer" or "pubmed"; `cache_dir` overrides `default_cache_dir()`,
    `sha_table` the pinned checksums (tests use it for stand-in files). Raises DataError: an
    unknown name, or a file missing, corrupt or unreadable.
    """
    name = name.lower()
    if name not in PLANETOID_NAMES:
        raise DataError(f"Unknown Planetoid dataset {name!r}: choose one of {PLANETOID_NAMES}.")
    folders, target = data_folders(
        data_dir, cache_dir, default_cache_dir(), f"the ind.{name}.* files"
    )
    table = sha_table or PLANETOID_SHA256
    paths = {
        s: resolve_raw_file(f"ind.{name}.{s}", folders, target, table, download)
        for s in RAW_SUFFIXES
    }
    try:
        raw, test_ids = _read_raw(paths)
        ds = _assemble_planetoid(name, raw, test_ids)
        return dataclasses.replace(ds, source=_folders_of(paths.values()))
    except DataError:
        raise
    except Exception as err:  # a verified file that still fails to parse: say which dataset
        raise DataError(
            f"The raw files of {name} passed their checksums but could not be parsed ({err!r}). "
            f"Check the numpy/scipy versions against requirements.txt."
        ) from err
