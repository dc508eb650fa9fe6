"""The subgraph engine: exact against the full engine when nothing is sampled, within its budgets
when something is, and reproducible from a seed."""

import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph

import policy_gnn_jax as pg
from policy_gnn_jax import backbones, graph
from policy_gnn_jax import config as config_lib
from policy_gnn_jax.graph import sampler as sampler_lib
from policy_gnn_jax.graph import subgraph
from policy_gnn_jax.mdp import env, policy_gnn, subgraph_engine


def _filled_buffers(ctx, state, g, seed=0, rounds=4):
    """Buffers with random training nodes at random depths: every buffer full."""
    rng = np.random.default_rng(seed)
    buffers, train = state.buffers, np.asarray(g.train_index)
    for _ in range(rounds):
        nodes = jnp.asarray(rng.choice(train, len(train)))
        actions = jnp.asarray(rng.integers(0, ctx.config.num_actions, len(train)))
        buffers = env.add_to_buffers(buffers, nodes, actions, jnp.ones(len(train), bool))
    return buffers


def test_unsampled_subgraph_loss_and_gradients_equal_the_full_engine_on_cora(cora):
    # Dropout off: the two engines draw their masks over different shapes.
    cfg = config_lib.Config.paper(
        engine="subgraph",
        dropout=0.0,
        input_dropout=0.0,
        fanouts=(0,),
        subgraph_nodes=cora.num_nodes,
        subgraph_edges=cora.num_edges + cora.num_nodes,
    )
    g = graph.from_dataset(cora)
    ctx = policy_gnn.env_context(cfg, g, backbones.for_policy(cfg, g), subgraphs=True)
    data = policy_gnn.mdp_data(g, graph.train_hop_distances(cora, cfg.max_depth))
    full_ctx = policy_gnn.env_context(cfg, g, ctx.backbone, subgraphs=False)
    key = jax.random.key(3)
    state = policy_gnn.init_env(ctx, data, key)
    buffers = _filled_buffers(ctx, state, g)
    assert bool(env.full_buffers(buffers, cfg.buffer_size).all())

    loss_full, grads_full = jax.value_and_grad(env.buffer_loss, argnums=1)(
        full_ctx, state.params, data, key, buffers
    )
    sub = subgraph_engine.buffer_subgraph(ctx, key, buffers)
    assert 0 < int(sub.num_nodes) < cora.num_nodes  # a real subgraph, not the whole graph
    loss_sub, grads_sub = jax.value_and_grad(subgraph_engine.subgraph_buffer_loss, argnums=1)(
        ctx, state.params, data, key, buffers, sub
    )
    # Same edges in the same order per node: the forward pass is bit-identical.
    assert float(loss_sub) == float(loss_full)
    for a, b in zip(jax.tree.leaves(grads_full), jax.tree.leaves(grads_sub)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-9)

    # M_t on the validation neighbourhood equals M_t on the whole graph, at every depth.
    for depth in range(cfg.min_depth, cfg.max_depth + 1):
        depths = jnp.full(g.val_index.shape, depth)
        on_sub = ctx.engine.validation_logits(ctx, data, state.params, state.engine_state)
        on_full = full_ctx.engine.validation_logits(full_ctx, data, state.params, None)
        assert float(env.validation_metric(ctx, data, on_sub, depths)) == float(
            env.validation_metric(full_ctx, data, on_full, depths)
        )


def _sampler(ds, **overrides):
    cfg = config_lib.Config.tiny(engine="subgraph", **overrides)
    return sampler_lib.Sampler(sampler_lib.host_graph(graph.from_dataset(ds)), cfg)


def _hops_from(ds, sources):
    n = ds.num_nodes
    adj = sp.csr_matrix((np.ones(ds.num_edges), (ds.edges[0], ds.edges[1])), shape=(n, n))
    return csgraph.dijkstra(adj, unweighted=True, indices=sources).min(0)


def test_unsampled_neighbourhood_is_the_ball_with_every_edge_into_its_inner_nodes(small_dataset):
    ds = small_dataset
    sampler = _sampler(ds, fanouts=(0,), subgraph_nodes=ds.num_nodes, subgraph_edges=10_000)
    targets = np.array([3, 7, 7, 40])
    radii = np.array([2, 1, 2, 1])
    nodes, senders, receivers, weights = sampler.neighbourhood(
        targets, radii, np.random.default_rng(0)
    )
    # The union of balls, by BFS (scipy): node v is in it iff some target t has hop(t, v) <= r_t.
    within = np.zeros(ds.num_nodes, bool)
    remaining = np.full(ds.num_nodes, -np.inf)
    for t, r in zip(targets, radii):
        hop = _hops_from(ds, [t])
        within |= hop <= r
        remaining = np.maximum(remaining, r - hop)
    np.testing.assert_array_equal(nodes, np.flatnonzero(within))
    # Inner nodes (hops to go > 0) receive every neighbour; the outermost only their self-loop.
    received = np.bincount(nodes[receivers], minlength=ds.num_nodes)
    degree = np.bincount(ds.edges[1], minlength=ds.num_nodes)
    inner = within & (remaining > 0)
    np.testing.assert_array_equal(received[inner], degree[inner] + 1)
    np.testing.assert_array_equal(received[within & ~inner], 1)
    # The whole graph's weights 1/sqrt(d_u d_v), self-loops included (d counts the loop).
    d = degree + 1.0
    np.testing.assert_allclose(
        weights, 1 / np.sqrt(d[nodes[senders]] * d[nodes[receivers]]), rtol=1e-12
    )
    # Sorted by (receiver, sender), as the whole graph's edges.
    order = np.lexsort((senders, receivers))
    np.testing.assert_array_equal(order, np.arange(len(order)))


def test_sampled_neighbourhood_keeps_the_budgets_and_rescales_kept_neighbours(small_dataset):
    ds = small_dataset
    sampler = _sampler(ds, fanouts=(2,), subgraph_nodes=40, subgraph_edges=120)
    targets = np.arange(10)
    nodes, senders, receivers, weights = sampler.neighbourhood(
        targets, np.full(10, 3), np.random.default_rng(1)
    )
    assert len(nodes) <= 40 and len(senders) <= 120
    assert set(targets) <= set(nodes)
    degree = np.bincount(ds.edges[1], minlength=ds.num_nodes) + 1.0
    loops = senders == receivers
    np.testing.assert_array_equal(np.sort(receivers[loops]), np.arange(len(nodes)))
    # Each kept edge u->v is a real edge, weighted 1/sqrt(d_u d_v) * deg_v / kept_v.
    real = set(zip(ds.edges[0].tolist(), ds.edges[1].tolist()))
    s, r = nodes[senders[~loops]], nodes[receivers[~loops]]
    assert all(pair in real for pair in zip(s.tolist(), r.tolist()))
    kept = np.bincount(r, minlength=ds.num_nodes)
    expected = (degree[r] - 1) / kept[r] / np.sqrt(degree[s] * degree[r])
    np.testing.assert_allclose(weights[~loops], expected, rtol=1e-12)
    # A target keeps at most its fan-out (2) of its neighbours.
    assert kept[targets].max() <= 2


def test_padded_sample_has_fixed_shapes_and_too_many_targets_are_refused(small_dataset):
    sampler = _sampler(small_dataset, subgraph_nodes=50, subgraph_edges=200)
    nodes = np.arange(12).reshape(3, 4)
    mask = np.ones((3, 4), bool)
    mask[2] = False
    out = sampler(np.array([1, 2], np.uint32), nodes, np.full((3, 4), 1), mask)
    ids, senders, receivers, weights, positions, count = out
    assert ids.shape == (51,) and senders.shape == receivers.shape == weights.shape == (200,)
    np.testing.assert_array_equal(ids[positions[mask]], nodes[mask])
    assert (positions[~mask] == 0).all()
    # Padding edges join the first padding node to itself with weight 0, after the real ones.
    pad = receivers >= count
    assert (weights[pad] == 0).all() and (receivers[pad] == count).all()
    with pytest.raises(ValueError, match="subgraph_nodes"):
        sampler(np.array([1, 2], np.uint32), np.arange(60), np.ones(60, int), np.ones(60, bool))


def test_subgraph_runs_reproduce_bit_for_bit_and_the_seed_matters(small_dataset):
    cfg = config_lib.Config.tiny(
        engine="subgraph", subgraph_nodes=64, subgraph_edges=400, num_episodes=2
    )
    first = pg.fit(small_dataset, cfg, seeds=2, progress=False)
    again = pg.fit(small_dataset, cfg, seeds=2, progress=False)
    for name in ("test_metric", "val_metric", "val_metric_curve", "test_depths"):
        assert first.record[name] == again.record[name], name
    curves = first.record["val_metric_curve"]["per_seed"]
    assert curves[0] != curves[1]  # the two seeds' runs differ
    assert first.record["engine"] == "subgraph"


def test_auto_engine_picks_by_size(small_dataset, monkeypatch):
    g = graph.from_dataset(small_dataset)
    cfg = config_lib.Config.tiny()
    assert cfg.engine == "auto" and not subgraph.use_subgraphs(cfg, g)
    monkeypatch.setattr(config_lib, "AUTO_SUBGRAPH_NODES", small_dataset.num_nodes - 1)
    assert subgraph.use_subgraphs(cfg, g)
    assert not subgraph.use_subgraphs(config_lib.Config.tiny(engine="full"), g)


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(engine="sub"), "engine"),
        (dict(subgraph_nodes=1), "subgraph_nodes"),
        (dict(subgraph_nodes=100, subgraph_edges=99), "subgraph_edges"),
        (dict(fanouts=()), "fanouts"),
        (dict(fanouts=(5, -1)), "fanouts"),
    ],
)
def test_bad_engine_settings_name_the_field(overrides, field):
    with pytest.raises(config_lib.ConfigError, match=field):
        config_lib.Config.tiny(**overrides)


@pytest.mark.parametrize("backbone", ["gcn", "gcn-readout", "decoupled"])
def test_gcn_layers_take_a_jraph_graphs_tuple_padded_or_not(small_dataset, backbone):
    cfg = config_lib.Config.tiny(backbone=backbone, min_depth=1 if backbone != "decoupled" else 0)
    g = graph.from_dataset(small_dataset)
    bb = backbones.for_policy(cfg, g)
    params = bb.init(jax.random.key(0), g)
    want = np.asarray(bb.logits(params, g, None))  # [D, N, C] on the device graph
    tuple_graph = small_dataset.to_jraph()
    got = np.asarray(bb.logits(params, tuple_graph, None))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # Padded by jraph: the real nodes' logits are unchanged, whatever the padding holds.
    n = small_dataset.num_nodes
    padded = jraph.pad_with_graphs(tuple_graph, n_node=n + 7, n_edge=small_dataset.num_edges + 9)
    got = np.asarray(jax.jit(bb.logits)(params, padded, None))[:, :n]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
