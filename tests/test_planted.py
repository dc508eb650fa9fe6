"""On a graph where the best depth of each node is planted, the learned policy must beat the
random policy."""

import numpy as np
import pytest

from policy_gnn_jax import config, data, graph
from policy_gnn_jax.mdp import policy_gnn
from policy_gnn_jax.runtime import runner, seed_axis


@pytest.fixture(scope="module")
def planted():
    ds = data.make_planted_depth(num_units=300, num_train=60, num_val=100, seed=0)
    return ds, graph.from_dataset(ds), graph.train_hop_distances(ds, 5)


def _run(ds, g, hops, random_policy):
    cfg = config.Config.tiny(
        min_depth=1,
        max_depth=5,
        num_episodes=20,
        steps_per_episode=10,
        episodes_per_call=20,
        buffer_size=32,
        replay_capacity=2000,
        batch_size=64,
        target_period=100,
        normaliser_window=300,
        q_hidden=(32, 32),
        input_dropout=0.0,
        random_policy=random_policy,
    )
    t = policy_gnn.make_trainer(cfg, g, hops)
    _, _, results = runner.run_trainer(t, seed_axis.seed_keys(0, 2), progress=False)
    return results


def test_planted_generator_plants_what_it_says():
    ds = data.make_planted_depth(num_units=50, num_train=10, num_val=20, seed=1)
    deep = data.planted_deep_nodes(ds)
    targets = np.concatenate([ds.train_index, ds.val_index, ds.test_index])
    assert deep[targets].any() and (~deep[targets]).any()
    assert not deep[np.setdiff1d(np.arange(ds.num_nodes), targets)].any()


def test_trained_policy_beats_random_policy(planted):
    ds, g, hops = planted
    policy = _run(ds, g, hops, random_policy=False)
    random = _run(ds, g, hops, random_policy=True)
    assert policy["test_metric"].mean() > random["test_metric"].mean() + 0.1
    # Random depths agree with the planted ones 0.5 * 1/5 + 0.5 * 3/5 = 40 % of the time.
    agreement = data.planted_agreement(ds, random["test_depths"]).mean()
    np.testing.assert_allclose(agreement, 0.4, atol=0.08)
    # Not asserted: at this budget (200 MDP steps) the learned policy's agreement with the planted
    # depths is itself near chance (0.44 / 0.49 measured); it wins by being consistent, which lets
    # the shared GCN specialise. experiments/reproduce.py planted measures it over longer runs.
