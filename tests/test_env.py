"""The MDP transitions: `labelled` lands on training nodes within a hops, `walk` walks exactly a."""

import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from policy_gnn_jax import data, graph
from policy_gnn_jax.mdp import env


def _hops_all(ds):
    n = ds.num_nodes
    adj = sp.csr_matrix((np.ones(ds.num_edges), (ds.edges[0], ds.edges[1])), shape=(n, n))
    return csgraph.shortest_path(adj, unweighted=True)


def test_train_hop_distances_match_bfs(small_dataset):
    hops = graph.train_hop_distances(small_dataset, max_hops=3)
    full = _hops_all(small_dataset)[np.ix_(small_dataset.train_index, small_dataset.train_index)]
    np.testing.assert_array_equal(hops, np.where(full <= 3, full, 4))


def test_labelled_transition_lands_within_a_hops(small_dataset, small_graph, key):
    ds, g = small_dataset, small_graph
    hops = graph.train_hop_distances(ds, 3)
    t = len(ds.train_index)
    train_pos = jnp.full(ds.num_nodes, -1, jnp.int32).at[g.train_index].set(jnp.arange(t))
    full = _hops_all(ds)
    nodes = jnp.tile(g.train_index, 20)
    for depth in (1, 2, 3):
        depths = jnp.full(nodes.shape, depth)
        nxt = np.asarray(
            env.labelled_transition(key, nodes, depths, g.train_index, train_pos, jnp.asarray(hops))
        )
        assert np.isin(nxt, ds.train_index).all()
        src = np.asarray(nodes)
        has_other = np.array([((hops[i] <= depth).sum() - 1) > 0 for i in range(t)])[
            np.searchsorted(ds.train_index, src)
        ]
        d = full[src, nxt]
        assert np.all(d[has_other] <= depth) and np.all(nxt[has_other] != src[has_other])


def test_labelled_transition_fallback_is_any_training_node(key):
    # Two training nodes in different components: no other within reach, so uniform fallback.
    train_index = jnp.array([0, 1])
    hops = jnp.array([[0, 9], [9, 0]])
    train_pos = jnp.array([0, 1, -1])
    nxt = env.labelled_transition(
        key, jnp.zeros(2000, jnp.int32), jnp.full(2000, 2), train_index, train_pos, hops
    )
    np.testing.assert_allclose(np.mean(np.asarray(nxt) == 1), 0.5, atol=0.05)


def test_walk_transition_walks_exactly_a_steps(key):
    # A cycle of 101 nodes: a walk of a steps ends at distance d <= a with d = a (mod 2).
    n = 101
    s = np.arange(n)
    ds = data.Dataset(
        "cycle",
        sp.csr_matrix(np.eye(n, dtype=np.float32)),
        np.zeros(n, np.int32),
        data.symmetric_edges(s, (s + 1) % n, n),
        s[:1],
        s[1:2],
        s[2:3],
        2,
    )
    g = graph.from_dataset(ds)
    start = jnp.zeros(3000, jnp.int32)
    for depth in (1, 2, 3, 5):
        end = np.asarray(
            env.walk_transition(key, start, jnp.full(3000, depth), g.nbr_indptr, g.nbr_indices, 5)
        )
        dist = np.minimum(end, n - end)
        assert np.all(dist <= depth) and np.all((depth - dist) % 2 == 0)
        assert dist.max() == depth  # the walk can reach the far end


def test_walk_transition_follows_edges(small_dataset, small_graph, key):
    start = jnp.asarray(np.repeat(small_dataset.train_index, 50))
    end = np.asarray(
        env.walk_transition(
            key, start, jnp.ones_like(start), small_graph.nbr_indptr, small_graph.nbr_indices, 3
        )
    )
    edges = set(zip(small_dataset.edges[0].tolist(), small_dataset.edges[1].tolist()))
    assert all((int(a), int(b)) in edges for a, b in zip(np.asarray(start), end))


def test_the_cached_validation_logits_are_those_of_the_current_parameters(
    small_dataset, small_graph, key
):
    """M_t is read from logits cached in the state and refreshed only when the backbone
    trains: after every step, trained or not, they must equal a fresh forward of the
    parameters (a cache left stale after training, or refreshed from the old parameters,
    fails here), and the steps must include both kinds."""
    import jax

    from policy_gnn_jax import backbones, config
    from policy_gnn_jax.mdp import policy_gnn

    cfg = config.Config.tiny(buffer_size=64)
    hops = graph.train_hop_distances(small_dataset, cfg.max_depth)
    backbone = backbones.gcn_backbone(cfg, small_graph)
    ctx = policy_gnn.env_context(cfg, small_graph, backbone, subgraphs=False)
    data = policy_gnn.mdp_data(small_graph, hops)
    state = policy_gnn.init_env(ctx, data, key)
    step = jax.jit(lambda data, k, s, a, d: env.step(ctx, data, k, s, a, d))
    val_depths = jnp.full(small_graph.val_index.shape, cfg.min_depth)
    trained = []
    for i in range(12):
        actions = jax.random.randint(jax.random.fold_in(key, i), state.nodes.shape, 0, 2)
        before = state.params
        state, out = step(data, jax.random.fold_in(key, 100 + i), state, actions, val_depths)
        fresh = ctx.engine.validation_logits(ctx, data, state.params, None)
        np.testing.assert_array_equal(np.asarray(state.val_logits), np.asarray(fresh))
        changed = any(
            not np.array_equal(a, b)
            for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(state.params))
        )
        assert changed == bool(out.gcn_trained)
        trained.append(bool(out.gcn_trained))
    assert any(trained) and not all(trained)
