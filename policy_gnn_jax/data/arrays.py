"""Building a `Dataset` from a user's arrays (`from_arrays`) or a jraph `GraphsTuple`
(`from_jraph`): every value checked as given, before any cast, so nothing wraps or vanishes on
the way in; what can be repaired is normalised (directed edges made symmetric, self-loops and
duplicates dropped) and reported; what cannot is refused with a `ValueError` naming the fix.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp

from policy_gnn_jax.data.dataset import Dataset, InvalidDatasetError, symmetric_edges


def _fail(problem: str, fix: str):
    raise InvalidDatasetError(f"{problem} {fix}")


def _as_index(name: str, values, num_nodes: int) -> np.ndarray:
    """Node ids as int32, range-checked on the values as given (a cast first would wrap them)."""
    array = np.asarray(values)
    if array.dtype == bool:
        _fail(f"{name} is a boolean mask.", f"Pass node ids: np.flatnonzero({name}).")
    if array.ndim != 1 or not (np.issubdtype(array.dtype, np.integer) or array.size == 0):
        _fail(f"{name} must be a 1-D array of node ids, got {array.dtype} {array.shape}.", "")
    outside = (array < 0) | (array >= num_nodes)
    if np.any(outside):
        _fail(
            f"{name} holds node id {array[outside][0]}, outside 0..{num_nodes - 1} "
            f"({int(outside.sum())} such ids).",
            "Fix the split's node ids.",
        )
    return array.astype(np.int32)


def _as_labels(labels, num_nodes: int, num_classes) -> tuple[np.ndarray, int]:
    """Labels as int32 and the number of classes, every value checked before the cast."""
    labels = np.asarray(labels)
    if labels.ndim == 1 and labels.shape != (num_nodes,):
        _fail(
            f"features have {num_nodes} rows but labels has {labels.shape[0]} entries.",
            "Give one feature row and one label per node (-1 for unlabelled nodes).",
        )
    if labels.shape != (num_nodes,) or not np.issubdtype(labels.dtype, np.integer):
        _fail(
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
        _fail(f"node {node} has label {labels[node]}.", "Use class ids 0..C-1, -1 for none.")
    if num_classes is not None:
        if isinstance(num_classes, bool) or not isinstance(num_classes, int | np.integer):
            _fail(f"num_classes must be a whole number, got {num_classes!r}.", "Pass an int.")
        if not 2 <= num_classes <= num_nodes:
            _fail(
                f"num_classes is {num_classes}, for {num_nodes} nodes.",
                "Pass the number of classes: at least 2, and at most one a node.",
            )
        high = labels >= num_classes  # on the values as given: an int32 cast would wrap them
        if np.any(high):
            node = int(np.flatnonzero(high)[0])
            _fail(
                f"node {node} has label {labels[node]}, not below num_classes {num_classes}.",
                "Use class ids 0..C-1, -1 for none.",
            )
        return labels.astype(np.int32), int(num_classes)
    top = int(np.argmax(labels))
    # A class id above the node count cannot be a class of this graph (each class needs nodes):
    # a stray id would otherwise size every [N, C] array, and fail far from its cause.
    if labels[top] >= num_nodes:
        _fail(
            f"node {top} has label {labels[top]}, which would make {labels[top] + 1} classes "
            f"for {num_nodes} nodes.",
            "Class ids must be 0..C-1: fix that label, or pass num_classes= if it is right.",
        )
    return labels.astype(np.int32), int(labels[top]) + 1


def _as_features(features) -> sp.csr_matrix:
    """[N, F] float32 CSR; what float32 cannot hold is refused (too large, complex) or counted
    in a warning (too small: it becomes 0), never changed silently."""
    if sp.issparse(features):
        given = sp.csr_matrix(features)
        values = given.data
    else:
        dense = _upcast_small_floats(np.asarray(features))
        if dense.ndim != 2 or not np.issubdtype(dense.dtype, np.number):
            _fail(
                f"features must be a numeric [N, F] array, got {dense.dtype} {dense.shape}.",
                "Pass one feature row per node (dense or scipy.sparse).",
            )
        given, values = dense, dense.reshape(-1)
    if np.iscomplexobj(values):
        _fail(
            "features are complex numbers.",
            "Pass real features (e.g. the real and imaginary parts as separate columns).",
        )
    if given.shape[0] < 1:
        _fail("the graph has no nodes (features have 0 rows).", "Pass at least one node.")
    _check_float32_range(values)
    matrix = sp.csr_matrix(given, dtype=np.float32)  # NaN/inf are non-zeros: checked below
    matrix.sum_duplicates()
    matrix.sort_indices()
    if not np.all(np.isfinite(matrix.data)):
        _fail("features contain NaN or inf.", "Replace or drop the non-finite entries.")
    return matrix


def _upcast_small_floats(array: np.ndarray) -> np.ndarray:
    """bfloat16 and the float8 types (JAX's `ml_dtypes`, not numpy's own) as float32, which
    holds each of their values exactly; any other array as it is."""
    if np.issubdtype(array.dtype, np.number) or array.dtype.kind != "V":
        return array
    import ml_dtypes  # installed with jax

    try:
        bits = ml_dtypes.finfo(array.dtype).bits
    except ValueError:  # a structured or other void dtype: refused by the caller
        return array
    return array.astype(np.float32) if bits <= 16 else array


def _check_float32_range(values: np.ndarray) -> None:
    if np.issubdtype(values.dtype, np.integer):
        rounded = values.astype(np.float32).astype(np.float64) != values.astype(np.float64)
        if np.any(rounded):
            warnings.warn(
                f"{int(rounded.sum())} feature value(s) (integers beyond 2**24) are rounded in "
                f"float32, which this library computes in: rescale them if the digits matter.",
                stacklevel=4,
            )
        return
    if values.dtype == np.float32 or not np.issubdtype(values.dtype, np.floating):
        return
    finite = np.isfinite(values)
    magnitude = np.abs(np.where(finite, values, 0))
    too_large = magnitude > np.finfo(np.float32).max
    if np.any(too_large):
        _fail(
            f"{int(too_large.sum())} feature value(s) (largest {magnitude.max():.3g}) are beyond "
            f"float32's range (±{np.finfo(np.float32).max:.3g}), which this library computes in.",
            "Rescale the features (e.g. divide by their largest value).",
        )
    vanish = (magnitude > 0) & (values.astype(np.float32) == 0)
    if np.any(vanish):
        warnings.warn(
            f"{int(vanish.sum())} feature values below float32's smallest "
            f"({np.finfo(np.float32).smallest_subnormal:.3g}) become 0 in float32: rescale the "
            f"features if they matter.",
            stacklevel=4,
        )


EDGE_LAYOUTS = ("2xE", "Ex2")


def _edge_rows(edges, layout: str | None) -> np.ndarray:
    """The edge array as [2, E]: a 2x2 array could be either layout, so it needs `layout`."""
    if sp.issparse(edges):
        _fail(
            f"edges is a sparse {edges.shape[0]}x{edges.shape[1]} matrix (an adjacency), not an "
            f"edge list.",
            "Pass np.stack(adjacency.nonzero()) as edges.",
        )
    edges = np.asarray(edges)
    if layout is not None and layout not in EDGE_LAYOUTS:
        _fail(f"edges_layout must be one of {EDGE_LAYOUTS}, got {layout!r}.", "")
    if layout == "Ex2":
        edges = edges.T
    elif layout is None and edges.shape == (2, 2):
        _fail(
            "a 2x2 edge array could be [2, E] (senders, receivers) or [E, 2] (one edge a row).",
            'Say which: edges_layout="2xE" or edges_layout="Ex2".',
        )
    elif layout is None and edges.ndim == 2 and edges.shape[1] == 2 and edges.shape[0] != 2:
        _fail(
            f"edges have shape {edges.shape}: one edge a row ([E, 2]).",
            'Pass edges.T, or edges_layout="Ex2".',
        )
    if edges.ndim != 2 or edges.shape[0] != 2:
        _fail(f"edges must have shape [2, E], got {edges.shape}.", "Pass (senders, receivers).")
    return edges


def _normalise_edges(edges, num_nodes: int, symmetrise: bool) -> tuple[np.ndarray, list[str]]:
    """Returns the stored edge list and a list of what was changed."""
    if edges.size and not np.issubdtype(edges.dtype, np.integer):
        _fail(f"edges must be integer node ids, got {edges.dtype}.", "Cast them to int.")
    outside = (edges < 0) | (edges >= num_nodes)  # on the values as given: no cast wraps them
    if np.any(outside):
        _fail(
            f"edge endpoints must lie in 0..{num_nodes - 1}, got {edges[outside][0]} "
            f"({int(outside.sum())} such endpoints).",
            "Fix the node ids in the edge list.",
        )
    s, r = edges.astype(np.int64)
    loops = int(np.sum(s == r))
    s, r = s[s != r], r[s != r]
    unique = np.unique(r * num_nodes + s)
    duplicates = s.size - unique.size
    stored = symmetric_edges(s, r, num_nodes)
    added = stored.shape[1] - unique.size
    if added and not symmetrise:
        _fail(
            f"the graph is directed: {added} of its edges have no reverse edge.",
            "The GCN needs a symmetric adjacency: pass symmetrise=True to add the reverse edges, "
            "or add them yourself.",
        )
    changes = [
        f"{what} {count} {noun}"
        for what, count, noun in (
            ("dropped", loops, "self-loops (Â adds its own)"),
            ("dropped", duplicates, "duplicate edges"),
            ("added", added, "reverse edges to make the graph symmetric"),
        )
        if count
    ]
    return stored, changes


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
) -> Dataset:
    """A `Dataset` from NumPy arrays, validated and normalised.

    Args:
      features: [N, F] dense array or scipy.sparse matrix (used as given: no row normalisation).
      edges: [2, E] integer (sender, receiver) pairs in any order.
      labels: [N] integer class ids, -1 for unlabelled nodes (which must be in no split).
      train_index, val_index, test_index: node ids of each split (non-empty, disjoint).
      name: the dataset's name in results.
      symmetrise: add the reverse of every directed edge; with False a directed graph is refused.
      num_classes: C (default: the largest label + 1).
      edges_layout: "2xE" (two rows: senders, receivers) or "Ex2" (one edge a row); needed only
        where the shape cannot tell (a 2x2 array).

    Returns:
      The Dataset. What was changed (self-loops, duplicates, reverse edges) is reported with
      `warnings.warn`.

    Raises:
      ValueError (InvalidDatasetError): a problem that cannot be repaired, naming the fix.
    """
    if not isinstance(name, str) or not name:
        _fail(f"name must be a non-empty string, got {name!r}.", "Pass the dataset's name.")
    if not isinstance(symmetrise, bool | np.bool_):  # "False" would read as true
        _fail(f"symmetrise must be True or False, got {symmetrise!r}.", "Pass a bool.")
    feats = _as_features(features)
    n = feats.shape[0]
    labels, classes = _as_labels(labels, n, num_classes)
    stored, changes = _normalise_edges(_edge_rows(edges, edges_layout), n, symmetrise)
    if changes:
        warnings.warn(f"from_arrays({name!r}): " + "; ".join(changes) + ".", stacklevel=2)
    return Dataset(
        name=name,
        features=feats,
        labels=labels,
        edges=stored,
        train_index=_as_index("train_index", train_index, n),
        val_index=_as_index("val_index", val_index, n),
        test_index=_as_index("test_index", test_index, n),
        num_classes=classes,
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
        _fail(
            f"graph must be a jraph.GraphsTuple with nodes, senders, receivers and n_node, got "
            f"{type(graph).__name__}.",
            "Build one with jraph.GraphsTuple(nodes=X, senders=s, receivers=r, n_node=[N], ...).",
        )
    n_node = np.asarray(graph.n_node).reshape(-1)
    if not np.issubdtype(n_node.dtype, np.integer):
        _fail(f"n_node must hold whole numbers, got {n_node.tolist()}.", "Pass n_node=[N].")
    if n_node.size != 1:
        _fail(
            f"the GraphsTuple holds {n_node.size} graphs.",
            "Pass one graph (node classification on one graph); jraph.unbatch splits a batch.",
        )
    nodes = graph.nodes
    if nodes is None:
        _fail("graph.nodes is None: the features are missing.", "Set nodes to the [N, F] array.")
    if isinstance(nodes, dict):
        _fail(
            f"graph.nodes is a dict with keys {sorted(nodes)}.",
            "Pass a GraphsTuple whose nodes are the [N, F] feature array.",
        )
    rows = np.asarray(nodes).shape[0] if np.ndim(nodes) else 0
    if int(n_node[0]) != rows:
        _fail(
            f"the GraphsTuple's n_node says {int(n_node[0])} nodes, but nodes has {rows} rows.",
            "Make n_node the number of feature rows.",
        )
    senders, receivers = np.asarray(graph.senders), np.asarray(graph.receivers)
    if senders.shape != receivers.shape or senders.ndim != 1:
        _fail(
            f"senders {senders.shape} and receivers {receivers.shape} must be 1-D arrays of "
            f"one length.",
            "Pass one sender and one receiver per edge.",
        )
    n_edge = getattr(graph, "n_edge", None)
    if n_edge is not None and np.asarray(n_edge).reshape(-1).tolist() != [senders.size]:
        _fail(
            f"the GraphsTuple's n_edge says {np.asarray(n_edge).reshape(-1).tolist()}, but "
            f"there are {senders.size} senders.",
            "Make n_edge the number of edges ([E]).",
        )
    if graph.edges is not None:
        warnings.warn("from_jraph: edge features are ignored (Â is built from the structure).")
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
    )
