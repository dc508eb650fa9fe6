"""The shared GCNs and the decoupled backbone against dense numpy references, gradients included."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from policy_gnn_jax import backbones, graph
from policy_gnn_jax.backbones import gcn, readout


def dense_adjacency(ds) -> np.ndarray:
    n = ds.num_nodes
    a = np.zeros((n, n))
    a[ds.edges[1], ds.edges[0]] = 1.0
    a += np.eye(n)
    d = a.sum(1)
    return a / np.sqrt(d[:, None] * d[None, :])


def test_propagate_matches_dense(small_dataset, small_graph, key):
    h = jax.random.normal(key, (small_dataset.num_nodes, 5))
    want = dense_adjacency(small_dataset) @ np.asarray(h, np.float64)
    np.testing.assert_allclose(graph.propagate(small_graph, h), want, rtol=1e-4, atol=1e-5)


def test_symmetric_vjp_matches_autodiff(small_graph, key):
    """The custom backward (Â g) must equal plain autodiff of the segment sum (valid: Â = Â^T)."""
    h = jax.random.normal(key, (small_graph.num_nodes, 4))
    w = jax.random.normal(jax.random.fold_in(key, 1), (small_graph.num_nodes, 4))

    def plain(h):
        msg = h[small_graph.senders] * small_graph.weights[:, None]
        return jax.ops.segment_sum(msg, small_graph.receivers, small_graph.num_nodes)

    g_custom = jax.grad(lambda h: jnp.sum(jnp.tanh(graph.propagate(small_graph, h)) * w))(h)
    g_plain = jax.grad(lambda h: jnp.sum(jnp.tanh(plain(h)) * w))(h)
    chex.assert_trees_all_close(g_custom, g_plain, rtol=1e-5, atol=1e-6)


def numpy_readout_gcn(params, x, a_hat, max_depth):
    p = params["params"]
    h = x
    logits = []
    for k in range(1, max_depth + 1):
        h = np.maximum(a_hat @ (h @ np.asarray(p[f"w_{k}"], np.float64)), 0.0)
        logits.append(h @ np.asarray(p["w_out"], np.float64))
    return np.stack(logits)


@pytest.mark.parametrize("sparse", [True, False])
def test_readout_gcn_matches_numpy_all_depths(small_dataset, small_graph, key, sparse):
    model = readout.ReadoutGCN(hidden=8, num_classes=3, max_depth=4, sparse_features=sparse)
    params = model.init(key, small_graph, train=False)
    got = model.apply(params, small_graph, train=False)
    chex.assert_shape(got, (4, small_dataset.num_nodes, 3))
    want = numpy_readout_gcn(
        params,
        small_dataset.features.toarray().astype(np.float64),
        dense_adjacency(small_dataset),
        4,
    )
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_gradients_match_numpy_finite_differences(small_dataset, small_graph, key):
    """d loss / d w_out and w_1 against central differences of the float64 numpy reference."""
    model = readout.ReadoutGCN(hidden=4, num_classes=3, max_depth=2)
    params = model.init(key, small_graph, train=False)
    x = small_dataset.features.toarray().astype(np.float64)
    a_hat = dense_adjacency(small_dataset)
    labels = small_dataset.labels

    def np_loss(p):
        z = numpy_readout_gcn(p, x, a_hat, 2)[1]
        z = z - z.max(1, keepdims=True)
        return -np.mean(z[np.arange(len(labels)), labels] - np.log(np.exp(z).sum(1)))

    def jax_loss(p):
        z = model.apply(p, small_graph, train=False)[1]
        return jnp.mean(gcn.cross_entropy(z, small_graph.labels))

    grads = jax.grad(jax_loss)(params)["params"]
    p64 = jax.tree.map(lambda v: np.asarray(v, np.float64), params)
    for name, (i, j) in [("w_out", (1, 2)), ("w_1", (3, 0)), ("w_2", (0, 1))]:
        eps = 1e-5
        plus = jax.tree.map(np.copy, p64)
        minus = jax.tree.map(np.copy, p64)
        plus["params"][name][i, j] += eps
        minus["params"][name][i, j] -= eps
        numeric = (np_loss(plus) - np_loss(minus)) / (2 * eps)
        np.testing.assert_allclose(grads[name][i, j], numeric, rtol=2e-3, atol=1e-6)


def test_readout_parameter_count_is_shared(small_graph, key):
    f, h, c, k = small_graph.num_features, 8, 3, 5
    model = readout.ReadoutGCN(hidden=h, num_classes=c, max_depth=k)
    params = model.init(key, small_graph, train=False)
    assert sum(v.size for v in jax.tree.leaves(params)) == f * h + (k - 1) * h * h + h * c


@pytest.mark.parametrize("min_depth", [1, 2])
def test_paper_gcn_parameter_count(small_graph, key, min_depth):
    """docs/algorithm.md section 2: F*H + (K-2)*H*H + H*C, plus F*C when depth 1 is allowed."""
    f, h, c, k = small_graph.num_features, 8, 3, 5
    model = gcn.SharedGCN(hidden=h, num_classes=c, max_depth=k, min_depth=min_depth)
    params = model.init(key, small_graph, train=False)
    want = f * h + (k - 2) * h * h + h * c + (f * c if min_depth == 1 else 0)
    assert sum(v.size for v in jax.tree.leaves(params)) == want


def test_depth_logits_picks_each_nodes_depth():
    logits_all = jnp.arange(3 * 4 * 2, dtype=jnp.float32).reshape(3, 4, 2)
    depth = jnp.array([1, 3, 2, 3])
    one_to_three = gcn.Backbone(None, None, None, None, max_depth=3, min_depth=1)
    got = gcn.depth_logits(one_to_three, logits_all, depth)
    want = np.stack([logits_all[d - 1, i] for i, d in enumerate([1, 3, 2, 3])])
    np.testing.assert_array_equal(got, want)


def test_dropout_only_in_training(small_graph, key):
    model = readout.ReadoutGCN(hidden=8, num_classes=3, max_depth=2, input_dropout=0.5)
    params = model.init(key, small_graph, train=False)
    eval_a = model.apply(params, small_graph, train=False)
    eval_b = model.apply(params, small_graph, train=False)
    np.testing.assert_array_equal(eval_a, eval_b)
    train_a = model.apply(params, small_graph, train=True, rngs={"dropout": key})
    assert not np.allclose(train_a, eval_a)


def test_normalised_adjacency_weights():
    edges = np.array([[0, 1], [1, 0]])  # one undirected edge
    s, r, w = graph.normalised_adjacency(edges, 3)
    # degrees with self-loops: 2, 2, 1
    got = {(int(a), int(b)): float(x) for a, b, x in zip(s, r, w)}
    assert got == pytest.approx({(0, 0): 0.5, (1, 0): 0.5, (0, 1): 0.5, (1, 1): 0.5, (2, 2): 1.0})


def test_weight_decay_only_on_first_layer():
    params = {
        "params": {"w_1": jnp.ones((2, 2)), "w_2": jnp.ones((2, 2)), "w_out": jnp.ones((2, 1))}
    }
    tx = backbones.make_optimizer(lr=0.1, weight_decay=0.5)
    zero_grads = jax.tree.map(jnp.zeros_like, params)
    updates, _ = tx.update(zero_grads, tx.init(params), params)
    assert np.all(np.asarray(updates["params"]["w_1"]) < 0)  # decay pulls w_1 towards 0
    np.testing.assert_array_equal(updates["params"]["w_2"], 0.0)
    np.testing.assert_array_equal(updates["params"]["w_out"], 0.0)


def test_seed_batched_propagation_is_bit_identical_to_plain_vmap(small_graph, key):
    """The custom vmap rule (seeds side by side) must change speed only, never a bit."""
    h = jax.random.normal(key, (3, small_graph.num_nodes, 4))

    def plain(h):
        msg = h[small_graph.senders] * small_graph.weights[:, None]
        return jax.ops.segment_sum(
            msg, small_graph.receivers, small_graph.num_nodes, indices_are_sorted=True
        )

    def loss(prop):
        return lambda h: jnp.sum(jnp.tanh(prop(small_graph, jnp.tanh(prop(small_graph, h)))))

    ours = jax.jit(jax.vmap(jax.value_and_grad(loss(graph.propagate))))(h)
    reference = jax.jit(
        jax.vmap(jax.value_and_grad(loss(lambda g, x: _symmetric_reference(plain, x))))
    )(h)
    chex.assert_trees_all_equal(ours, reference)


def _symmetric_reference(plain, x):
    """Plain segment sum with the symmetric VJP, batched by ordinary vmap."""

    @jax.custom_vjp
    def f(x):
        return plain(x)

    f.defvjp(lambda x: (plain(x), None), lambda _, ct: (plain(ct),))
    return f(x)


def numpy_paper_gcn(params, x, a_hat, min_depth, max_depth):
    """docs/algorithm.md section 2, written from its formulas: depth 1 = Â X W_0; depth a >= 2 =
    Â h_{a-1} W_out with h_1 = relu(Â X W_1), h_k = relu(Â h_{k-1} W_k)."""
    p = {name: np.asarray(v, np.float64) for name, v in params["params"].items()}
    logits = {}
    if min_depth == 1:
        logits[1] = a_hat @ x @ p["w_0"]
    h = np.maximum(a_hat @ x @ p["w_1"], 0.0) if max_depth >= 2 else None
    for a in range(2, max_depth + 1):
        logits[a] = a_hat @ h @ p["w_out"]
        if a < max_depth:
            h = np.maximum(a_hat @ h @ p[f"w_{a}"], 0.0)
    return np.stack([logits[a] for a in range(min_depth, max_depth + 1)])


@pytest.mark.parametrize(
    ("min_depth", "max_depth", "sparse"), [(1, 4, True), (2, 5, False), (3, 3, True), (1, 1, True)]
)
def test_paper_gcn_matches_numpy(small_dataset, small_graph, key, min_depth, max_depth, sparse):
    model = gcn.SharedGCN(
        hidden=8, num_classes=3, min_depth=min_depth, max_depth=max_depth, sparse_features=sparse
    )
    params = model.init(key, small_graph, train=False)
    got = model.apply(params, small_graph, train=False)
    chex.assert_shape(got, (max_depth - min_depth + 1, small_dataset.num_nodes, 3))
    x = small_dataset.features.toarray().astype(np.float64)
    want = numpy_paper_gcn(params, x, dense_adjacency(small_dataset), min_depth, max_depth)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_paper_gcn_depth_two_is_kipf_and_welling(small_dataset, small_graph, key):
    """Depth 2 is Kipf & Welling's two-layer GCN, Â relu(Â X W_1) W_2, with no extra readout."""
    model = gcn.SharedGCN(hidden=8, num_classes=3, min_depth=2, max_depth=2)
    params = model.init(key, small_graph, train=False)
    assert set(params["params"]) == {"w_1", "w_out"}
    p = jax.tree.map(lambda v: np.asarray(v, np.float64), params["params"])
    a_hat = dense_adjacency(small_dataset)
    x = small_dataset.features.toarray().astype(np.float64)
    want = a_hat @ np.maximum(a_hat @ x @ p["w_1"], 0) @ p["w_out"]
    np.testing.assert_allclose(
        model.apply(params, small_graph, train=False)[0], want, rtol=1e-4, atol=1e-5
    )


def test_paper_gcn_dropout_only_in_training(small_graph, key):
    model = gcn.SharedGCN(hidden=8, num_classes=3, max_depth=3, input_dropout=0.5)
    params = model.init(key, small_graph, train=False)
    eval_a = model.apply(params, small_graph, train=False)
    np.testing.assert_array_equal(eval_a, model.apply(params, small_graph, train=False))
    train_a = model.apply(params, small_graph, train=True, rngs={"dropout": key})
    assert not np.allclose(train_a, eval_a)


def test_weight_decay_covers_depth_one_weights():
    """W_0 (depth 1) reads the features as W_1 does: both get the first layer's L2."""
    params = {"params": {"w_0": jnp.ones((2, 2)), "w_out": jnp.ones((2, 1))}}
    tx = backbones.make_optimizer(lr=0.1, weight_decay=0.5)
    updates, _ = tx.update(jax.tree.map(jnp.zeros_like, params), tx.init(params), params)
    assert np.all(np.asarray(updates["params"]["w_0"]) < 0)
    np.testing.assert_array_equal(updates["params"]["w_out"], 0.0)


def numpy_decoupled(params, x, a_hat, alpha, min_depth, max_depth):
    """decoupled.py's formula: Z_0 = relu(X W_1 + b_1) W_2 + b_2, Z_k = (1-a) Â Z_{k-1} + a Z_0."""
    p = {name: np.asarray(v, np.float64) for name, v in params["params"].items()}
    z0 = np.maximum(x @ p["w_1"] + p["b_1"], 0.0) @ p["w_2"] + p["b_2"]
    zs = [z0]
    for _ in range(max_depth):
        zs.append((1 - alpha) * a_hat @ zs[-1] + alpha * z0)
    return np.stack(zs[min_depth:])


@pytest.mark.parametrize(("alpha", "min_depth", "max_depth"), [(0.1, 0, 16), (0.0, 2, 6)])
def test_decoupled_matches_numpy(small_dataset, small_graph, key, alpha, min_depth, max_depth):
    from policy_gnn_jax.backbones import decoupled

    model = decoupled.DecoupledGCN(
        hidden=8, num_classes=3, alpha=alpha, min_depth=min_depth, max_depth=max_depth
    )
    params = model.init(key, small_graph, train=False)
    # Non-zero biases, so that the test sees them.
    params = jax.tree.map(lambda v: v + 0.1, params)
    got = model.apply(params, small_graph, train=False)
    chex.assert_shape(got, (max_depth - min_depth + 1, small_dataset.num_nodes, 3))
    x = small_dataset.features.toarray().astype(np.float64)
    a_hat = dense_adjacency(small_dataset)
    want = numpy_decoupled(params, x, a_hat, alpha, min_depth, max_depth)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def numpy_decoupled_options(params, x, a_hat, alpha, max_depth, ego_head, layer_norm):
    """The options' formulas: h = relu(LN(X W_1 + b_1)), with LN(v) = (v - mean) /
    sqrt(var + 1e-6) * scale + bias over the hidden units; Z_k as above; then + h W_e + b_e."""
    p = {name: np.asarray(v, np.float64) for name, v in params["params"].items() if name != "norm"}
    h = x @ p["w_1"] + p["b_1"]
    if layer_norm:
        norm = {k: np.asarray(v, np.float64) for k, v in params["params"]["norm"].items()}
        h = (h - h.mean(1, keepdims=True)) / np.sqrt(h.var(1, keepdims=True) + 1e-6)
        h = h * norm["scale"] + norm["bias"]
    h = np.maximum(h, 0.0)
    z0 = h @ p["w_2"] + p["b_2"]
    zs = [z0]
    for _ in range(max_depth):
        zs.append((1 - alpha) * a_hat @ zs[-1] + alpha * z0)
    zs = np.stack(zs)
    return zs + (h @ p["w_ego"] + p["b_ego"])[None] if ego_head else zs


@pytest.mark.parametrize(
    ("ego_head", "layer_norm", "alpha"),
    [(True, False, 0.1), (False, True, 0.1), (True, True, 0.1), (True, False, 0.5)],  # 0.5: ego+res
)
def test_decoupled_options_match_numpy(
    small_dataset, small_graph, key, ego_head, layer_norm, alpha
):
    from policy_gnn_jax.backbones import decoupled

    model = decoupled.DecoupledGCN(
        hidden=8, num_classes=3, alpha=alpha, max_depth=4, ego_head=ego_head, layer_norm=layer_norm
    )
    params = model.init(key, small_graph, train=False)
    params = jax.tree.map(lambda v: v + 0.1, params)  # non-zero biases and norm offsets
    got = model.apply(params, small_graph, train=False)
    x = small_dataset.features.toarray().astype(np.float64)
    want = numpy_decoupled_options(
        params, x, dense_adjacency(small_dataset), alpha, 4, ego_head, layer_norm
    )
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_decoupled_options_belong_to_the_decoupled_backbone():
    import policy_gnn_jax as pg

    with pytest.raises(pg.ConfigError, match="options of the decoupled backbone"):
        pg.Config(ego_head=True)
    assert pg.Config.decoupled(ego_head=True, layer_norm=True).ego_head


def test_decoupled_parameters_do_not_grow_with_depth(small_graph, key):
    from policy_gnn_jax.backbones import decoupled

    def count(k):
        model = decoupled.DecoupledGCN(hidden=8, num_classes=3, max_depth=k)
        return sum(v.size for v in jax.tree.leaves(model.init(key, small_graph, train=False)))

    f = small_graph.num_features
    assert count(2) == count(32) == f * 8 + 8 + 8 * 3 + 3
