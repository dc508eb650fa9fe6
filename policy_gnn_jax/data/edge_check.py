"""The edge list's invariants, checked in bounded memory.

A stored edge list is [2, E] (sender, receiver) pairs: node ids in 0..N-1, no self-loops,
strictly increasing in (receiver, sender) (so no duplicates), and symmetric. At E = 8e7 a check
that casts both rows to int64, keys, diffs and sorts them needs several GB; here the rows are
read a block at a time, and the only temporary larger than a block is one row pointer per
node. Symmetry needs no sort: with the edges sorted, each node's senders are one increasing
run, and the reverse of each edge is looked up in its run.
"""

from __future__ import annotations

import numpy as np

# Edges read at once: their int64 temporaries are 2 MB each.
EDGE_BLOCK = 2**18

NOT_SORTED = (
    "edges are not sorted by (receiver, sender) without duplicates.",
    "Build the dataset with from_arrays, or sort with data.symmetric_edges.",
)


def _blocks(num_edges: int):
    for start in range(0, num_edges, EDGE_BLOCK):
        yield start, min(start + EDGE_BLOCK, num_edges)


def edge_problem(edges: np.ndarray, num_nodes: int) -> tuple[str, str] | None:
    """The first broken invariant as (problem, fix), None when the edges are as stored.

    Problems are reported in a fixed order (shape, range, self-loops, order, symmetry), so a
    list with several gets the same message whichever block holds each.
    """
    if edges.ndim != 2 or edges.shape[0] != 2 or not np.issubdtype(edges.dtype, np.integer):
        return (
            f"edges must be an integer array of shape [2, E], got {edges.dtype} {edges.shape}.",
            "Pass (senders, receivers) as two rows.",
        )
    if edges.size == 0:
        return None
    low, high = edges.min(), edges.max()  # reductions: no temporary of E values
    if low < 0 or high >= num_nodes:
        return (
            f"edge endpoints must lie in 0..{num_nodes - 1}, got {low}..{high}.",
            "Fix the node ids in the edge list.",
        )
    problem = _order_problem(edges, num_nodes)
    if problem is None and not _symmetric(edges, num_nodes):
        problem = (
            "edges are directed: some (u, v) has no (v, u).",
            "The GCN's Â must be symmetric: add the reverse edges (from_arrays(symmetrise=True)).",
        )
    return problem


def _order_problem(edges: np.ndarray, num_nodes: int) -> tuple[str, str] | None:
    """Self-loops, else keys `receiver * N + sender` that do not strictly increase."""
    senders, receivers = edges
    increasing, previous = True, None
    for a, b in _blocks(edges.shape[1]):
        s, r = senders[a:b].astype(np.int64), receivers[a:b].astype(np.int64)
        if np.any(s == r):
            return ("edges contain self-loops.", "Drop them (from_arrays does; Â adds its own).")
        keys = r * num_nodes + s
        # The block's first key against the previous block's last: no pair goes unchecked.
        joined = previous is None or keys[0] > previous
        if increasing and not (joined and np.all(keys[1:] > keys[:-1])):
            increasing = False  # a self-loop further on is still the error to report
        previous = keys[-1]
    return None if increasing else NOT_SORTED


def _symmetric(edges: np.ndarray, num_nodes: int) -> bool:
    """Whether every (u, v) has its (v, u), for edges strictly sorted by (receiver, sender).

    The senders of receiver u are `senders[indptr[u]:indptr[u + 1]]`, increasing: the reverse
    of (u, v) is there iff v is among them, found by a binary search inside that row alone,
    run for a block of edges at once. A row is a few cache lines, where a search of all E keys
    would miss the cache at most of its ~27 steps (minutes at E = 8e7, against seconds).
    """
    senders, receivers = edges
    last = edges.shape[1] - 1
    indptr = _row_pointers(receivers, num_nodes)
    for a, b in _blocks(edges.shape[1]):
        u, v = senders[a:b].astype(np.int64), receivers[a:b]
        low, end = indptr[u], indptr[u + 1]
        high = end.copy()
        for _ in range(int(np.max(high - low)).bit_length()):  # a lower bound in each row
            middle = (low + high) // 2
            searching = low < high
            right = senders[np.minimum(middle, last)] < v
            low = np.where(searching & right, middle + 1, low)
            high = np.where(searching & ~right, middle, high)
        if not np.all((low < end) & (senders[np.minimum(low, last)] == v)):
            return False
    return True


def _row_pointers(receivers: np.ndarray, num_nodes: int) -> np.ndarray:
    """[N + 1] int64: where each receiver's run starts in the sorted `receivers`.

    The node ids searched for are of the receivers' own dtype where it holds them, since
    `searchsorted` would otherwise convert the whole (possibly mapped) row to a common dtype.
    """
    fits = np.iinfo(receivers.dtype).max >= num_nodes
    nodes = np.arange(num_nodes + 1, dtype=receivers.dtype if fits else np.int64)
    return np.searchsorted(receivers, nodes).astype(np.int64, copy=False)
