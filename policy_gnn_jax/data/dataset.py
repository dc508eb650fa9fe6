"""The host-side `Dataset`, validated when it is made (the checks: `checks.py`), its arrays
kept read-only; the errors a dataset's loading raises. A user's graph becomes a `Dataset` through
`from_arrays` or `from_jraph` (`arrays.py`)."""

from __future__ import annotations

import dataclasses
import hashlib
import os

import numpy as np
import scipy.sparse as sp

from policy_gnn_jax.data.checks import check_csr, fail, validate
from policy_gnn_jax.data.dense import features_array, hash_array, is_dense_features


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
        check_csr(value)  # before the copy, which would drop values indptr leaves out
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
