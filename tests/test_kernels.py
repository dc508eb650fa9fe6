"""The gather-only ("gather", deterministic on GPU) kernels equal the segment-sum ("scatter")
kernels to float tolerance: products, the GCN's logits and gradients, the buffer loss, and a run.

Bit-identity of two GPU processes can only be checked on a GPU (experiments/gpu_check.py);
these tests pin what a CPU can: the same numbers."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

import policy_gnn_jax as pg
from policy_gnn_jax import backbones, graph
from policy_gnn_jax.graph import gather_matmul
from policy_gnn_jax.mdp import env, policy_gnn
from policy_gnn_jax.runtime import runner, seed_axis


def test_gather_products_equal_scipy():
    rng = np.random.default_rng(0)
    m = sp.random(60, 25, density=0.15, format="csr", random_state=rng, dtype=np.float32)
    m = sp.csr_matrix(m.toarray() * (np.arange(60) != 7)[:, None])  # an empty row
    m.sort_indices()
    h = rng.normal(size=(25, 3)).astype(np.float32)
    got = gather_matmul.matmul(gather_matmul.build(m.indptr, m.indices), jnp.asarray(m.data), h)
    np.testing.assert_allclose(got, m @ h, rtol=1e-5, atol=1e-6)
    t = gather_matmul.transpose_csr(m.indptr, m.indices, 25)
    g = rng.normal(size=(60, 3)).astype(np.float32)
    got_t = gather_matmul.matmul(gather_matmul.build(*t), jnp.asarray(m.data), g)
    np.testing.assert_allclose(got_t, m.T @ g, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module", params=["small", "cora"])
def both_kernels(request, small_dataset):
    ds = request.getfixturevalue("cora") if request.param == "cora" else small_dataset
    return ds, graph.from_dataset(ds, "scatter"), graph.from_dataset(ds, "gather")


def test_gcn_logits_and_gradients_match(both_kernels, key):
    _, g_s, g_g = both_kernels
    assert g_g.deterministic and not g_s.deterministic
    cfg = pg.Config.tiny(max_depth=4)
    b_s, b_g = backbones.gcn_backbone(cfg, g_s), backbones.gcn_backbone(cfg, g_g)
    params = b_s.init(key, g_s)
    np.testing.assert_allclose(b_g.logits(params, g_g, None), b_s.logits(params, g_s, None),
                               rtol=1e-4, atol=1e-5)  # fmt: skip
    nodes = g_s.train_index
    depths = jnp.full(nodes.shape, 3)
    k = jax.random.fold_in(key, 1)  # same dropout bits in both: the mask is drawn per non-zero
    grads = [jax.grad(lambda p, b=b, g=g: jnp.mean(b.loss(p, g, k, nodes, depths)))(params)
             for b, g in ((b_s, g_s), (b_g, g_g))]  # fmt: skip
    chex.assert_trees_all_close(grads[1], grads[0], rtol=1e-4, atol=1e-6)


def test_buffer_loss_by_counts_equals_per_entry(both_kernels, key):
    ds, g_s, g_g = both_kernels
    cfg = pg.Config.tiny(buffer_size=4)
    hops = graph.train_hop_distances(ds, cfg.max_depth)
    ctx_s = policy_gnn.env_context(cfg, g_s, backbones.gcn_backbone(cfg, g_s), subgraphs=False)
    ctx_g = policy_gnn.env_context(cfg, g_g, backbones.gcn_backbone(cfg, g_g), subgraphs=False)
    data_s, data_g = policy_gnn.mdp_data(g_s, hops), policy_gnn.mdp_data(g_g, hops)
    # Buffers with repeated nodes (the case the counts exist for), two of them full.
    buffers = env.init_buffers(cfg.num_actions, 12)
    nodes = jnp.concatenate([g_s.train_index[:6], g_s.train_index[:3]])
    actions = jnp.array([0, 0, 1, 0, 1, 2, 0, 1, 1])
    buffers = env.add_to_buffers(buffers, nodes, actions, jnp.ones(9, bool))
    params = ctx_s.backbone.init(key, g_s)
    k = jax.random.fold_in(key, 2)
    losses = [jax.value_and_grad(env.buffer_loss, argnums=1)(c, params, d, k, buffers)
              for c, d in ((ctx_s, data_s), (ctx_g, data_g))]  # fmt: skip
    np.testing.assert_allclose(losses[1][0], losses[0][0], rtol=1e-5)
    assert losses[0][0] > 0
    chex.assert_trees_all_close(losses[1][1], losses[0][1], rtol=1e-4, atol=1e-6)


def test_a_run_on_gather_kernels_is_close_to_scatter_and_reproducible(small_dataset):
    cfg = pg.Config.tiny(num_episodes=2)
    hops = graph.train_hop_distances(small_dataset, cfg.max_depth)
    runs = {}
    for kernels in ("scatter", "gather", "gather"):
        g = graph.from_dataset(small_dataset, kernels)
        agent = policy_gnn.make_agent(cfg, g)
        trainer = policy_gnn.make_trainer(cfg, g, hops, agent=agent)
        _, metrics, _ = runner.run_trainer(trainer, seed_axis.seed_keys(0, 2), progress=False)
        runs.setdefault(kernels, []).append(metrics)
    chex.assert_trees_all_equal(runs["gather"][0], runs["gather"][1])  # same bits on CPU
    # Different rounding can flip a greedy choice, so only the first episode is compared.
    np.testing.assert_allclose(runs["gather"][0]["val_metric"][:, 0],
                               runs["scatter"][0]["val_metric"][:, 0], atol=0.05)  # fmt: skip


def test_records_say_which_kernels_ran(small_dataset):
    fit = pg.fit(small_dataset, pg.Config.tiny(num_episodes=1), seeds=1, progress=False)
    assert fit.record["kernels"] == "scatter"
    # On a CPU either kernel gives the same bits in every process (tests/test_exactness.py).
    assert fit.record["bit_identical_across_processes"] is True


def test_unknown_kernels_are_refused(small_dataset):
    with pytest.raises(ValueError, match="kernels must be one of"):
        graph.from_dataset(small_dataset, "fast")


@pytest.mark.parametrize("kernels", ["scatter", "gather"])
def test_building_the_device_graph_leaves_the_dataset_untouched(cora, kernels):
    """A Dataset's feature matrix has unsorted indices (Planetoid's do); building a Graph must
    not sort it in place, or its fingerprint (checkpoints, saved fits) would change under it."""
    before = (cora.fingerprint(), cora.features.indices.copy(), cora.features.data.copy())
    graph.from_dataset(cora, kernels)
    assert cora.fingerprint() == before[0]
    np.testing.assert_array_equal(cora.features.indices, before[1])
    np.testing.assert_array_equal(cora.features.data, before[2])
