"""The legacy readout GCN (`--backbone gcn-readout`): kept so results made with it reproduce.

Depth `a` is `a` hidden propagations `h_k = relu(Â h_{k-1} W_k)` followed by one linear readout
`h_a W_out` shared by every depth. The paper's structure (`backbones/gcn.py`) ends each depth with
a GCN layer to the classes instead; it is the default.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.graph.graph import dropped_feature_matmul, propagate


class ReadoutGCN(nn.Module):
    """GCN layers W_1..W_K shared across depths, and one linear readout W_out (legacy).

    Parameters: F*H + (K-1)*H*H + H*C (no biases, as docs/algorithm.md counts them).
    """

    hidden: int
    num_classes: int
    max_depth: int
    dropout: float = 0.5
    input_dropout: float = 0.0
    sparse_features: bool = True

    @nn.compact
    def __call__(self, g: graph_lib.Graph | jraph.GraphsTuple, *, train: bool) -> jax.Array:
        """Returns the logits of every depth: [K, N, C]."""
        g = graph_lib.as_graph(g, self.num_classes)  # a jraph.GraphsTuple is welcome too
        init = nn.initializers.glorot_uniform()
        w_1 = self.param("w_1", init, (g.num_features, self.hidden))
        # Dropout acts on each layer's input, as in Kipf & Welling: the features (on their
        # non-zeros only, their sparse dropout: dropping zeros changes nothing and N*F random bits
        # cost more than the layer), then h_1..h_{K-1}. The readout input is not dropped. This
        # placement measured best on Cora and CiteSeer validation (docs/algorithm.md section 12).
        xw = dropped_feature_matmul(g, w_1, self.input_dropout, train, self.sparse_features)
        # Â (X W_1) == (Â X) W_1, and propagating the narrow product is cheaper.
        h = nn.relu(propagate(g, xw))
        hidden_states = [h]
        for k in range(2, self.max_depth + 1):
            h = nn.Dropout(self.dropout, deterministic=not train)(h)
            h = nn.relu(propagate(g, h @ self.param(f"w_{k}", init, (self.hidden, self.hidden))))
            hidden_states.append(h)
        w_out = self.param("w_out", init, (self.hidden, self.num_classes))
        return jnp.stack(hidden_states) @ w_out


def make_readout_gcn(config, g: graph_lib.Graph, max_depth: int) -> ReadoutGCN:
    """The ReadoutGCN (the legacy structure) a config describes, depths 1..max_depth."""
    return ReadoutGCN(
        hidden=config.hidden,
        num_classes=g.num_classes,
        max_depth=max_depth,
        dropout=config.dropout,
        input_dropout=config.input_dropout,
    )
