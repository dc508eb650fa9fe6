"""The subgraph and host engines' sampler: a padded neighbourhood of some target nodes, built on
the host (`graph/subgraph.py` runs the backbone on it).

Sampling (a neighbourhood over a budget): at hop h each node keeps at most `fanouts[h-1]`
neighbours, drawn without replacement; if the hop's new nodes or edges still overflow a budget,
a uniform subset of them is kept. A node that kept k of its deg neighbours scales their weights
by deg / k (GraphSAGE's mean estimator applied to Â's sum; its self-loop stays exact).

NumPy over a CSR, called from the compiled loop by `subgraph.sample`.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import jraph
import numpy as np

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.graph import host as host_lib


class HostGraph(NamedTuple):
    """The adjacency on the host: CSR neighbour lists (no self-loops) and degrees with them."""

    indptr: np.ndarray  # [N + 1] int64
    indices: np.ndarray  # [E] int32, each row ascending
    degree: np.ndarray  # [N] float64, deg + 1 (the self-loop)


def host_graph(g: graph_lib.Graph) -> HostGraph:
    indptr = np.asarray(g.nbr_indptr).astype(np.int64)
    return HostGraph(indptr, np.asarray(g.nbr_indices), np.diff(indptr) + 1.0)


class Sampler:
    """Builds padded neighbourhoods on the host in time proportional to the neighbourhood, not
    the graph: per-node scratch arrays replace sets and sorts (reset by one memset a call), and
    a lock keeps concurrent callbacks (one per device) apart."""

    def __init__(self, hg: HostGraph | host_lib.HostStore, config: config_lib.Config):
        self.hg = hg
        # The host engine's store: targets are split-node ids, and rows travel with subgraphs.
        self.store = hg if isinstance(hg, host_lib.HostStore) else None
        self.config = config
        self.max_nodes = config.subgraph_nodes
        self.max_edges = config.subgraph_edges
        n = len(hg.degree)
        # remaining[v]: how many more hops the neighbourhood grows from v (-1: not in it).
        self._remaining = np.full(n, -1, np.int16)
        self._scratch = np.zeros(n, np.int64)  # written before every read: never reset
        self._lock = threading.Lock()

    def __call__(self, seed, target_nodes, target_radii, target_mask, per_target=False):
        """The padded union neighbourhood of the masked targets, each to its own radius.

        Args (NumPy, from the callback): seed [2] uint32; target_nodes, target_radii,
        target_mask: same shape [...]. per_target: draw from the seed and the targets' ids
        (whole-graph ids), so one target's sample does not depend on where it was asked from.

        Returns: `subgraph.Padded`'s fields as NumPy arrays, in its order (node_ids, senders,
        receivers, weights, positions, num_nodes, then the host engine's rows).
        """
        mask = np.asarray(target_mask, bool)
        targets = np.asarray(target_nodes)[mask].astype(np.int64)
        if self.store is not None:
            targets = self.store.split_nodes[targets]
        entropy = np.asarray(seed, np.uint64)
        if per_target:
            entropy = np.concatenate([entropy, targets.astype(np.uint64)])
        rng = np.random.default_rng(entropy)
        radii = np.asarray(target_radii)[mask].astype(np.int64)
        with self._lock:
            nodes, senders, receivers, weights = self.neighbourhood(targets, radii, rng)
        positions = np.zeros(np.shape(target_nodes), np.int32)
        positions[mask] = np.searchsorted(nodes, targets)
        padded = pad(nodes, senders, receivers, weights, self.max_nodes, self.max_edges)
        out = (
            padded.nodes.astype(np.int32),
            padded.senders.astype(np.int32),
            padded.receivers.astype(np.int32),
            padded.edges.astype(np.float32),
            positions,
            np.asarray(len(nodes), np.int32),
        )
        if self.store is None:
            return out
        # Padding nodes carry node 0's row, as the device graph's gather gives them.
        ids = padded.nodes.astype(np.int64)
        if self.store.sparse_rows:
            return (*out, *self.store.padded_rows(ids))
        return (*out, self.store.dense_rows(ids))

    def neighbourhood(self, targets, radii, rng):
        """(nodes ascending, senders, receivers as local ids, weights) of the union of the
        targets' balls, target t to radius radii[t]; sampled only where a budget needs it."""
        try:
            return self._grow(np.asarray(targets), np.asarray(radii), rng)
        finally:
            self._remaining.fill(-1)  # a memset: cheap next to the sampling itself

    def _unique(self, values: np.ndarray) -> np.ndarray:
        """The distinct values, in no particular order, in O(len(values))."""
        scratch, order = self._scratch, np.arange(len(values))
        scratch[values] = order
        return values[scratch[values] == order]

    def _grow(self, targets, radii, rng):
        hg, cfg, remaining = self.hg, self.config, self._remaining
        nodes = np.unique(targets)
        if len(nodes) > self.max_nodes:
            raise ValueError(
                f"{len(nodes)} target nodes do not fit a subgraph of {self.max_nodes} nodes: "
                f"raise subgraph_nodes (--subgraph-nodes)."
            )
        np.maximum.at(remaining, targets, radii.astype(remaining.dtype))
        edge_room = self.max_edges - self.max_nodes  # every node's self-loop is reserved
        receivers, senders, rescaled, scales = [], [], [], []
        for hop, r in enumerate(range(int(radii.max(initial=0)), 0, -1), start=1):
            # Levels run from the widest radius down, so a node's first level is its highest.
            frontier = nodes[remaining[nodes] == r]
            # slot: each edge's receiver as an index into the frontier; degree: per frontier node
            slot, send, degree = _neighbour_edges(hg, frontier)
            new = self._unique(send[remaining[send] < 0])
            fanout = cfg.fanout(hop)
            if fanout and (len(nodes) + len(new) > self.max_nodes or len(send) > edge_room):
                keep = _at_most_per_receiver(slot, degree, fanout, rng)
                slot, send = slot[keep], send[keep]
                new = self._unique(send[remaining[send] < 0])
            if len(nodes) + len(new) > self.max_nodes:  # a uniform subset of the new nodes
                dropped = rng.permutation(new)[self.max_nodes - len(nodes) :]
                remaining[dropped] = -2
                keep = remaining[send] != -2
                remaining[dropped] = -1
                slot, send = slot[keep], send[keep]
            if len(send) > edge_room:  # a uniform subset of the edges
                keep = np.sort(rng.permutation(len(send))[:edge_room])
                slot, send = slot[keep], send[keep]
            edge_room -= len(send)
            # Nodes reached for the first time, or again with more hops to go, grow from r - 1.
            new = self._unique(send[remaining[send] < 0])
            remaining[send] = np.maximum(remaining[send], r - 1)
            nodes = np.concatenate([nodes, new])
            kept = np.bincount(slot, minlength=len(frontier))
            receivers.append(frontier[slot])
            senders.append(send)
            sampled = kept < degree
            rescaled.append(frontier[sampled])
            scales.append(degree[sampled] / np.maximum(kept[sampled], 1))
        nodes = np.sort(nodes)
        local = self._scratch
        local[nodes] = np.arange(len(nodes))
        # Every edge and self-loop as one (receiver, sender) key: the whole graph's edge order.
        n = len(nodes)
        recv = np.concatenate(receivers + [nodes])
        send = np.concatenate(senders + [nodes])
        key = np.sort(local[recv] * n + local[send])
        recv_local, send_local = key // n, key % n
        # A node that kept k of its deg neighbours scales their weights by deg / k.
        scale = np.ones(n)
        scale[local[np.concatenate(rescaled + [nodes[:0]])]] = np.concatenate(scales + [[]])
        factor = np.where(recv_local == send_local, 1.0, scale[recv_local])
        d = hg.degree[nodes]
        weights = factor / np.sqrt(d[send_local] * d[recv_local])
        return nodes, send_local, recv_local, weights


def _neighbour_edges(hg: HostGraph, frontier: np.ndarray):
    """Every edge into the frontier, grouped by receiver: (receiver's index in `frontier`,
    sender, each frontier node's degree)."""
    starts = hg.indptr[frontier]
    counts = hg.indptr[frontier + 1] - starts
    slot = np.repeat(np.arange(len(frontier)), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return slot, hg.indices[starts[slot] + offsets].astype(np.int64), counts


def _at_most_per_receiver(slot, degree, fanout: int, rng) -> np.ndarray:
    """Which edges to keep: at most `fanout` per receiver, uniformly without replacement.

    `slot` is grouped by receiver (ascending); ranking a uniform key inside each group is one
    argsort of `slot + key`."""
    order = np.argsort(slot + rng.random(len(slot)))
    group_start = np.repeat(np.cumsum(degree) - degree, degree)
    rank = np.empty(len(slot), np.int64)
    rank[order] = np.arange(len(slot)) - group_start
    return rank < fanout


def pad(nodes, senders, receivers, weights, max_nodes: int, max_edges: int) -> jraph.GraphsTuple:
    """The subgraph as a one-graph `jraph.GraphsTuple` padded to max_nodes + 1 nodes (jraph's
    padding needs one node of its own) and max_edges edges."""
    graph = jraph.GraphsTuple(
        nodes=nodes.astype(np.int32),
        edges=weights.astype(np.float32),
        senders=senders.astype(np.int32),
        receivers=receivers.astype(np.int32),
        n_node=np.array([len(nodes)], np.int32),
        n_edge=np.array([len(senders)], np.int32),
        globals=None,
    )
    return jraph.pad_with_graphs(graph, n_node=max_nodes + 1, n_edge=max_edges)
