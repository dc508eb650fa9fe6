"""The host-side `Dataset` and the checks every dataset passes, however it was built.

`from_arrays` and `from_jraph` turn a user's graph into a `Dataset`: they validate, normalise
(directed edges made symmetric, self-loops and duplicates dropped, saying what changed) and refuse
what cannot be repaired with a `ValueError` that names the problem and the fix. `Dataset` runs the
same checks at construction, and `graph.from_dataset` runs them again before anything reaches the
device, because the fast propagation rule (`graph.propagate`) is only correct for a symmetric,
receiver-sorted adjacency: a directed input would otherwise train on silently wrong gradients.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os

import numpy as np
import scipy.sparse as sp

from policy_gnn_jax.data.dense import all_finite, features_array, hash_array, is_dense_features
from policy_gnn_jax.data.edge_check import edge_problem


class DataError(RuntimeError):
    """A dataset could not be found, downloaded or verified. The message says what to do."""


def check_path_argument(value, what: str):
    """`value` as given when it is a path (text or an os.PathLike); DataError naming `what`
    otherwise (bytes or a number would fail inside pathlib, "" would be the current folder)."""
    if not isinstance(value, str | os.PathLike) or isinstance(os.fspath(value), bytes):
        raise DataError(
            f"{what} must be a folder's path (text or a pathlib.Path), got {type(value).__name__}: "
            f"{value!r:.60}."
        )
    if not os.fspath(value).strip():
        raise DataError(f"{what} is an empty path: name a folder (or pass None for the default).")
    return value


class MissingDataError(DataError):
    """A raw file is not on this machine and cannot be downloaded (a sweep skips the dataset)."""


class InvalidDatasetError(ValueError):
    """A dataset's arrays break an invariant. The message names the problem and the fix."""


# How a dataset's predictions are scored (`Dataset.metric`; `policy_gnn_jax.metrics.score`).
METRICS = ("accuracy", "roc_auc")


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A node-classification graph on the host. Validated at construction (`validate`).

    Attributes:
      name: dataset name.
      features: [N, F] float32 features: a scipy CSR matrix (Planetoid's are row-normalised),
        or a dense C-contiguous `np.ndarray`, an `np.memmap` included, for a graph kept in a
        file (`data.load_arrays`): it is read in blocks of rows, never copied whole.
      labels: [N] int32 class ids; -1 where a node has no label (it must then be in no split).
      edges: [2, E] int32 directed edges (sender, receiver): symmetric, no self-loops, no
        duplicates, sorted by (receiver, sender).
      train_index, val_index, test_index: int32 node ids of each split: non-empty, disjoint.
      num_classes: C.
      source: where the files were read from (a loader sets it; "" for a graph built in
        memory). Not part of the fingerprint: the same data from another folder is the same.
      split: which of a benchmark's fixed splits the indices are (None where it has one).
      metric: how predictions are scored, as the benchmark defines it: "accuracy", or
        "roc_auc" (two classes only; class 1 is the positive class).
    """

    name: str
    features: sp.csr_matrix | np.ndarray
    labels: np.ndarray
    edges: np.ndarray
    train_index: np.ndarray
    val_index: np.ndarray
    test_index: np.ndarray
    num_classes: int
    source: str = ""
    split: int | None = None
    metric: str = "accuracy"

    def __post_init__(self):
        # A path for the source and a numpy integer for the split or the class count are what
        # they stand for.
        if isinstance(self.source, os.PathLike):
            object.__setattr__(self, "source", os.fspath(self.source))
        for field in ("split", "num_classes"):
            if isinstance(getattr(self, field), np.integer):
                object.__setattr__(self, field, int(getattr(self, field)))
        # Read-only arrays: the data a fit trained on cannot change under it (`read_only`).
        for field in ARRAY_FIELDS:
            object.__setattr__(self, field, read_only(getattr(self, field), field))
        validate(self)

    def __reduce__(self):
        # Copies (pickle, copy.deepcopy) are made again through the constructor: read-only and
        # validated like the original.
        return Dataset, tuple(getattr(self, f.name) for f in dataclasses.fields(self))

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
            f"{self.num_classes} classes, {self.num_edges} directed edges, {self.part_sizes()}"
        )

    def part_sizes(self) -> str:
        """The sizes of the parts as the end of `summary` says them: "train/val/test a/b/c"."""
        return (
            f"train/val/test {len(self.train_index)}/{len(self.val_index)}/{len(self.test_index)}"
        )

    def fingerprint(self) -> str:
        """SHA-256 of every array: a checkpoint or a saved fit is only resumed on the same data.

        A CSR matrix is hashed as its three arrays and shape (the fingerprints of before dense
        features existed); dense features as a layout marker, the shape and the rows. So the same
        values fingerprint differently in the two layouts: a fit saved on one does not resume on
        the other. The lengths of the train, val and test ids are hashed too: without them,
        moving the boundary between two parts of a split kept every byte. Large arrays are
        hashed in pieces, without a copy.
        """
        digest = hashlib.sha256()
        feats = self.features
        if is_dense_features(feats):
            layout = (DENSE_MARKER, np.asarray(feats.shape, np.int64), feats)
        else:
            layout = (feats.indptr, feats.indices, feats.data, np.asarray(feats.shape))
        parts = (self.train_index, self.val_index, self.test_index)
        for array in (*layout, self.labels, self.edges, *parts):
            hash_array(digest, array)
        hash_array(digest, np.array([len(part) for part in parts], np.int64))
        if self.metric != "accuracy":  # accuracy's fingerprints stay those of before the field
            digest.update(self.metric.encode())
        return digest.hexdigest()

    def to_jraph(self):
        """The graph as a one-graph `jraph.GraphsTuple`: dense float32 node features [N, F],
        senders and receivers as stored (symmetric, receiver-sorted), no edge features."""
        import jraph  # imported here: the host-side data code does not need JAX otherwise

        return jraph.GraphsTuple(
            nodes=features_array(self.features),
            edges=None,
            senders=self.edges[0].copy(),
            receivers=self.edges[1].copy(),
            n_node=np.array([self.num_nodes], np.int32),
            n_edge=np.array([self.num_edges], np.int32),
            globals=None,
        )


ARRAY_FIELDS = ("features", "labels", "edges", "train_index", "val_index", "test_index")


def read_only(value, field: str):
    """`value` as a dataset keeps it: a read-only array that nobody can write through. An array
    (or a CSR matrix) that is writable, or a view of a writable one, is copied and the copy made
    read-only; the caller's own array is never changed. A read-only one, a read-only memory map
    included, is kept as it is (a graph too large to copy is not copied). A writable memory map
    is refused: whoever holds it could change the file under a fit."""
    if isinstance(value, np.memmap) and value.flags.writeable:
        fail(
            f"{field} is a writable np.memmap: the file could change under a fit.",
            "Open it read-only (np.load(path, mmap_mode='r') or np.memmap(..., mode='r')).",
        )
    if sp.issparse(value) and sp.isspmatrix_csr(value):
        _check_csr(value)  # before the copy, which would drop values indptr leaves out
        parts = (value.data, value.indices, value.indptr)
        if any(_writable(part) for part in parts):
            value = value.copy()
        for part in (value.data, value.indices, value.indptr):
            part.flags.writeable = False
        return value
    if not isinstance(value, np.ndarray):
        fail(
            f"{field} must be a NumPy array, got {type(value).__name__}.",
            "Build the dataset with policy_gnn_jax.from_arrays, which converts it.",
        )
    if _writable(value):
        value = value.copy()
        value.flags.writeable = False
    return value


def _writable(array: np.ndarray) -> bool:
    """Whether `array`, or what it is a view of (an array, a buffer, a map), can be written."""
    if array.flags.writeable:
        return True
    owner = array.base
    while isinstance(owner, np.ndarray):
        if owner.flags.writeable:
            return True
        owner = owner.base
    if owner is None:
        return False
    try:
        return not memoryview(owner).readonly  # a bytearray: writable; a read-only map: not
    except TypeError:  # an owner that says nothing: copy, to be sure
        return True


# Hashed before dense features (a CSR's first bytes are its indptr, which never spell this).
DENSE_MARKER = np.frombuffer(b"dense float32 rows", np.uint8)


def fail(problem: str, fix: str):
    """Raises the InvalidDatasetError every dataset check raises: the problem, then the fix."""
    raise InvalidDatasetError(f"{problem} {fix}")


def validate(ds: Dataset) -> None:
    """Checks every invariant the model relies on; raises InvalidDatasetError naming the fix."""
    _check_description(ds)
    _check_feature_layout(ds.features)
    n = ds.num_nodes
    if n < 1 or ds.num_features < 1:
        fail(f"features have shape {ds.features.shape}.", "Need at least one node and feature.")
    if not all_finite(ds.features):
        fail("features contain NaN or inf.", "Replace or drop the non-finite entries.")
    if isinstance(ds.num_classes, bool) or not isinstance(ds.num_classes, int):
        fail(f"num_classes must be a whole number, got {ds.num_classes!r}.", "Pass an int.")
    if not 2 <= ds.num_classes <= n:
        fail(
            f"num_classes is {ds.num_classes}, for {n} nodes.",
            "Pass the number of classes: at least 2, and at most one a node.",
        )
    _check_labels(ds.labels, n, ds.num_classes)
    _check_edges(ds.edges, n)
    _check_splits(ds, n)
    if ds.metric == "roc_auc":  # a split of one class has no pair to rank: its AUC means nothing
        for split in ("train", "val", "test"):
            present = np.unique(ds.labels[getattr(ds, f"{split}_index")])
            if present.size < 2:
                fail(
                    f"metric 'roc_auc' needs both classes in every split, but the {split} "
                    f"nodes are all of class {present[0]}.",
                    "Use a split with both classes (or, for a Dataset built in Python, "
                    'metric="accuracy").',
                )


def _check_feature_layout(feats) -> None:
    if is_dense_features(feats):
        if feats.dtype != np.float32 or feats.ndim != 2 or not feats.flags.c_contiguous:
            fail(
                f"dense features must be a C-contiguous 2-D float32 array, got {feats.dtype} "
                f"{feats.shape}{'' if feats.flags.c_contiguous else ' (not C-contiguous)'}.",
                "Build the dataset with policy_gnn_jax.from_arrays, which converts them.",
            )
    elif not sp.isspmatrix_csr(feats) or feats.dtype != np.float32:
        fail(
            f"features must be a float32 scipy CSR matrix or dense array, got "
            f"{type(feats).__name__} of {getattr(feats, 'dtype', '?')}.",
            "Build the dataset with policy_gnn_jax.from_arrays, which converts them.",
        )
    else:
        _check_csr(feats)


def _check_csr(feats) -> None:
    """indptr ordered and ending at the stored values, column ids in range: a CSR matrix's
    arrays that say otherwise would be read differently by different code."""
    try:  # sizes first: check_format drops the values indptr leaves out
        if not feats.indptr[-1] == feats.indices.size == feats.data.size:
            raise ValueError(
                f"indptr ends at {feats.indptr[-1]} but {feats.data.size} values are stored"
            )
        feats.check_format(full_check=True)
    except ValueError as err:
        fail(
            f"features are not a valid CSR matrix ({err}).",
            "Build the dataset with policy_gnn_jax.from_arrays, which converts them.",
        )


def _check_description(ds) -> None:
    """The name, source and split go into results.json and a saved fit: text and a whole number."""
    if not isinstance(ds.name, str) or not ds.name.strip("\x00"):
        fail(f"name must be a non-empty string, got {ds.name!r}.", "Name the dataset.")
    if not isinstance(ds.source, str):
        fail(
            f"source must be a string (the folder read from), got {ds.source!r}.",
            'Pass a path, or "" for a graph built in memory.',
        )
    for field in ("name", "source"):  # a saved fit's arrays cannot keep a NUL character
        if "\x00" in getattr(ds, field):
            fail(f"{field} contains a NUL character: {getattr(ds, field)!r}.", "Remove it.")
        try:
            getattr(ds, field).encode("utf-8")
        except UnicodeEncodeError as err:  # a lone surrogate, from bytes decoded wrongly
            fail(f"{field} is not valid text ({err.reason} at {err.start}).", "Fix the text.")
    if ds.metric not in METRICS:
        fail(f"metric must be one of {METRICS}, got {ds.metric!r}.", "Pick one of them.")
    if ds.metric == "roc_auc" and ds.num_classes != 2:
        fail(
            f"metric 'roc_auc' needs two classes, got num_classes {ds.num_classes}.",
            'Use metric="accuracy" for more classes.',
        )
    split = ds.split
    if split is not None and (
        isinstance(split, bool) or not isinstance(split, int) or not 0 <= split <= 2**31 - 1
    ):
        fail(
            f"split must be None or a whole number in 0..2**31-1, got {split!r}.",
            "Pass the index of the benchmark's fixed split, or None where it has one.",
        )


def _check_labels(labels, n, num_classes):
    if labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer):
        fail(
            f"labels must be an integer array of shape ({n},), got {labels.dtype} {labels.shape}.",
            "Pass one class id per node (-1 for unlabelled nodes).",
        )
    if labels.size and (labels.min() < -1 or labels.max() >= num_classes):
        fail(
            f"labels must lie in -1..{num_classes - 1}, got {labels.min()}..{labels.max()}.",
            "Use class ids 0..C-1, and -1 only for nodes in no split.",
        )


def _check_edges(edges, n):
    """In bounded memory (`edge_check`): a memory-mapped list of 8e7 edges is checked too."""
    problem = edge_problem(edges, n)
    if problem is not None:
        fail(*problem)


def _check_splits(ds, n):
    splits = {"train": ds.train_index, "val": ds.val_index, "test": ds.test_index}
    seen = np.zeros(n, bool)
    for name, index in splits.items():
        if index.ndim != 1 or not np.issubdtype(index.dtype, np.integer) or index.size == 0:
            fail(
                f"{name}_index must be a non-empty 1-D integer array, got {index.dtype} "
                f"{index.shape}.",
                "Pass the node ids of each split.",
            )
        if index.min() < 0 or index.max() >= n:
            fail(
                f"{name}_index has ids outside 0..{n - 1} ({index.min()}..{index.max()}).",
                "Fix the split's node ids.",
            )
        if np.unique(index).size != index.size:
            fail(f"{name}_index repeats node ids.", "List each node once.")
        if np.any(seen[index]):
            fail(f"{name}_index overlaps another split.", "Make train/val/test disjoint.")
        seen[index] = True
        if np.any(ds.labels[index] < 0):
            fail(
                f"{np.sum(ds.labels[index] < 0)} nodes of {name}_index have no label (-1).",
                "Give every split node a class id, or leave it out of the split.",
            )
