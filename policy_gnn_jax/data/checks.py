"""The checks every `Dataset` passes, however it was built (`validate`, run when one is made and
again by `graph.from_dataset`): each raises an `InvalidDatasetError` that names the problem and
the fix. They run again before anything reaches the device because the fast propagation rule
(`graph.propagate`) is only correct for a symmetric, receiver-sorted adjacency: a directed input
would otherwise train on silently wrong gradients."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from policy_gnn_jax.data.dense import all_finite, is_dense_features
from policy_gnn_jax.data.edge_check import edge_problem


class InvalidDatasetError(ValueError):
    """A dataset's arrays break an invariant. The message names the problem and the fix."""


# The values `Dataset.metric` may take (how `policy_gnn_jax.metrics.score` scores predictions).
METRICS = ("accuracy", "roc_auc")


def fail(problem: str, fix: str):
    """Raises the InvalidDatasetError every dataset check raises: the problem, then the fix."""
    raise InvalidDatasetError(f"{problem} {fix}")


def validate(ds) -> None:
    """Checks every invariant of the Dataset `ds` the model relies on; raises
    InvalidDatasetError naming the fix."""
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
        check_csr(feats)


def check_csr(feats) -> None:
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
