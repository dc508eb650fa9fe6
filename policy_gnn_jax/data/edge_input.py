"""A user's edge list as a `Dataset` stores it (`as_edges`): [2, E] or [E, 2], ids checked as
given, then made symmetric, without self-loops or duplicates, sorted by (receiver, sender)
(`symmetric_edges`), with what was changed reported."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from policy_gnn_jax.data.checks import InvalidDatasetError, fail
from policy_gnn_jax.data.edge_check import edge_problem

EDGE_LAYOUTS = ("2xE", "Ex2")


def _edge_rows(edges, layout: str | None) -> np.ndarray:
    """The edge array as [2, E]: a 2x2 array could be either layout, so it needs `layout`."""
    if sp.issparse(edges):
        fail(
            f"edges is a scipy sparse {edges.shape[0]}x{edges.shape[1]} matrix, not a dense "
            f"edge list.",
            "Pass a sparse [2, E] edge list as edges.toarray(); for an adjacency matrix, pass "
            "np.stack(adjacency.nonzero()).",
        )
    edges = np.asarray(edges)
    if layout is not None and layout not in EDGE_LAYOUTS:
        fail(
            f"edges_layout must be one of {EDGE_LAYOUTS}, got {layout!r}.",
            'Pass edges_layout="2xE" (senders, receivers) or "Ex2" (one edge a row), as written.',
        )
    if layout == "Ex2":
        if edges.ndim != 2 or edges.shape[1] != 2:  # before the transpose: the user's shape
            fail(
                f'edges_layout="Ex2" needs an [E, 2] array (one edge a row), got {edges.shape}.',
                'Pass edges_layout="2xE" for [2, E] (senders, receivers).',
            )
        edges = edges.T
    elif layout is None and edges.shape == (2, 2):
        fail(
            "a 2x2 edge array could be [2, E] (senders, receivers) or [E, 2] (one edge a row).",
            'Say which: edges_layout="2xE" or edges_layout="Ex2".',
        )
    elif layout is None and edges.ndim == 2 and edges.shape[1] == 2 and edges.shape[0] != 2:
        fail(
            f"edges have shape {edges.shape}: one edge a row ([E, 2]).",
            'Pass edges.T, or edges_layout="Ex2".',
        )
    if edges.ndim != 2 or edges.shape[0] != 2:
        fail(f"edges must have shape [2, E], got {edges.shape}.", "Pass (senders, receivers).")
    return edges


def as_edges(edges, layout, num_nodes: int, symmetrise: bool):
    """The edges to store and what was changed. A memory-mapped int32 [2, E] list that is
    already as stored (checked in bounded memory) is kept in place; any other is normalised
    into a new array, and for a map that copy is reported too."""
    rows = _edge_rows(edges, layout)
    mapped = isinstance(edges, np.memmap)
    if (
        mapped
        and layout != "Ex2"
        and edges.dtype == np.int32
        and edges.flags.c_contiguous
        and edge_problem(edges, num_nodes) is None
    ):
        return edges, []
    stored, changes = _normalise_edges(rows, num_nodes, symmetrise)
    if mapped:
        changes.append(
            "copied the memory-mapped edges into memory (a map is used in place only as int32 "
            "[2, E], symmetric, without self-loops or duplicates, sorted by (receiver, sender))"
        )
    return stored, changes


def _normalise_edges(edges, num_nodes: int, symmetrise: bool) -> tuple[np.ndarray, list[str]]:
    """Returns the stored edge list and a list of what was changed."""
    if edges.size and not np.issubdtype(edges.dtype, np.integer):
        fail(f"edges must be integer node ids, got {edges.dtype}.", "Cast them to int.")
    outside = (edges < 0) | (edges >= num_nodes)  # on the values as given: no cast wraps them
    if np.any(outside):
        fail(
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
        fail(
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


def symmetric_edges(senders: np.ndarray, receivers: np.ndarray, num_nodes: int) -> np.ndarray:
    """Symmetrises, drops self-loops and duplicates; returns [2, E] sorted by (receiver, sender)."""
    senders, receivers = np.asarray(senders), np.asarray(receivers)
    if len(senders) and (
        min(senders.min(), receivers.min()) < 0 or max(senders.max(), receivers.max()) >= num_nodes
    ):
        ends = np.concatenate([senders, receivers])
        wrong = ends[(ends < 0) | (ends >= num_nodes)]
        raise InvalidDatasetError(
            f"{wrong.size} edge endpoint(s) outside 0..{num_nodes - 1} (the first: "
            f"{wrong[0]}): fix the node ids in the edge list."
        )
    s = np.concatenate([senders, receivers]).astype(np.int64)
    r = np.concatenate([receivers, senders]).astype(np.int64)
    keep = s != r
    key = np.unique(r[keep] * num_nodes + s[keep])
    return np.stack([key % num_nodes, key // num_nodes]).astype(np.int32)
