"""The decoupled backbone: an MLP on the features, then parameter-free propagation.

Depth k is k steps of personalised-PageRank propagation of the MLP's logits (APPNP's scheme):

    Z_0 = MLP(X),   Z_k = (1 - alpha) Â Z_{k-1} + alpha Z_0,   logits at depth k = Z_k,

with `alpha` = `Config.teleport`; alpha = 0 gives `Â^k MLP(X)` (DAGNN's and SGC's powers). Depth 0
is the MLP alone.

Two options aim at heterophilous graphs, where a node's neighbours mostly belong to other
classes. `ego_head` adds a second output head, never propagated, to every depth:
logits_k = E + Z_k with E = h W_e + b_e, so a node's own features keep weights of their own at
any depth instead of being diluted among its neighbours (the separation of ego and neighbour
embeddings that H2GCN and ACM-GCN found to matter there). `layer_norm` normalises the hidden
layer before its ReLU. A depth costs no parameters, so depths 0..K share every weight and a large K
neither adds weights nor over-smooths a learned layer. All depths come out of one pass: K
propagations of a C-wide matrix, after one MLP.

Why the MLP's outputs and not `Â^k X` cached once (SGC/SIGN): the cached form needs K+1 dense
copies of the features (17 x 3327 x 3703 floats, 0.8 GB, for CiteSeer at K = 16) and an MLP per
depth; propagating C-wide logits costs K sparse products of width C per forward pass and keeps the
features sparse. Measured (`benchmarks/decoupled_forms.py`, docs/adaptive-depth.md): the two
forms tie on validation accuracy, and the all-depth forward each MDP step needs costs 7-19x more
cached. docs/adaptive-depth.md ("The decoupled backbone") gives the validation accuracies behind
the choice of alpha and the regularisation.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from policy_gnn_jax import graph as graph_lib


def propagate_depths(g: graph_lib.Graph, z0: jax.Array, alpha: float, min_depth: int, max_depth):
    """[max_depth - min_depth + 1, N, C]: Z_k for k = min_depth..max_depth (formula above)."""
    out = [z0] if min_depth == 0 else []
    z = z0
    for k in range(1, max_depth + 1):
        z = graph_lib.propagate(g, z)
        if alpha:
            z = (1.0 - alpha) * z + alpha * z0
        if k >= min_depth:
            out.append(z)
    return jnp.stack(out)


class DecoupledGCN(nn.Module):
    """MLP (F -> H -> C, biases, ReLU) with dropout on each layer's input, then propagation.

    Input dropout acts on the features' non-zeros (as in the GCN). Parameters: F*H + H + H*C + C,
    whatever the depth.
    """

    hidden: int
    num_classes: int
    max_depth: int
    min_depth: int = 0
    alpha: float = 0.1
    dropout: float = 0.5
    input_dropout: float = 0.5
    ego_head: bool = False
    layer_norm: bool = False

    @nn.compact
    def __call__(self, g: graph_lib.Graph | jraph.GraphsTuple, *, train: bool) -> jax.Array:
        g = graph_lib.as_graph(g, self.num_classes)  # a jraph.GraphsTuple is welcome too
        init = nn.initializers.glorot_uniform()
        w_1 = self.param("w_1", init, (g.num_features, self.hidden))
        b_1 = self.param("b_1", nn.initializers.zeros, (self.hidden,))
        h = graph_lib.dropped_feature_matmul(g, w_1, self.input_dropout, train) + b_1
        if self.layer_norm:
            h = nn.LayerNorm(name="norm")(h)
        h = nn.Dropout(self.dropout, deterministic=not train)(nn.relu(h))
        w_2 = self.param("w_2", init, (self.hidden, self.num_classes))
        b_2 = self.param("b_2", nn.initializers.zeros, (self.num_classes,))
        z = propagate_depths(g, h @ w_2 + b_2, self.alpha, self.min_depth, self.max_depth)
        if not self.ego_head:
            return z
        w_e = self.param("w_ego", init, (self.hidden, self.num_classes))
        b_e = self.param("b_ego", nn.initializers.zeros, (self.num_classes,))
        return z + (h @ w_e + b_e)[None]


def make_decoupled(config, g: graph_lib.Graph, min_depth: int, max_depth: int) -> DecoupledGCN:
    """The DecoupledGCN a config describes (hidden, dropouts, teleport, the two options)."""
    return DecoupledGCN(
        hidden=config.hidden,
        num_classes=g.num_classes,
        max_depth=max_depth,
        min_depth=min_depth,
        alpha=config.teleport,
        dropout=config.dropout,
        input_dropout=config.input_dropout,
        ego_head=config.ego_head,
        layer_norm=config.layer_norm,
    )
