"""The graph on the device: `Graph` (Â as sorted edges, sparse features, splits) and its kernels.

- `graph.py`: `Graph`, and `Â @ h` and `X @ W`, the sparse products every backbone uses;
- `build.py`: `Graph` from a `Dataset` on the host (and from a jraph `GraphsTuple` or a padded
  subgraph), and hop distances between training nodes;
- `gather_matmul.py`: those products as gathers only (a fixed summation order: deterministic);
- `subgraph.py`: the subgraph engine's padded neighbourhoods on the device;
- `sampler.py`: those neighbourhoods sampled on the host.
"""

from policy_gnn_jax.graph.build import (
    KERNELS,
    choose_kernels,
    from_dataset,
    from_graphs_tuple,
    normalised_adjacency,
    operator_graph,
    padded_rows,
    sparse_rows_pay,
    train_hop_distances,
)
from policy_gnn_jax.graph.graph import (
    Graph,
    as_graph,
    dropped_feature_matmul,
    propagate,
    sparse_feature_matmul,
)

__all__ = [
    "KERNELS",
    "Graph",
    "as_graph",
    "choose_kernels",
    "dropped_feature_matmul",
    "from_dataset",
    "from_graphs_tuple",
    "normalised_adjacency",
    "operator_graph",
    "padded_rows",
    "propagate",
    "sparse_feature_matmul",
    "sparse_rows_pay",
    "train_hop_distances",
]
