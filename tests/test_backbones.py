"""Choosing a backbone: the paper's GCN by default, the old readout structure and the decoupled
one by name, depth 0 where it exists, and every method running through each."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest

import policy_gnn_jax as pg
from policy_gnn_jax import backbones
from policy_gnn_jax import config as config_lib
from policy_gnn_jax.mdp import env


def test_default_backbone_is_the_paper_structure(small_graph):
    cfg = pg.Config.tiny()
    assert cfg.backbone == "gcn"
    b = backbones.for_policy(cfg, small_graph)
    params = b.init(jax.random.key(0), small_graph)
    # min depth 1 in the tiny preset: W_0 (depth 1), W_1, W_2 (K = 3), the output layer.
    assert set(params["params"]) == {"w_0", "w_1", "w_2", "w_out"}
    assert (b.min_depth, b.max_depth) == (1, 3)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"min_depth": 0}, "Depth 0 exists only in the decoupled backbone"),
        ({"depth": 0}, "depth must be in 1..10 for the gcn backbone"),
        ({"max_depth": 16}, "above the 10 the gcn backbone supports"),
        ({"backbone": "gat"}, "backbone must be one of"),
        ({"backbone": "decoupled", "max_depth": 65}, "above the 64 the decoupled backbone"),
        ({"backbone": "decoupled", "teleport": -0.1}, "teleport must be in [0, 1)"),
    ],
)
def test_config_refuses_depths_a_backbone_lacks(overrides, message):
    with pytest.raises(
        config_lib.ConfigError, match=message.replace("[", r"\[").replace(")", r"\)")
    ):
        pg.Config(**overrides)


def test_decoupled_preset_has_depth_zero_and_sixteen():
    cfg = pg.Config.decoupled()
    assert (cfg.backbone, cfg.min_depth, cfg.max_depth) == ("decoupled", 0, 16)


def test_walk_of_depth_zero_stays_put(small_graph, key):
    nodes = jnp.arange(50)
    got = env.walk_transition(
        key, nodes, jnp.zeros(50, jnp.int32), small_graph.nbr_indptr, small_graph.nbr_indices, 3
    )
    np.testing.assert_array_equal(got, nodes)


@pytest.fixture(scope="module")
def decoupled_fits(small_dataset):
    """Every method through the decoupled backbone with depths 0..4 (tiny sizes). The walk
    transition at depth 0 is tested alone (test_walk_of_depth_zero_stays_put)."""
    cfg = pg.Config.tiny(
        backbone="decoupled", min_depth=0, max_depth=4, depth=3, hidden=8, num_episodes=2
    )
    return {
        method: pg.fit(small_dataset, cfg, method=method, seeds=2, progress=False)
        for method in ("policy-gnn", "random", "gcn")
    }


def test_every_method_runs_on_the_decoupled_backbone(decoupled_fits, small_dataset):
    for method, fit in decoupled_fits.items():
        acc = fit.record["test_metric"]["per_seed"]
        assert len(acc) == 2 and all(0.0 <= a <= 1.0 for a in acc), method
        assert fit.record["config"]["backbone"] == "decoupled"
        # Predictions on the test nodes reproduce the honest evaluation exactly.
        pred = fit.predict(small_dataset.test_index)
        labels = small_dataset.labels[small_dataset.test_index]
        np.testing.assert_allclose((pred == labels).mean(1), acc, atol=1e-6)
    depths = decoupled_fits["random"].predict_depths(small_dataset.test_index)
    assert depths.min() == 0 and depths.max() == 4  # depth 0 is drawn and usable


def test_cli_backbone_flags_reach_the_config():
    from policy_gnn_jax import cli

    args = cli.build_parser().parse_args(["--backbone", "decoupled", "--teleport", "0.2"])
    cfg = cli.config_from_args(args)
    assert (cfg.backbone, cfg.teleport, cfg.min_depth, cfg.max_depth, cfg.hidden) == (
        "decoupled",
        0.2,
        0,
        16,
        pg.Config.decoupled().hidden,
    )
    default = cli.config_from_args(cli.build_parser().parse_args([]))
    assert default == pg.Config.paper()
