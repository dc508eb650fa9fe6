"""What the eighth adversarial pass left open (resumed runs' records, refused checkpoints,
custom agents of another depth range, generators' arguments, features' rows and dtypes,
`--devices 0`): each a test that failed before its fix."""

import dataclasses
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

import policy_gnn_jax as pg
from policy_gnn_jax.data.generators import make_csbm, make_planted_depth


def _arrays(num_rows=10):
    features = np.random.default_rng(0).random((num_rows, 4)).astype(np.float32)
    labels = np.arange(10) % 2
    edges = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    return features, edges, labels


SPLITS = dict(train_index=[0, 1], val_index=[2, 3], test_index=[4, 5])


@pytest.fixture(scope="module")
def checkpointed(small_dataset, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt")
    config = pg.Config.tiny(num_episodes=4, episodes_per_call=2)
    fit = pg.fit(small_dataset, config, seeds=2, progress=False, checkpoint_dir=folder,
                 checkpoint_every=1)  # fmt: skip
    return folder, config, fit


def test_a_resumed_run_says_so_and_counts_the_earlier_time(checkpointed, small_dataset):
    """Before: the record of a resumed run looked like a fresh one, and its wall_time_s counted
    only the last process."""
    folder, config, first = checkpointed
    assert first.record["resumed"] is None
    again = pg.fit(small_dataset, config, seeds=2, progress=False, checkpoint_dir=folder)
    resumed = again.record["resumed"]
    assert resumed["units_done_before"] == 4
    assert 0 < resumed["wall_time_s_before"] <= first.record["wall_time_s"] + 1.0
    total = resumed["wall_time_s_before"] + again.record["wall_time_s"]
    assert resumed["wall_time_s_total"] == pytest.approx(total)


def test_a_refused_checkpoint_names_what_changed(checkpointed, small_dataset):
    """Before: "a different run (another dataset, config, method, ...)", whichever it was."""
    folder, config, _ = checkpointed
    with pytest.raises(pg.CheckpointError, match=r"seeds: 2 there, 3 here"):
        pg.fit(small_dataset, config, seeds=3, progress=False, checkpoint_dir=folder)
    other = dataclasses.replace(config, hidden=config.hidden + 1)
    with pytest.raises(pg.CheckpointError, match=rf"hidden: {config.hidden} there"):
        pg.fit(small_dataset, other, seeds=2, progress=False, checkpoint_dir=folder)


def test_an_agent_of_another_depth_range_is_refused(small_dataset, tmp_path):
    """Before: fit and load took an agent with 2 actions for depths 1..3; its depths were then
    not the config's."""
    config = pg.Config.tiny(num_episodes=2, episodes_per_call=2)
    assert (config.min_depth, config.max_depth) == (1, 3)
    with pytest.raises(pg.ConfigError, match="2 actions.*depths 1..3 need 3"):
        pg.fit(small_dataset, config, method="random", agent=pg.random_agent(1, 2), seeds=1,
               progress=False)  # fmt: skip
    fit = pg.fit(small_dataset, config, method="random", agent=pg.random_agent(1, 3), seeds=1,
                 progress=False)  # fmt: skip
    fit.save(tmp_path / "fit")
    with pytest.raises(pg.ConfigError, match="2 actions"):
        pg.load(tmp_path / "fit", agent=pg.random_agent(1, 2))


@pytest.mark.parametrize(
    "make, kwargs, named",
    [
        (make_csbm, dict(num_nodes=2000.5), "num_nodes"),
        (make_csbm, dict(num_nodes="2000"), "num_nodes"),
        (make_csbm, dict(seed=-1), "seed"),
        (make_csbm, dict(seed=1.5), "seed"),
        (make_csbm, dict(num_features=3.0), "num_features"),
        (make_csbm, dict(num_val=-5), "num_val"),
        (make_csbm, dict(num_train_per_class=-1), "num_train_per_class"),
        (make_csbm, dict(num_classes=True), "num_classes"),
        (make_csbm, dict(feature_signal=float("inf")), "feature_signal"),
        (make_csbm, dict(num_nodes=2**40), "num_nodes"),
        (make_planted_depth, dict(num_classes=1), "num_classes"),
        (make_planted_depth, dict(hub_size=-1), "hub_size"),
        (make_planted_depth, dict(seed=-2), "seed"),
        (make_planted_depth, dict(noise=float("nan")), "noise"),
        (make_planted_depth, dict(num_units=2.5), "num_units"),
        (make_planted_depth, dict(num_units=0), "num_units"),
        (make_planted_depth, dict(num_train=10**6), "num_train"),
    ],
)
def test_a_generators_bad_argument_is_named(make, kwargs, named):
    """Before: numpy's own errors ("expected non-negative integer", "low >= high", an
    IndexError), or a split error that named no argument."""
    with pytest.raises(pg.InvalidDatasetError, match=rf"^{make.__name__.split('_')[1]}.*{named}"):
        make(**kwargs)


def test_features_with_fewer_rows_than_labels_name_both_counts():
    """Before: "labels must be integers of shape (8,)", as if the labels were wrong."""
    features, edges, labels = _arrays()
    with pytest.raises(pg.InvalidDatasetError, match="features have 8 rows but labels has 10"):
        pg.from_arrays(features[:8], edges, labels, **SPLITS)


def test_bfloat16_features_are_taken():
    """Before: bfloat16 (numpy has no such type; JAX's ml_dtypes does) was "not numeric"."""
    features, edges, labels = _arrays()
    half = jnp.asarray(features, dtype=jnp.bfloat16)
    ds = pg.from_arrays(half, edges, labels, **SPLITS)
    want = np.asarray(half.astype(jnp.float32))
    np.testing.assert_array_equal(ds.features.toarray(), want)


def test_devices_zero_names_the_flag(tmp_path):
    """Before: "devices must be None or a whole number >= 1": None is not a flag's value."""
    done = subprocess.run(
        [sys.executable, "-m", "policy_gnn_jax.cli", "--dataset", "csbm", "--devices", "0",
         "--out", str(tmp_path / "o")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == "error: --devices must be >= 1, got 0."
    assert not (tmp_path / "o").exists()
