"""Datasets on the host (numpy only): Planetoid loading with checksums, and a generated CSBM graph.

Everything here runs once, before any JAX code, and produces a `Dataset` of plain numpy arrays.
`graph.py` turns a Dataset into the device-side structure the model closes over.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import pickle
import tempfile
import urllib.error
import urllib.request
import warnings

import numpy as np
import scipy.sparse as sp

PLANETOID_NAMES = ("cora", "citeseer", "pubmed")
DATASET_NAMES = (*PLANETOID_NAMES, "csbm", "planted")
RAW_SUFFIXES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")

# The canonical public location, the one PyTorch Geometric's Planetoid loader downloads from.
PLANETOID_URL = "https://github.com/kimiyoung/planetoid/raw/master/data"
DATA_ENV = "POLICY_GNN_DATA"
OFFLINE_ENV = "POLICY_GNN_OFFLINE"

# SHA-256 of all 24 raw files: 23 from shared/data/planetoid/SHA256SUMS, and ind.pubmed.allx
# from the Git LFS pointer documented in that folder's README. Every file is checked before it is
# unpickled: pickle can run code, so an unverified file is never opened.
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


class DataError(RuntimeError):
    """A dataset could not be found, downloaded or verified. The message says what to do."""


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A node-classification graph on the host.

    Attributes:
      name: dataset name.
      features: [N, F] float32 features (row-normalised for Planetoid), scipy CSR.
      labels: [N] int32 class ids; -1 where a node has no label (CiteSeer's missing test ids).
      edges: [2, E] int32 directed edges (sender, receiver), symmetric, no self-loops or duplicates.
      train_index, val_index, test_index: int32 node ids of each split, sorted.
      num_classes: C.
    """

    name: str
    features: sp.csr_matrix
    labels: np.ndarray
    edges: np.ndarray
    train_index: np.ndarray
    val_index: np.ndarray
    test_index: np.ndarray
    num_classes: int

    @property
    def num_nodes(self) -> int:
        return self.features.shape[0]

    @property
    def num_features(self) -> int:
        return self.features.shape[1]

    @property
    def num_edges(self) -> int:
        return self.edges.shape[1]

    def summary(self) -> str:
        return (
            f"{self.name}: {self.num_nodes} nodes, {self.num_features} features, "
            f"{self.num_classes} classes, {self.num_edges} directed edges, "
            f"train/val/test {len(self.train_index)}/{len(self.val_index)}/{len(self.test_index)}"
        )


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


def _download(url: str, dest: pathlib.Path, expected_sha: str) -> None:
    """Downloads `url` to `dest` atomically, keeping it only if its SHA-256 matches."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=dest.name + ".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
            while block := response.read(1 << 20):
                out.write(block)
        got = sha256_of(pathlib.Path(tmp_name))
        if got != expected_sha:
            raise DataError(
                f"Downloaded {url} but its SHA-256 is {got}, expected {expected_sha}. The file was "
                f"not kept. Retry later, or place a verified copy in {dest.parent}."
            )
        os.replace(tmp_name, dest)
    finally:
        if os.path.exists(tmp_name):
            os.remove(tmp_name)


def resolve_raw_file(
    filename: str,
    search_dirs: list[pathlib.Path],
    cache_dir: pathlib.Path,
    sha_table: dict[str, str],
    download: bool,
) -> pathlib.Path:
    """Finds a verified copy of one raw file, downloading it into the cache if allowed.

    Args:
      filename: e.g. "ind.cora.x".
      search_dirs: folders searched in order (the --data-dir flag, $POLICY_GNN_DATA); the cache
        folder is searched after them.
      cache_dir: where downloads go.
      sha_table: expected SHA-256 per filename.
      download: whether a missing file may be fetched from PLANETOID_URL.

    Returns:
      The path of a file whose SHA-256 matches.

    Raises:
      DataError: the file is corrupt, or missing everywhere and cannot be downloaded.
    """
    expected = sha_table[filename]
    folders = [*search_dirs, cache_dir]
    for folder in folders:
        path = folder / filename
        if path.is_file():
            got = sha256_of(path)
            if got != expected:
                raise DataError(
                    f"{path} is corrupt or not the original Planetoid file: its SHA-256 is {got}, "
                    f"expected {expected} ({path.stat().st_size} bytes on disk). Delete it and "
                    f"re-download it, or replace it with a verified copy from "
                    f"{PLANETOID_URL}/{filename}."
                )
            return path
    searched = ", ".join(str(f) for f in folders)
    if not download or _is_offline():
        reason = "downloads are disabled" if not download else f"${OFFLINE_ENV} is set"
        raise DataError(
            f"Missing raw file {filename}: not found in {searched}, and {reason}. Download it from "
            f"{PLANETOID_URL}/{filename} (SHA-256 {expected}) into one of those folders, or point "
            f"--data-dir / ${DATA_ENV} at a folder holding the ind.* files."
        )
    url = f"{PLANETOID_URL}/{filename}"
    try:
        _download(url, cache_dir / filename, expected)
    except (urllib.error.URLError, OSError, TimeoutError) as err:
        raise DataError(
            f"Missing raw file {filename}: not found in {searched}, and downloading {url} failed "
            f"({err}). If this machine is offline, download the file elsewhere (SHA-256 "
            f"{expected}), copy it into {cache_dir} or any folder, and pass that folder with "
            f"--data-dir or ${DATA_ENV}."
        ) from None
    return cache_dir / filename


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


def symmetric_edges(senders: np.ndarray, receivers: np.ndarray, num_nodes: int) -> np.ndarray:
    """Symmetrises, drops self-loops and duplicates; returns [2, E] sorted by (receiver, sender)."""
    if len(senders) and (
        min(senders.min(), receivers.min()) < 0 or max(senders.max(), receivers.max()) >= num_nodes
    ):
        raise DataError(f"edge endpoint outside 0..{num_nodes - 1}: the graph file is malformed")
    s = np.concatenate([senders, receivers]).astype(np.int64)
    r = np.concatenate([receivers, senders]).astype(np.int64)
    keep = s != r
    key = np.unique(r[keep] * num_nodes + s[keep])
    return np.stack([key % num_nodes, key // num_nodes]).astype(np.int32)


def row_normalise(features: sp.csr_matrix) -> sp.csr_matrix:
    """Divides each row by its sum (rows summing to 0 stay 0), as PyG's NormalizeFeatures."""
    row_sum = np.asarray(features.sum(1)).reshape(-1)
    scale = 1.0 / np.where(row_sum == 0, 1.0, row_sum)
    return sp.csr_matrix(sp.diags(scale.astype(np.float32)) @ features, dtype=np.float32)


def load_planetoid(
    name: str,
    data_dir: str | os.PathLike | None = None,
    download: bool = True,
    cache_dir: str | os.PathLike | None = None,
    sha_table: dict[str, str] | None = None,
) -> Dataset:
    """Loads a Planetoid dataset (public split), verifying every raw file's SHA-256.

    Folders are searched in order: `data_dir`, then $POLICY_GNN_DATA, then the cache; a file
    missing from all of them is downloaded into the cache (unless `download` is False or
    $POLICY_GNN_OFFLINE is set).

    Args:
      name: "cora", "citeseer" or "pubmed".
      data_dir: a folder holding `ind.<name>.*` files.
      download: allow downloading missing files.
      cache_dir: override of `default_cache_dir()`.
      sha_table: override of the pinned checksums (tests use it for stand-in files).

    Returns:
      The Dataset.

    Raises:
      DataError: unknown name, or a file missing, corrupt or unreadable.
    """
    name = name.lower()
    if name not in PLANETOID_NAMES:
        raise DataError(f"Unknown Planetoid dataset {name!r}: choose one of {PLANETOID_NAMES}.")
    search_dirs = [pathlib.Path(d) for d in (data_dir, os.environ.get(DATA_ENV)) if d]
    cache = pathlib.Path(cache_dir) if cache_dir else default_cache_dir()
    table = sha_table or PLANETOID_SHA256
    paths = {
        s: resolve_raw_file(f"ind.{name}.{s}", search_dirs, cache, table, download)
        for s in RAW_SUFFIXES
    }
    try:
        raw, test_ids = _read_raw(paths)
        return _assemble_planetoid(name, raw, test_ids)
    except DataError:
        raise
    except Exception as err:  # a verified file that still fails to parse: say which dataset
        raise DataError(
            f"The raw files of {name} passed their checksums but could not be parsed ({err!r}). "
            f"Check the numpy/scipy versions against requirements.txt."
        ) from err


def make_csbm(
    num_nodes: int = 2000,
    num_classes: int = 4,
    num_features: int = 32,
    homophily: float = 0.8,
    avg_degree: float = 5.0,
    feature_signal: float = 1.0,
    seed: int = 0,
    num_train_per_class: int = 20,
    num_val: int = 500,
    num_test: int = 1000,
) -> Dataset:
    """A contextual stochastic block model: class-dependent Gaussian features + a planted partition.

    Each node draws about `avg_degree / 2` edges; each edge goes to a node of the same class with
    probability `homophily`, else to a node of another class. Features are `feature_signal * mu_y
    + N(0, I)` with random unit class means `mu_c`. Splits follow Planetoid: `num_train_per_class`
    per class for training (the lowest ids of each class), then `num_val`, then `num_test` ids of
    a random permutation.

    Args:
      num_nodes, num_classes, num_features: sizes.
      homophily: fraction of edges inside a class, in [0, 1].
      avg_degree: mean number of directed edges per node (before de-duplication).
      feature_signal: norm of the class-mean shift; 0 makes features uninformative.
      seed: numpy seed; the same seed gives the same graph.
      num_train_per_class, num_val, num_test: split sizes.

    Returns:
      The Dataset (features are not row-normalised: they are Gaussian).
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
    )
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, num_nodes).astype(np.int32)
    means = rng.normal(size=(num_classes, num_features))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    features = feature_signal * means[labels] + rng.normal(size=(num_nodes, num_features))
    edges = _csbm_edges(rng, labels, num_classes, homophily, avg_degree)
    train, val, test = _planetoid_style_split(
        rng, labels, num_classes, num_train_per_class, num_val, num_test
    )
    return Dataset(
        name="csbm",
        features=sp.csr_matrix(features.astype(np.float32)),
        labels=labels,
        edges=edges,
        train_index=train,
        val_index=val,
        test_index=test,
        num_classes=num_classes,
    )


def _check_csbm_args(
    num_nodes,
    num_classes,
    num_features,
    homophily,
    avg_degree,
    num_train_per_class,
    num_val,
    num_test,
) -> None:
    if not 0.0 <= homophily <= 1.0:
        raise ValueError(f"csbm homophily must be in [0, 1], got {homophily}.")
    if num_classes < 2 or num_features < 1 or avg_degree <= 0:
        raise ValueError("csbm needs num_classes >= 2, num_features >= 1 and avg_degree > 0.")
    needed = num_train_per_class * num_classes + num_val + num_test
    if needed > num_nodes:
        raise ValueError(
            f"csbm splits need {needed} nodes ({num_train_per_class} x {num_classes} train + "
            f"{num_val} val + {num_test} test) but num_nodes is {num_nodes}: raise num_nodes or "
            f"shrink the splits."
        )


def _csbm_edges(rng, labels, num_classes, homophily, avg_degree) -> np.ndarray:
    num_nodes = len(labels)
    num_draws = max(1, int(round(num_nodes * avg_degree / 2)))
    senders = rng.integers(0, num_nodes, num_draws)
    by_class = [np.flatnonzero(labels == c) for c in range(num_classes)]
    same = rng.random(num_draws) < homophily
    shift = rng.integers(1, num_classes, num_draws)  # another class, uniformly
    target_class = np.where(same, labels[senders], (labels[senders] + shift) % num_classes)
    receivers = np.empty(num_draws, dtype=np.int64)
    for c, members in enumerate(by_class):
        pick = target_class == c
        if len(members) == 0:
            receivers[pick] = senders[pick]  # becomes a self-loop, dropped below
        else:
            receivers[pick] = members[rng.integers(0, len(members), pick.sum())]
    return symmetric_edges(senders, receivers, num_nodes)


def _planetoid_style_split(rng, labels, num_classes, per_class, num_val, num_test):
    train = np.concatenate([np.flatnonzero(labels == c)[:per_class] for c in range(num_classes)])
    rest = rng.permutation(np.setdiff1d(np.arange(len(labels)), train))
    val, test = rest[:num_val], rest[num_val : num_val + num_test]
    return (
        np.sort(train).astype(np.int32),
        np.sort(val).astype(np.int32),
        np.sort(test).astype(np.int32),
    )


def make_planted_depth(
    num_units: int = 600,
    num_classes: int = 3,
    hub_size: int = 8,
    signal: float = 2.0,
    hub_signal: float = 20.0,
    noise: float = 0.5,
    seed: int = 0,
    num_train: int = 120,
    num_val: int = 200,
) -> Dataset:
    """A graph where the best depth of every target node is known by construction.

    Each unit is a path `v - u1 - u2` with `hub_size` strong-signal hub leaves. Only the `v`
    nodes are targets (train/val/test); the others are in no split.
    - A *shallow* unit: `v` carries its class signal; the hub hangs off `u1` (two hops from v)
      and carries ANOTHER class's signal. Depth 1 sees v's own signal; from depth 2 the hub's
      wrong signal floods in. Best depth: 1.
    - A *deep* unit: `v`, u1, u2 carry no signal; the hub hangs off `u2` (three hops) and
      carries v's class. Depths 1-2 see nothing; from depth 3 the right signal arrives. Best
      depths: 3 and more.
    Feature 0 marks deep targets, so a policy that reads features can tell the two apart. A fixed
    depth gets about half the targets right plus chance on the rest; the right per-node depth
    gets nearly all of them.

    Returns:
      The Dataset; `planted_deep_nodes(ds)` tells which targets are deep.
    """
    rng = np.random.default_rng(seed)
    num_features = num_classes + 1
    unit_nodes = 3 + hub_size  # v, u1, u2, hub leaves
    n = num_units * unit_nodes
    labels = np.zeros(n, np.int32)
    features = rng.normal(0.0, noise, (n, num_features))
    features[:, 0] = 0.0
    senders, receivers = [], []
    shallow = rng.random(num_units) < 0.5
    target_class = rng.integers(0, num_classes, num_units)
    for i in range(num_units):
        v, u1, u2 = (i * unit_nodes + k for k in range(3))
        leaves = np.arange(u2 + 1, (i + 1) * unit_nodes)
        y = target_class[i]
        hub_class = (y + rng.integers(1, num_classes)) % num_classes if shallow[i] else y
        labels[[v, u1, u2]] = y
        labels[leaves] = hub_class
        if shallow[i]:
            features[v, 1 + y] += signal
        else:
            features[v, 0] = 1.0
        features[leaves, 1 + hub_class] += hub_signal
        # Shallow: wrong-class hub two hops from v; deep: right-class hub three hops from v.
        centre = u1 if shallow[i] else u2
        senders += [v, u1, *([centre] * hub_size)]
        receivers += [u1, u2, *leaves]
    edges = symmetric_edges(np.array(senders), np.array(receivers), n)
    targets = np.arange(num_units) * unit_nodes
    order = rng.permutation(num_units)
    train = np.sort(targets[order[:num_train]])
    val = np.sort(targets[order[num_train : num_train + num_val]])
    test = np.sort(targets[order[num_train + num_val :]])
    return Dataset(
        name="planted",
        features=sp.csr_matrix(features.astype(np.float32)),
        labels=labels,
        edges=edges,
        train_index=train.astype(np.int32),
        val_index=val.astype(np.int32),
        test_index=test.astype(np.int32),
        num_classes=num_classes,
    )


def planted_deep_nodes(ds: Dataset) -> np.ndarray:
    """[N] bool: the deep targets of `make_planted_depth` (feature 0 marks them)."""
    return ds.features[:, 0].toarray().ravel() == 1.0


def planted_agreement(ds: Dataset, test_depths: np.ndarray) -> np.ndarray:
    """Share of test targets given a planted-best depth (shallow: 1, deep: >= 3).
    test_depths: [..., T] depths of `ds.test_index`; returns [...]."""
    deep = planted_deep_nodes(ds)[ds.test_index]
    return np.mean(np.where(deep, test_depths >= 3, test_depths == 1), axis=-1)


def load_dataset(name: str, data_dir=None, download: bool = True, **csbm_kwargs) -> Dataset:
    """Loads a Planetoid dataset or generates `csbm` / `planted` (keyword arguments go to the
    generator). Raises DataError for an unknown name."""
    name = name.lower()
    if name == "csbm":
        return make_csbm(**csbm_kwargs)
    if name == "planted":
        return make_planted_depth(**csbm_kwargs)
    if name in PLANETOID_NAMES:
        return load_planetoid(name, data_dir=data_dir, download=download)
    raise DataError(f"Unknown dataset {name!r}: choose one of {DATASET_NAMES}.")
