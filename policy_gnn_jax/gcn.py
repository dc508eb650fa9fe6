"""The shared GCN (ALGORITHM.md section 2): layers shared across depths, all depths in one pass.

`SharedGCN` is the paper's structure (the `gcn` backbone): depth `a` is `a` GCN layers whose last
one propagates to the classes, `h_k = relu(Â h_{k-1} W_k)` for k < a and logits `Â h_{a-1} W_out`,
so depth 2 is Kipf & Welling's GCN. `ReadoutGCN` is the structure this project used until 2026-11
(`a` hidden propagations, then a linear readout `h_a W_out`; the `gcn-readout` backbone), kept so
the results published with it still reproduce bit for bit. Both compute every depth's logits in
one forward pass; a node's prediction is the logits of its own depth.

The propagation and sparse-feature kernels below are shared by every backbone.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import optax
from jax import custom_batching

from policy_gnn_jax import gather_matmul
from policy_gnn_jax import graph as graph_lib


def _segment_propagate(g: graph_lib.Graph, h: jax.Array) -> jax.Array:
    if g.kernels == "gather":
        return gather_matmul.matmul(g.adj_buckets, g.weights, h)
    messages = h[g.senders] * g.weights[:, None]
    return jax.ops.segment_sum(
        messages, g.receivers, num_segments=h.shape[0], indices_are_sorted=True
    )


@jax.custom_vjp
@custom_batching.custom_vmap
def propagate(g: graph_lib.Graph, h: jax.Array) -> jax.Array:
    """`Â @ h` for h [N, D], as a receiver-sorted segment sum.

    Two custom rules, both exact:
    - VJP: `Â^T g = Â g` (Â is symmetric; a subgraph's is not, `Graph.symmetric`, and gets a
      scatter over senders), so the backward pass is one more sorted segment sum
      instead of the unsorted scatter-add autodiff would emit. A test compares it with autodiff.
    - vmap over seeds: the S hidden matrices are laid side by side as one [N, S*D] matrix and
      propagated once. Gathering S*D contiguous floats per edge instead of S separate rows made
      the 10-seed propagation 2.6x faster here, and the sums run in the same order, so the
      results are bit-identical to plain vmap (tested).
    """
    return _segment_propagate(g, h)


@propagate.def_vmap
def _propagate_vmap(axis_size, in_batched, g, h):
    g_batched, h_batched = in_batched
    if any(jax.tree.leaves(g_batched)) or not h_batched:  # not the seed-sweep case: plain vmap
        axes = (jax.tree.map(lambda b: 0 if b else None, g_batched), 0 if h_batched else None)
        return jax.vmap(_segment_propagate, in_axes=axes)(g, h), True
    seeds, nodes, width = h.shape
    wide = jnp.moveaxis(h, 0, 1).reshape(nodes, seeds * width)
    out = propagate(g, wide).reshape(nodes, seeds, width)
    return jnp.moveaxis(out, 1, 0), True


def _propagate_fwd(g, h):
    return propagate(g, h), g


def _propagate_bwd(g, cotangent):
    if not g.symmetric:  # a subgraph: Â^T g as a scatter over senders
        messages = cotangent[g.receivers] * g.weights[:, None]
        return None, jax.ops.segment_sum(messages, g.senders, num_segments=cotangent.shape[0])
    return None, propagate(g, cotangent)


propagate.defvjp(_propagate_fwd, _propagate_bwd)


def sparse_feature_matmul(g: graph_lib.Graph, w: jax.Array, vals: jax.Array | None = None):
    """`X @ w` over the non-zeros of X only: [N, F] x [F, D] -> [N, D].

    `vals` replaces X's non-zero values (input dropout masks them); they get no gradient.
    """
    vals = g.feat_vals if vals is None else vals
    if g.kernels == "gather":
        return _gather_feature_matmul(g, w, jax.lax.stop_gradient(vals))
    return jax.ops.segment_sum(
        w[g.feat_cols] * vals[:, None],
        g.feat_rows,
        num_segments=g.num_nodes,
        indices_are_sorted=True,
    )


@jax.custom_vjp
def _gather_feature_matmul(g: graph_lib.Graph, w: jax.Array, vals: jax.Array) -> jax.Array:
    """X @ w as gathers; its VJP is X^T @ cotangent, also as gathers (autodiff of the gather
    `w[cols]` would scatter-add into w: atomics on a GPU)."""
    return gather_matmul.matmul(g.x_buckets, vals, w)


def _gather_feature_matmul_fwd(g, w, vals):
    return _gather_feature_matmul(g, w, vals), (g, vals)


def _gather_feature_matmul_bwd(residuals, cotangent):
    g, vals = residuals
    return None, gather_matmul.matmul(g.xt_buckets, vals, cotangent), None


_gather_feature_matmul.defvjp(_gather_feature_matmul_fwd, _gather_feature_matmul_bwd)


def dropped_feature_matmul(g, w, rate: float, train: bool, sparse: bool = True) -> jax.Array:
    """`dropout(X) @ w`, called inside a Flax module: Kipf & Welling's dropout on the features'
    non-zeros only (dropping zeros changes nothing, and N*F random bits cost more than the
    layer); `sparse=False` drops and multiplies the dense features (a reference path)."""
    # A graph with dense rows and no non-zero list (`graph.operator_graph`: subgraph views of
    # dense-featured graphs, jraph GraphsTuples) takes the dense product.
    sparse = sparse and not (g.feat_vals.shape[0] == 0 and g.features.shape[1] > 0)
    if sparse:
        vals = nn.Dropout(rate, deterministic=not train)(g.feat_vals)
        return sparse_feature_matmul(g, w, vals)
    return nn.Dropout(rate, deterministic=not train)(g.features) @ w


class ReadoutGCN(nn.Module):
    """GCN layers W_1..W_K shared across depths, and one linear readout W_out (until 2026-11).

    Parameters: F*H + (K-1)*H*H + H*C (no biases, as ALGORITHM.md counts them).
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
        # placement measured best on Cora and CiteSeer validation (README, "Choices").
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


class SharedGCN(nn.Module):
    """The paper's shared GCN: depth `a` ends with a GCN layer to the classes.

    Depth 1 is `Â X W_0`; depth a >= 2 is `h_1 = relu(Â X W_1)`, `h_k = relu(Â h_{k-1} W_k)` for
    k = 2..a-1, logits `Â h_{a-1} W_out`. Dropout acts on each layer's input, as in Kipf & Welling:
    the features (rate `input_dropout`) and every hidden state (rate `dropout`); a hidden state
    feeds both the next hidden layer and the output layer with one dropout mask.

    Only depths `min_depth..max_depth` are computed and returned ([max_depth - min_depth + 1, N,
    C]): W_0 exists only when depth 1 is allowed, and the output layer is applied only where a
    depth ends. Parameters: F*C (depth 1) + F*H + (K-2)*H*H + H*C.
    """

    hidden: int
    num_classes: int
    max_depth: int
    min_depth: int = 1
    dropout: float = 0.5
    input_dropout: float = 0.0
    sparse_features: bool = True

    @nn.compact
    def __call__(self, g: graph_lib.Graph | jraph.GraphsTuple, *, train: bool) -> jax.Array:
        g = graph_lib.as_graph(g, self.num_classes)  # a jraph.GraphsTuple is welcome too
        init = nn.initializers.glorot_uniform()
        h_size, c_size = self.hidden, self.num_classes
        first = []  # the first layer's weights: W_1 (to the hidden states), W_0 (depth 1)
        if self.max_depth >= 2:
            first.append(self.param("w_1", init, (g.num_features, h_size)))
        if self.min_depth == 1:
            first.append(self.param("w_0", init, (g.num_features, c_size)))
        # Â (X W) == (Â X) W, and propagating the narrow product is cheaper; W_1 and W_0 share
        # the one sparse product and the one propagation.
        z = propagate(
            g,
            dropped_feature_matmul(
                g, jnp.concatenate(first, 1), self.input_dropout, train, self.sparse_features
            ),
        )
        logits = [z[:, -c_size:]] if self.min_depth == 1 else []
        if self.max_depth >= 2:
            h = nn.relu(z[:, :h_size])
            w_out = self.param("w_out", init, (h_size, c_size))
            for a in range(2, self.max_depth + 1):
                # h is h_{a-1}: it ends depth a (through W_out) and starts h_a (through W_a).
                h_in = nn.Dropout(self.dropout, deterministic=not train)(h)
                ends_here = a >= self.min_depth
                goes_on = a < self.max_depth
                weights = []
                if goes_on:
                    weights.append(self.param(f"w_{a}", init, (h_size, h_size)))
                if ends_here:
                    weights.append(w_out)
                z = propagate(g, h_in @ jnp.concatenate(weights, 1))
                if ends_here:
                    logits.append(z[:, -c_size:])
                if goes_on:
                    h = nn.relu(z[:, :h_size])
        return jnp.stack(logits)


def make_gcn(config, g: graph_lib.Graph, max_depth: int, min_depth: int = 1) -> SharedGCN:
    """The paper-structure SharedGCN a config describes, for depths `min_depth..max_depth`."""
    return SharedGCN(
        hidden=config.hidden,
        num_classes=g.num_classes,
        max_depth=max_depth,
        min_depth=min_depth,
        dropout=config.dropout,
        input_dropout=config.input_dropout,
    )


def make_readout_gcn(config, g: graph_lib.Graph, max_depth: int) -> ReadoutGCN:
    """The ReadoutGCN (the structure until 2026-11) a config describes, depths 1..max_depth."""
    return ReadoutGCN(
        hidden=config.hidden,
        num_classes=g.num_classes,
        max_depth=max_depth,
        dropout=config.dropout,
        input_dropout=config.input_dropout,
    )


def select_depth(logits_all: jax.Array, depth: jax.Array, min_depth: int = 1) -> jax.Array:
    """Picks each node's logits at its own depth.

    Args:
      logits_all: [D, M, C] logits of depths min_depth..min_depth+D-1 (a backbone's `logits`).
      depth: [M] int depths in that range.
      min_depth: the depth of row 0 (the backbone's `min_depth`).

    Returns:
      [M, C].
    """
    return jnp.take_along_axis(logits_all, (depth - min_depth)[None, :, None], axis=0)[0]


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Per-example softmax cross-entropy, [M, C] x [M] -> [M]."""
    return optax.softmax_cross_entropy_with_integer_labels(logits, jnp.maximum(labels, 0))


def accuracy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Fraction of rows whose argmax equals the label."""
    return jnp.mean(jnp.argmax(logits, -1) == labels)


# The weights that read the features: W_1 of every GCN, and W_0 (depth 1) of the paper structure.
FIRST_LAYER = ("w_1", "w_0")


def make_optimizer(lr: float, weight_decay: float) -> optax.GradientTransformation:
    """Adam with coupled L2 on the first layer's weights (Kipf & Welling's choice).

    The decay is added to the gradient before Adam, as torch's Adam `weight_decay`. Decaying only
    W_1 measured better than decaying every weight on Cora and CiteSeer validation (README).
    """

    def first_layer_only(params):
        return jax.tree_util.tree_map_with_path(
            lambda path, _: any(getattr(k, "key", None) in FIRST_LAYER for k in path), params
        )

    return optax.chain(
        optax.add_decayed_weights(weight_decay, mask=first_layer_only), optax.adam(lr)
    )
