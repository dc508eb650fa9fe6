"""The graph on the device: `Graph` (Â as sorted edges, sparse features, splits) and its kernels.

- `graph.py`: `Graph`, built from a `Dataset` or a jraph `GraphsTuple`, and hop distances;
- `propagation.py`: `Â @ h` and `X @ W`, the sparse products every backbone uses;
- `gather_matmul.py`: those products as gathers only (a fixed summation order: deterministic);
- `subgraph.py`: the subgraph engine's padded neighbourhoods, sampled on the host.
"""

from policy_gnn_jax.graph.graph import (
    KERNELS,
    Graph,
    as_graph,
    choose_kernels,
    from_dataset,
    from_graphs_tuple,
    normalised_adjacency,
    operator_graph,
    padded_rows,
    sparse_rows_pay,
    train_hop_distances,
)

__all__ = [
    "KERNELS",
    "Graph",
    "as_graph",
    "choose_kernels",
    "from_dataset",
    "from_graphs_tuple",
    "normalised_adjacency",
    "operator_graph",
    "padded_rows",
    "sparse_rows_pay",
    "train_hop_distances",
]
