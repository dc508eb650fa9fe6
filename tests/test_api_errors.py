"""The API's errors in the caller's terms: a config that cannot run on a graph is a ConfigError
naming the field and a value that works, before anything compiles; paths are read as a shell
user expects."""

import dataclasses
import warnings

import numpy as np
import pytest

import policy_gnn_jax as pg


def _graph(num_train: int, n: int = 900):
    rng = np.random.default_rng(0)
    labels = np.arange(n) % 2
    features = rng.normal(size=(n, 4)) + labels[:, None]
    edges = np.stack([np.arange(n - 1), np.arange(1, n)])
    ids = np.arange(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pg.from_arrays(features, edges, labels, ids[:num_train],
                              ids[num_train:num_train + 100], ids[num_train + 100:])  # fmt: skip


def test_a_replay_memory_smaller_than_a_step_is_the_config_field_and_a_value_that_works():
    ds = _graph(num_train=600)
    config = pg.Config.tiny()  # replay_capacity 256: one step adds 600 transitions
    with pytest.raises(pg.ConfigError, match=r"Config\.replay_capacity.*at least 600"):
        pg.fit(ds, config, seeds=1, progress=False)
    bigger = dataclasses.replace(config, replay_capacity=600, num_episodes=1)
    pg.fit(ds, bigger, seeds=1, progress=False)


def test_a_dqn_agent_built_for_fewer_walkers_is_refused_not_overflowed():
    """An agent built on another graph checked its walkers there: the walkers of the graph it is
    fitted on, more than its replay memory holds, are refused, not written over one another in
    one step (which drops transitions, and on a GPU keeps an unspecified one)."""
    config = pg.Config.tiny()  # replay_capacity 256
    agent = pg.dqn_agent(config, pg.graph.from_dataset(_graph(num_train=30, n=300)))
    with pytest.raises(pg.ConfigError, match=r"300 transitions.*holds 256.*replay_capacity"):
        pg.fit(_graph(num_train=300), config, agent=agent, seeds=1, progress=False)


def test_the_replay_memory_refuses_a_batch_wider_than_itself():
    import jax.numpy as jnp

    from policy_gnn_jax.agents import base, dqn

    ids = jnp.arange(6, dtype=jnp.int32)
    with pytest.raises(ValueError, match="adds 6 transitions.*holds 4"):
        dqn.replay_add(dqn.replay_init(4), base.Transition(ids, ids, ids * 1.0, ids))


def test_a_folder_under_home_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    ds = _graph(num_train=20, n=200)
    fit = pg.fit(ds, pg.Config.tiny(epochs=2), method="gcn", seeds=1, progress=False,
                 checkpoint_dir="~/ck")  # fmt: skip
    fit.save("~/fit")
    assert (tmp_path / "home" / "fit" / "fit.json").is_file()
    assert (tmp_path / "home" / "ck").is_dir()
    assert not (tmp_path / "~").exists()
    assert pg.load("~/fit").record == fit.record


def test_a_run_whose_backbone_never_trained_says_so_and_records_it(tmp_path, capsys):
    from policy_gnn_jax import cli

    argv = ["--dataset", "csbm", "--csbm-nodes", "1600", "--seeds", "1", "--episodes", "1",
            "--steps-per-episode", "2", "--buffer-size", "100000", "--no-progress",
            "--out", str(tmp_path / "o")]  # fmt: skip
    assert cli.main(argv) == 0  # a finished run: the warning does not fail it
    err = capsys.readouterr().err
    assert "warning: the backbone never trained" in err and "Traceback" not in err
    record = pg.load(tmp_path / "o").record
    assert any("never trained" in w for w in record["warnings"])


def test_splits_that_cannot_be_joined_run_apart_and_say_so():
    from policy_gnn_jax import split_sweep

    small, large = _graph(num_train=20, n=200), _graph(num_train=30, n=200)
    config = pg.Config.tiny(epochs=2)
    with pytest.warns(UserWarning, match="one after another"):
        fits = split_sweep.fit_splits([small, large], config, method="gcn", seeds=1,
                                      progress=False, split_map="vmap")  # fmt: skip
    assert [f.record["split_map"] for f in fits] == ["apart", "apart"]


def test_a_custom_backbone_for_another_class_count_is_refused():
    from policy_gnn_jax import backbones, graph

    mine = _graph(num_train=20, n=200)
    three = dataclasses.replace(mine, labels=np.arange(200) % 3, num_classes=3)
    config = pg.Config.tiny(epochs=2)
    for_three = backbones.make_backbone(config, graph.from_dataset(three), 2, 2)
    with pytest.raises(pg.ConfigError, match=r"float32 \(1, 200, 3\).*\[1, 200, 2\]"):
        pg.fit(mine, config, method="gcn", backbone=for_three, seeds=1, progress=False)
    # Built on another graph of the same class count, it runs on the graph it is given.
    other = _graph(num_train=20, n=300)
    on_other = backbones.make_backbone(config, graph.from_dataset(other), 2, 2)
    fitted = pg.fit(mine, config, method="gcn", backbone=on_other, seeds=1, progress=False)
    assert fitted.predict(mine.test_index).shape == (1, len(mine.test_index))
