"""Findings of the ninth adversarial pass (custom agents' outputs, generators' arguments, a saved
fit's special files, file datasets named like built-in ones, the audit under ROC AUC, odd
arguments to from_arrays and from_jraph): each a test that failed before its fix."""

import dataclasses
import json
import os

import jax.numpy as jnp
import jraph
import numpy as np
import pytest
import scipy.sparse as sp
from test_heterophily import HETEROPHILY_DIR, _need

import policy_gnn_jax as pg
from policy_gnn_jax.data import heterophily

CONFIG = pg.Config.tiny(num_episodes=2, episodes_per_call=2)


def _path_graph(n=60):
    features = np.eye(n, 8, dtype=np.float32)
    edges = np.stack([np.arange(n - 1), np.arange(1, n)])
    labels = np.arange(n) % 2
    splits = dict(train_index=np.arange(0, 20), val_index=np.arange(20, 40),
                  test_index=np.arange(40, 60))  # fmt: skip
    return features, edges, labels, splits


@pytest.fixture(scope="module")
def path_graph():
    features, edges, labels, splits = _path_graph()
    return pg.from_arrays(features, edges, labels, **splits, symmetrise=True)


def test_symmetrise_must_be_a_bool():
    """Before: symmetrise="False" was truthy, and the graph was symmetrised."""
    features, edges, labels, splits = _path_graph()
    with pytest.raises(pg.InvalidDatasetError, match="symmetrise must be True or False"):
        pg.from_arrays(features, edges, labels, **splits, symmetrise="False")


def test_a_sparse_adjacency_passed_as_edges_is_named():
    """Before: "edges must have shape [2, E], got ()"."""
    features, edges, labels, splits = _path_graph()
    adjacency = sp.coo_matrix((np.ones(edges.shape[1]), tuple(edges)), shape=(60, 60))
    with pytest.raises(pg.InvalidDatasetError, match="sparse 60x60 matrix.*nonzero"):
        pg.from_arrays(features, adjacency, labels, **splits)


def test_a_graphs_tuple_without_nodes_says_so():
    """Before: "n_node says 60 nodes, but nodes has 0 rows"."""
    features, edges, labels, splits = _path_graph()
    g = jraph.GraphsTuple(nodes=None, edges=None, senders=edges[0], receivers=edges[1],
                          globals=None, n_node=np.array([60]), n_edge=np.array([59]))  # fmt: skip
    with pytest.raises(pg.InvalidDatasetError, match="graph.nodes is None"):
        pg.from_jraph(g, labels, **splits)


@pytest.mark.parametrize(
    "kwargs, named",
    [
        (dict(data_dir="/nonexistent"), "takes no data_dir"),
        (dict(num_train_per_class=0), "num_train_per_class"),
        (dict(num_nodes=1600, avg_degree=1e5), "avg_degree"),  # before: a complete graph
        (dict(num_nodes=1600, avg_degree=1e9), "avg_degree"),  # before: numpy's MemoryError
    ],
)
def test_a_generated_graphs_ignored_or_impossible_argument_is_refused(kwargs, named):
    with pytest.raises((pg.InvalidDatasetError, pg.DataError), match=named):
        pg.load_dataset("csbm", **kwargs)


def _agent(**changes):
    return pg.random_agent(1, 3)._replace(**changes)


@pytest.mark.parametrize(
    "agent, message",
    [
        (_agent(num_actions=3.0), "num_actions must be an int"),
        (
            _agent(depths=lambda k, p, nodes: jnp.full(nodes.shape, 2.0)),
            r"depths\(\) returned float",
        ),
        (
            _agent(act=lambda k, s, nodes, step: (s, (), jnp.zeros(4, jnp.int32))),
            r"act\(\) returned",
        ),
    ],
)
def test_an_agent_of_the_wrong_types_is_refused_before_training(path_graph, agent, message):
    """Before: a TypeError from inside Python or JAX, after compiling."""
    with pytest.raises(pg.ConfigError, match=message):
        pg.fit(path_graph, CONFIG, method="random", agent=agent, seeds=1, progress=False)


@pytest.mark.parametrize(
    "agent, message",
    [
        (_agent(depths=lambda k, p, nodes: jnp.full(nodes.shape, 7, jnp.int32)), "returned 7"),
        (_agent(depths=lambda k, p, nodes: jnp.full(nodes.shape, -5, jnp.int32)), "returned -5"),
        (
            _agent(act=lambda k, s, nodes, step: (s, (), jnp.full(nodes.shape, 9, jnp.int32))),
            r"act\(\) returned actions outside 0..2",
        ),
    ],
)
def test_an_agent_choosing_outside_the_range_is_refused(path_graph, agent, message):
    """Before: accepted; depth 7 recorded, the accuracy computed at a clamped depth, or (an
    action of 9) a backbone that never trained."""
    with pytest.raises(pg.ConfigError, match=message):
        pg.fit(path_graph, CONFIG, method="random", agent=agent, seeds=1, progress=False)


def test_a_saved_fit_file_that_is_a_device_is_refused(path_graph, tmp_path):
    """Before: a snapshots.npz linked to /dev/zero was read until the process was killed."""
    fit = pg.fit(path_graph, CONFIG, method="gcn", seeds=1, progress=False)
    fit.save(tmp_path / "fit")
    os.remove(tmp_path / "fit" / "snapshots.npz")
    os.symlink("/dev/zero", tmp_path / "fit" / "snapshots.npz")
    with pytest.raises(pg.CheckpointError, match="snapshots.npz is not a regular file"):
        pg.load(tmp_path / "fit")


def test_a_file_named_like_a_built_in_dataset_keeps_its_file_name(tmp_path):
    """Before: a texas copy saved as cora.npz was recorded as dataset "cora"."""
    _need("texas.npz")
    source = heterophily.resolve_file("texas", str(HETEROPHILY_DIR), False)
    copy = tmp_path / "cora.npz"
    copy.write_bytes(pathlib_bytes(source))
    assert pg.load_dataset(str(copy)).name == "cora.npz"
    other = tmp_path / "mygraph.npz"
    other.write_bytes(pathlib_bytes(source))
    assert pg.load_dataset(str(other)).name == "mygraph"


def pathlib_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def test_the_audit_is_refused_under_roc_auc(path_graph):
    """Before: audit.honest_test_accuracy held the ROC AUC beside an accuracy."""
    two_class = dataclasses.replace(path_graph, metric="roc_auc")
    with pytest.raises(pg.ConfigError, match="audit reproduces the released code's accuracy"):
        pg.fit(two_class, dataclasses.replace(CONFIG, audit=True), seeds=1, progress=False)


# The command line: sweeps over splits, folders, a flag the method ignores.
HETEROPHILY = str(HETEROPHILY_DIR)
TEXAS = ["--dataset", "texas", "--data-dir", HETEROPHILY, "--method", "gcn", "--seeds", "1",
         "--no-progress"]  # fmt: skip


def _last_error(capsys) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_an_interrupted_overwrite_of_a_sweep_leaves_no_stale_summary(tmp_path, monkeypatch):
    """Before: stopped after its first split, an --overwrite sweep left the old results.json
    beside a split-0 that held the new run. (Splits run apart: a sweep run as one program saves
    its splits only once all have trained.)"""
    from policy_gnn_jax import api, cli

    out = str(tmp_path / "sw")
    assert cli.main([*TEXAS, "--epochs", "2", "--splits", "0-1", "--out", out]) == 0
    real_fit, calls = api.fit, []

    def stopped_on_the_second_split(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(api, "fit", stopped_on_the_second_split)
    again = [*TEXAS, "--epochs", "3", "--splits", "0-1", "--out", out, "--overwrite",
             "--split-map", "apart"]  # fmt: skip
    assert cli.main(again) == 130
    assert not (tmp_path / "sw" / "results.json").exists()
    split0 = json.loads((tmp_path / "sw" / "split-0" / "results.json").read_text())
    assert split0["config"]["epochs"] == 3


def test_a_damaged_split_says_what_to_do_and_overwrite_trains_it_again(tmp_path, capsys):
    """Before: "... Save the fit again.", which a command-line user cannot do, with or
    without --overwrite."""
    from policy_gnn_jax import cli

    out = tmp_path / "sw"
    assert cli.main([*TEXAS, "--epochs", "2", "--splits", "0-1", "--out", str(out)]) == 0
    (out / "results.json").unlink()
    with open(out / "split-1" / "snapshots.npz", "ab") as f:
        f.write(b"x")
    assert cli.main([*TEXAS, "--epochs", "2", "--splits", "0-1", "--out", str(out)]) == 2
    last = _last_error(capsys)
    assert f"Delete {out / 'split-1'}, or pass --overwrite" in last
    argv = [*TEXAS, "--epochs", "2", "--splits", "0-1", "--out", str(out), "--overwrite"]
    assert cli.main(argv) == 0
    summary = json.loads((out / "results.json").read_text())
    assert summary["reused_splits"] == [0]


def test_a_reversed_split_range_says_so():
    from policy_gnn_jax.cli import splits

    with pytest.raises(pg.ConfigError, match="A-B needs A <= B"):
        splits.parse_splits("9-7", 10)


def test_folders_that_cannot_be_folders_are_named(tmp_path, capsys):
    """Before: "(File exists)" for a checkpoint folder that is a file, and for an --out that is
    a link to nothing."""
    from policy_gnn_jax import cli

    (tmp_path / "afile").write_text("x")
    argv = [*TEXAS, "--epochs", "2", "--out", str(tmp_path / "o1")]
    assert cli.main([*argv, "--checkpoint-dir", str(tmp_path / "afile")]) == 2
    assert "is an existing file, not a folder" in _last_error(capsys)
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    assert cli.main([*TEXAS, "--epochs", "2", "--out", str(tmp_path / "dangling")]) == 2
    last = _last_error(capsys)
    assert "is a link to" in last and "which does not exist" in last


def test_a_sweeps_checkpoint_folder_is_recognised(tmp_path, capsys):
    """Before: "holds files that are not a policy-gnn checkpoint (split-0, split-1)"."""
    from policy_gnn_jax import cli

    ckpt = tmp_path / "ck"
    (ckpt / "split-0").mkdir(parents=True)
    (ckpt / "split-1").mkdir()
    argv = [*TEXAS, "--epochs", "2", "--out", str(tmp_path / "o"), "--checkpoint-dir", str(ckpt)]
    assert cli.main(argv) == 2
    assert "a --splits sweep's checkpoints" in _last_error(capsys)


def test_a_flag_the_method_ignores_is_warned_about_and_not_applied(tmp_path, capsys):
    """Before: --depths 0-3 with --method gcn was warned about as unused, then refused."""
    from policy_gnn_jax import cli

    assert cli.main([*TEXAS, "--epochs", "2", "--depths", "0-3", "--out", str(tmp_path / "o")]) == 0
    assert "--depths is not used by --method gcn" in capsys.readouterr().err


def test_too_many_walkers_for_the_replay_buffer_name_both_fields(small_dataset):
    """Before: "adding 1000 transitions at once exceeds capacity 256"."""
    config = dataclasses.replace(CONFIG, num_walkers=1000)
    with pytest.raises(ValueError, match="replay_capacity.*num_walkers"):
        pg.fit(small_dataset, config, seeds=1, progress=False)


def test_xla_flags_xla_cannot_parse_are_one_error(tmp_path):
    """Before: XLA's fatal log line from C++ and exit status 1, with no error: line."""
    import subprocess
    import sys

    env = {**os.environ, "XLA_FLAGS": "--xla_no_such_flag_at_all=1"}
    done = subprocess.run(
        [sys.executable, "-m", "policy_gnn_jax.cli", "--dataset", "csbm", "--out",
         str(tmp_path / "o")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: XLA cannot start with XLA_FLAGS")
    assert not (tmp_path / "o").exists()
