"""Findings of the eighth adversarial pass (the Python API's arguments, Policy-GNN+ under ROC
AUC, generated graphs' records, jraph inputs, checkpoints across devices): each a test that
failed before its fix."""

import dataclasses
import json

import jax
import jraph
import numpy as np
import pytest

import policy_gnn_jax as pg
from policy_gnn_jax import cli
from policy_gnn_jax.contrib.adaptive_depth import plus


@pytest.fixture(scope="module")
def csbm():
    return pg.load_dataset("csbm", num_nodes=1600)


def test_numpy_integer_seeds_are_taken_as_integers(csbm):
    """Before: the run trained to the end, then failed to write its record (np.int64 is not
    JSON), and no Fit came back."""
    fit = pg.fit(csbm, pg.Config.tiny(epochs=2), method="gcn", seeds=np.int64(1),
                 seed=np.int64(5), progress=False)  # fmt: skip
    assert (fit.record["seed"], fit.record["seeds"]) == (5, 1)
    json.dumps(fit.record)
    with pytest.raises(pg.ConfigError, match="seed must be a whole number"):
        pg.fit(csbm, pg.Config.tiny(epochs=2), method="gcn", seeds=1, seed=True, progress=False)


def test_the_selection_half_holds_both_classes_under_roc_auc():
    """Before: Policy-GNN+ split the validation nodes at random; a half of one class scored
    0.5 at every epoch and the first snapshot was kept."""
    labels = jax.numpy.array([0] * 18 + [1] * 2)
    for seed in range(20):
        order = jax.random.permutation(jax.random.key(seed), 20)
        arranged = np.asarray(plus.stratified(order, labels, 2))
        assert sorted(arranged.tolist()) == list(range(20))
        for cut in (8, 10, 12):  # each half keeps a positive (its expected share is >= 0.8)
            assert labels[arranged[:cut]].sum() >= 1 and labels[arranged[cut:]].sum() >= 1


def test_a_generated_graphs_record_says_how_to_make_it_again(tmp_path):
    argv = [
        "--dataset",
        "csbm",
        "--csbm-nodes",
        "1600",
        "--csbm-homophily",
        "0.3",
        "--seeds",
        "1",
        "--method",
        "gcn",
        "--epochs",
        "2",
        "--no-progress",
        "--out",
        str(tmp_path / "o"),
    ]
    assert cli.main(argv) == 0
    record = json.loads((tmp_path / "o" / "results.json").read_text())
    assert record["generator"]["homophily"] == 0.3 and record["generator"]["num_nodes"] == 1600
    assert pg.load(tmp_path / "o").record["generator"] == record["generator"]


def _graph(**changes):
    x = np.eye(4, dtype=np.float32)
    fields = dict(nodes=x, edges=None, senders=np.array([0, 1, 2]), receivers=np.array([1, 2, 3]),
                  n_node=np.array([4]), n_edge=np.array([3]), globals=None)  # fmt: skip
    return jraph.GraphsTuple(**{**fields, **changes})


@pytest.mark.parametrize(
    "graph, message",
    [
        (_graph(n_edge=np.array([5])), "n_edge says"),
        (_graph(n_node=np.array([4.0])), "n_node must hold whole numbers"),
        ((1, 2), "must be a jraph.GraphsTuple"),
        (None, "must be a jraph.GraphsTuple"),
        (_graph(n_node=None), "must be a jraph.GraphsTuple"),
    ],
)
def test_a_bad_graphs_tuple_is_named(graph, message):
    with pytest.raises(pg.InvalidDatasetError, match=message):
        pg.from_jraph(graph, np.array([0, 1, 0, 1]), [0], [1], [2, 3])


@pytest.mark.parametrize(
    "name, kwargs, message",
    [
        ("cora", dict(num_nodes=5), "cora takes no num_nodes"),
        ("cora", dict(split=3), "cora takes no split"),
        (None, {}, "must be text or a path"),
    ],
)
def test_load_dataset_refuses_what_it_would_ignore(name, kwargs, message):
    with pytest.raises(pg.DataError, match=message):
        pg.load_dataset(name, **kwargs)


def test_the_decoupled_preset_reads_a_dataset_name_as_the_command_does():
    assert pg.Config.decoupled("Cora ") == pg.Config.decoupled("cora")
    with pytest.raises(pg.ConfigError, match="dataset must be a dataset's name"):
        pg.Config.decoupled(dataset=123)


def test_load_checks_a_custom_part_passed_for_a_built_in_one(csbm, tmp_path):
    fit = pg.fit(csbm, pg.Config.tiny(epochs=2), method="gcn", seeds=1, progress=False)
    fit.save(tmp_path / "f")
    with pytest.raises(pg.ConfigError, match="backbone must be a policy_gnn_jax.Backbone"):
        pg.load(tmp_path / "f", backbone="gcn")
    with pytest.raises(pg.CheckpointError, match="trained with the built-in backbone"):
        pg.load(tmp_path / "f", backbone=pg.gcn_backbone(pg.Config.tiny(), _device_graph(csbm)))


def _device_graph(ds):
    from policy_gnn_jax import graph

    return graph.from_dataset(ds)


def test_a_checkpoint_of_other_devices_is_not_called_damaged(tmp_path):
    from policy_gnn_jax.runtime import checkpoint

    ck = checkpoint.Checkpointer.__new__(checkpoint.Checkpointer)
    ck.directory = tmp_path
    err = ck._corrupt(3, ValueError("Topology mismatch: saved 4 devices, now 1"))
    assert "another set of devices" in str(err) and "Delete" not in str(err)


def test_study_options_override_takes_one(tmp_path):
    import subprocess
    import sys

    from conftest import ROOT

    done = subprocess.run(
        [sys.executable, "experiments/heterophily.py", "study", "--datasets", "texas",
         "--options", "plain", "ego", "--out", str(tmp_path)], cwd=ROOT, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2 and "takes one combination" in done.stderr, done.stderr
    assert dataclasses.is_dataclass(pg.Config())
