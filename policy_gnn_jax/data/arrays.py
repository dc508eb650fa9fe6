"""Building a `Dataset` from a user's arrays (`from_arrays`) or a jraph `GraphsTuple`
(`from_jraph`): every value checked as given, before any cast, so nothing wraps or vanishes on
the way in; what can be repaired is normalised (directed edges made symmetric, self-loops and
duplicates dropped) and reported; what cannot is refused with a `ValueError` naming the fix.
"""

from __future__ import annotations

import warnings

import numpy as np

from policy_gnn_jax.data.checks import fail
from policy_gnn_jax.data.dataset import Dataset
from policy_gnn_jax.data.edge_input import as_edges
from policy_gnn_jax.data.feature_input import as_features


def node_ids(name: str, values, num_nodes: int) -> np.ndarray:
    """Node ids as int32, range-checked on the values as given (a cast first would wrap them);
    anything else is an InvalidDatasetError naming `name` and what to pass."""
    if isinstance(values, np.ma.MaskedArray):  # np.asarray would drop the mask
        fail(f"{name} is a masked array.", f"Pass the node ids alone: {name}.compressed().")
    array = np.asarray(values)
    if array.dtype == bool:
        fail(f"{name} is a boolean mask.", f"Pass node ids: np.flatnonzero({name}).")
    if array.size == 0 and array.ndim == 1:
        array = array.astype(np.int32)  # [] is no nodes, whatever dtype numpy guessed
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        fail(
            f"{name} must be a 1-D array of node ids, got {array.dtype} {array.shape}.",
            f"Pass a 1-D array of integer ids in 0..{num_nodes - 1}, e.g. np.array([0, 5]).",
        )
    outside = (array < 0) | (array >= num_nodes)
    if np.any(outside):
        fail(
            f"{name} holds node id {array[outside][0]}, outside 0..{num_nodes - 1} "
            f"({int(outside.sum())} such ids).",
            f"Pass ids in 0..{num_nodes - 1}.",
        )
    return array.astype(np.int32)


def _as_labels(labels, num_nodes: int, num_classes) -> tuple[np.ndarray, int]:
    """Labels as int32 and the number of classes, every value checked before the cast."""
    labels = np.asarray(labels)
    if labels.ndim == 1 and labels.shape != (num_nodes,):
        fail(
            f"features have {num_nodes} rows but labels has {labels.shape[0]} entries.",
            "Give one feature row and one label per node (-1 for unlabelled nodes).",
        )
    if labels.shape != (num_nodes,) or not np.issubdtype(labels.dtype, np.integer):
        fail(
            f"labels must be integers of shape ({num_nodes},) (one per feature row), got "
            f"{labels.dtype} {labels.shape}.",
            "Pass one class id per node, -1 for unlabelled nodes.",
        )
    low = (
        labels < -1
        if np.issubdtype(labels.dtype, np.signedinteger)
        else np.zeros(labels.shape, bool)
    )
    if np.any(low):
        node = int(np.flatnonzero(low)[0])
        fail(f"node {node} has label {labels[node]}.", "Use class ids 0..C-1, -1 for none.")
    if num_classes is not None:
        if isinstance(num_classes, bool) or not isinstance(num_classes, int | np.integer):
            fail(f"num_classes must be a whole number, got {num_classes!r}.", "Pass an int.")
        if not 2 <= num_classes <= num_nodes:  # before the labels are compared with it
            fail(
                f"num_classes is {num_classes}, for {num_nodes} nodes.",
                "Pass the number of classes: at least 2, and at most one a node.",
            )
        high = labels >= num_classes  # on the values as given: an int32 cast would wrap them
        if np.any(high):
            node = int(np.flatnonzero(high)[0])
            fail(
                f"node {node} has label {labels[node]}, not below num_classes {num_classes}.",
                "Use class ids 0..C-1, -1 for none.",
            )
        return labels.astype(np.int32), int(num_classes)
    top = int(np.argmax(labels))
    # A class id above the node count cannot be a class of this graph (each class needs nodes):
    # a stray id would otherwise size every [N, C] array, and fail far from its cause.
    if labels[top] >= num_nodes:
        fail(
            f"node {top} has label {labels[top]}, which would make {int(labels[top]) + 1} classes "
            f"for {num_nodes} nodes.",
            "Class ids must be 0..C-1: fix that label, or pass num_classes= if it is right.",
        )
    return labels.astype(np.int32), int(labels[top]) + 1


def from_arrays(
    features,
    edges,
    labels,
    train_index,
    val_index,
    test_index,
    *,
    name: str = "custom",
    symmetrise: bool = True,
    num_classes: int | None = None,
    edges_layout: str | None = None,
    source: str = "",
) -> Dataset:
    """A `Dataset` from NumPy arrays, validated and normalised.

    Args:
      features: [N, F] dense array or scipy.sparse matrix (used as given: no row normalisation),
        stored as CSR; an `np.memmap` of float32 is kept as the dataset's features, not copied
        (any other memmap is refused: write it as float32).
      edges: [2, E] integer (sender, receiver) pairs in any order. An int32 `np.memmap`
        already symmetric, without self-loops or duplicates and sorted by (receiver, sender)
        is kept as it is; any other is normalised into a new array.
      labels: [N] integer class ids, -1 for unlabelled nodes (which must be in no split).
      train_index, val_index, test_index: node ids of each split (non-empty, disjoint).
      name: the dataset's name in results.
      symmetrise: add the reverse of every directed edge; with False a directed graph is refused.
      num_classes: C (default: the largest label + 1).
      edges_layout: "2xE" (two rows: senders, receivers) or "Ex2" (one edge a row); needed only
        where the shape cannot tell (a 2x2 array).
      source: where the arrays were read from ("" for arrays built in memory).

    Returns:
      The Dataset. What was changed (self-loops, duplicates, reverse edges) is reported with
      `warnings.warn`.

    Raises:
      ValueError (InvalidDatasetError): a problem that cannot be repaired, naming the fix.
    """
    if not isinstance(name, str) or not name:  # before any repair is warned about
        fail(f"name must be a non-empty string, got {name!r}.", "Pass the dataset's name.")
    if not isinstance(symmetrise, bool | np.bool_):  # "False" would read as true
        fail(f"symmetrise must be True or False, got {symmetrise!r}.", "Pass a bool.")
    feats = as_features(features)
    n = feats.shape[0]
    labels, classes = _as_labels(labels, n, num_classes)
    stored, changes = as_edges(edges, edges_layout, n, symmetrise)
    if changes:
        warnings.warn(f"from_arrays({name!r}): " + "; ".join(changes) + ".", stacklevel=2)
    return Dataset(
        name=name,
        features=feats,
        labels=labels,
        edges=stored,
        train_index=node_ids("train_index", train_index, n),
        val_index=node_ids("val_index", val_index, n),
        test_index=node_ids("test_index", test_index, n),
        num_classes=classes,
        source=source,
    )


def from_jraph(
    graph,
    labels,
    train_index,
    val_index,
    test_index,
    *,
    name: str = "custom",
    symmetrise: bool = True,
    num_classes: int | None = None,
) -> Dataset:
    """A `Dataset` from a one-graph `jraph.GraphsTuple` whose `nodes` are the [N, F] features.

    Edge features (`graph.edges`) are not used: Â's weights come from the structure alone.
    Everything else is as `from_arrays`.
    """
    fields = ("nodes", "senders", "receivers", "n_node")
    if not all(hasattr(graph, f) for f in fields) or graph.n_node is None:
        fail(
            f"graph must be a jraph.GraphsTuple with nodes, senders, receivers and n_node, got "
            f"{type(graph).__name__}.",
            "Build one with jraph.GraphsTuple(nodes=X, senders=s, receivers=r, n_node=[N], ...).",
        )
    n_node = np.asarray(graph.n_node).reshape(-1)
    if not np.issubdtype(n_node.dtype, np.integer):
        fail(f"n_node must hold whole numbers, got {n_node.tolist()}.", "Pass n_node=[N].")
    if n_node.size != 1:
        fail(
            f"the GraphsTuple holds {n_node.size} graphs.",
            "Pass one graph (node classification on one graph): jraph.unbatch splits a batch, "
            "jraph.unpad_with_graphs removes padding.",
        )
    nodes = graph.nodes
    if nodes is None:
        fail("graph.nodes is None: the features are missing.", "Set nodes to the [N, F] array.")
    if isinstance(nodes, dict):
        fail(
            f"graph.nodes is a dict with keys {sorted(nodes)}.",
            "Pass a GraphsTuple whose nodes are the [N, F] feature array.",
        )
    rows = np.asarray(nodes).shape[0] if np.ndim(nodes) else 0
    if int(n_node[0]) != rows:
        fail(
            f"the GraphsTuple's n_node says {int(n_node[0])} nodes, but nodes has {rows} rows.",
            "Make n_node the number of feature rows.",
        )
    senders, receivers = np.asarray(graph.senders), np.asarray(graph.receivers)
    if senders.shape != receivers.shape or senders.ndim != 1:
        fail(
            f"senders {senders.shape} and receivers {receivers.shape} must be 1-D arrays of "
            f"one length.",
            "Pass one sender and one receiver per edge.",
        )
    n_edge = getattr(graph, "n_edge", None)
    if n_edge is not None and np.asarray(n_edge).reshape(-1).tolist() != [senders.size]:
        fail(
            f"the GraphsTuple's n_edge says {np.asarray(n_edge).reshape(-1).tolist()}, but "
            f"there are {senders.size} senders.",
            "Make n_edge the number of edges ([E]).",
        )
    if graph.edges is not None:
        warnings.warn("from_jraph: edge features are ignored (Â is built from the structure).")
    if getattr(graph, "globals", None) is not None:
        warnings.warn("from_jraph: globals are ignored (node classification reads none).")
    edges = np.stack([senders, receivers])
    return from_arrays(
        np.asarray(nodes),
        edges,
        labels,
        train_index,
        val_index,
        test_index,
        name=name,
        symmetrise=symmetrise,
        num_classes=num_classes,
        edges_layout="2xE",  # senders and receivers: even a 2x2 array is two edges
    )
