"""Findings of the thirteenth adversarial pass (node ids given to predict, masked arrays, a
GraphsTuple's globals and padding, split ids without a fix): each a test that failed before
its fix."""

import jax.numpy as jnp
import jraph
import numpy as np
import pytest

import policy_gnn_jax as pg


@pytest.fixture(scope="module")
def fitted():
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    return pg.fit(ds, pg.Config.tiny(epochs=2), method="gcn", seeds=1, progress=False)


@pytest.mark.parametrize(
    "nodes, message",
    [
        ([-1], "nodes holds node id -1, outside 0..299"),
        ([1.0], "nodes must be a 1-D array of node ids, got float64"),
        (3, "nodes must be a 1-D array of node ids"),
        ([2**70], "nodes must be a 1-D array of node ids, got object"),
        (np.ma.array([1, 2], mask=[0, 1]), "nodes is a masked array"),
    ],
)
def test_bad_node_ids_to_predict_are_the_librarys_error_with_a_fix(fitted, nodes, message):
    """Before: a plain ValueError (not InvalidDatasetError), without a fix; a masked array's
    masked-out nodes were predicted too."""
    with pytest.raises(pg.InvalidDatasetError, match=message) as refused:
        fitted.predict(nodes)
    assert "Pass" in str(refused.value)


@pytest.mark.parametrize("name", ["train_index", "val_index"])
def test_split_ids_of_the_wrong_kind_say_what_to_pass(name):
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    splits = dict(train_index=ds.train_index, val_index=ds.val_index, test_index=ds.test_index)
    splits[name] = splits[name].astype(np.float64)
    with pytest.raises(pg.InvalidDatasetError, match=f"{name} must be .*Pass .* integer"):
        pg.from_arrays(ds.features, ds.edges, ds.labels, **splits)


def _graph(n=6, **kw):
    senders = jnp.arange(n - 1)
    receivers = jnp.arange(1, n)
    return jraph.GraphsTuple(nodes=jnp.eye(n, 4), edges=None, senders=senders,
                             receivers=receivers, n_node=jnp.array([n]),
                             n_edge=jnp.array([n - 1]), globals=None, **kw)  # fmt: skip


def test_a_graphs_tuples_globals_are_said_to_be_unused():
    """Before: globals were dropped without a word (edge features are warned about)."""
    labels = np.arange(6) % 2
    g = _graph()._replace(globals=jnp.ones((1, 3)))
    with pytest.warns(UserWarning, match="globals"):
        pg.from_jraph(g, labels, train_index=[0, 1], val_index=[2, 3], test_index=[4, 5])


def test_a_padded_graphs_tuple_names_the_unpadding():
    """Before: the hint named jraph.unbatch, which does not remove padding."""
    padded = jraph.pad_with_graphs(_graph(), n_node=8, n_edge=8, n_graph=2)
    with pytest.raises(pg.InvalidDatasetError, match="unpad_with_graphs"):
        pg.from_jraph(padded, np.arange(8) % 2, train_index=[0, 1], val_index=[2, 3],
                      test_index=[4, 5])  # fmt: skip


def test_a_bad_value_in_xla_flags_is_quoted_as_xlas_own_complaint(tmp_path, monkeypatch):
    """Before: the error quoted the last line of XLA's flag help, not the parse error."""
    from policy_gnn_jax.cli import process

    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=abc")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # nothing cached
    with pytest.raises(pg.ResourceError, match="Couldn't interpret value abc for flag xla_force"):
        process.check_xla_flags()


def test_splits_over_several_processes_is_refused_before_waiting_for_them(capsys):
    """Before: process 1 waited for process 0 (300 s by default) before the same refusal."""
    import time

    from policy_gnn_jax import cli

    argv = ["--dataset", "texas", "--splits", "0-1", "--coordinator", "127.0.0.1:1",
            "--num-processes", "2", "--process-id", "1", "--seeds", "2"]  # fmt: skip
    started = time.monotonic()
    assert cli.main(argv) == 2
    assert time.monotonic() - started < 30
    assert "--splits runs in one process" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["0-99999999999999999999999", "0-1000000000000000000"])
def test_a_huge_split_range_names_the_splits_that_exist(text):
    """Before: an OverflowError traceback, or "out of host memory" (the list was built)."""
    from policy_gnn_jax.cli import splits

    with pytest.raises(pg.ConfigError, match="names split .*, but the dataset has splits 0..9"):
        splits.parse_splits(text, 10)


def test_a_result_inside_a_checkpoint_folder_is_refused(tmp_path, capsys):
    """Before: --out C/161 and Fit.save(C/1) were accepted, and the checkpointing run later
    replaced or deleted those step folders with the result in them."""
    from policy_gnn_jax import cli

    tiny = ["--dataset", "csbm", "--csbm-nodes", "1600", "--seeds", "1", "--episodes", "1",
            "--steps-per-episode", "2", "--buffer-size", "16", "--no-progress"]  # fmt: skip
    ckpt = tmp_path / "ck"
    assert cli.main([*tiny, "--checkpoint-dir", str(ckpt), "--out", str(tmp_path / "o")]) == 0
    step = next(p for p in ckpt.iterdir() if p.name.isdigit())
    for out in (ckpt / "161", step / "mine"):
        assert cli.main([*tiny, "--method", "gcn", "--epochs", "2", "--out", str(out)]) == 2
        assert "inside the checkpoint folder" in capsys.readouterr().err
        assert not out.exists()
    fitted = pg.load(tmp_path / "o")
    with pytest.raises(pg.CheckpointError, match="inside the checkpoint folder"):
        fitted.save(ckpt / "7")


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: pg.Config(hiden=32), "Config has no field 'hiden'. Did you mean hidden"),
        (lambda: pg.Config.tiny(hiden=32), "Config has no field 'hiden'. Did you mean hidden"),
        (lambda: pg.Config.paper(None), "takes keyword arguments only"),
        (lambda: pg.Config(reward_scale=-100.0), "reward_scale must be > 0"),
        (
            lambda: pg.Config(subgraph_nodes=2**31 - 1, subgraph_edges=2**31 - 1),
            "subgraph_nodes and subgraph_edges must be at most 1073741824",
        ),
        (
            lambda: pg.Config(num_episodes=2**30, steps_per_episode=4),
            "num_episodes x steps_per_episode",
        ),
    ],
)
def test_config_values_that_broke_later_are_refused_when_built(make, message):
    """Before: a bare TypeError without a hint; a negative reward scale that trains the agent
    toward the worst depths; sizes that overflowed int32 inside JAX."""
    with pytest.raises(pg.ConfigError, match=message):
        make()


def test_the_same_dataset_twice_in_a_table_is_refused(capsys):
    """Before: two identical columns."""
    from conftest import _experiment

    reproduce = _experiment("reproduce")
    assert reproduce.main(["table", "--datasets", "cora", "cora", "--out", "/nonexistent/x"]) == 2
    assert "cora is named twice" in capsys.readouterr().err
