"""The reproduction commands (experiments/reproduce.py): runs reused only when made on the
same data and settings, flags a command does not read said, and no empty output left."""

import json

import numpy as np
import pytest
from reliability_helpers import toy_fits, toy_graph

import policy_gnn_jax as pg


@pytest.fixture(scope="module")
def one_seed_fits():
    """The toy graph and two one-seed fits of it, seeds 0 and 1."""
    return toy_fits(seeds=1)


def _headroom(reproduce_module, out, seeds):
    argv = ["headroom", "--datasets", "csbm", "--seeds", str(seeds), "--preset", "tiny",
            "--out", str(out), "--headroom-json", str(out.parent / "merged.json")]  # fmt: skip
    return reproduce_module.main(argv)


def test_reproduce_overwrite_over_a_saved_fit_leaves_a_loadable_or_no_fit(one_seed_fits, tmp_path):
    """reproduce --overwrite over a saved fit leaves a loadable fit or none: replacing only
    results.json would leave a fit that does not load."""
    import dataclasses

    from policy_gnn_jax.contrib.reproduction import runs

    ds, (first, _) = one_seed_fits
    first.save(tmp_path / "run")
    config = dataclasses.replace(pg.Config.tiny(epochs=2), depth=1)
    runs.run_or_load(tmp_path / "run", ds, config, "gcn", 1, replace=True)
    assert not (tmp_path / "run" / "fit.json").exists()
    assert json.loads((tmp_path / "run" / "results.json").read_text())["config"]["depth"] == 1


def test_reproduce_keeps_a_users_file_beside_a_fresh_run(tmp_path):
    import dataclasses

    from policy_gnn_jax.contrib.reproduction import runs

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "dataset.npz").write_text("mine")
    config = dataclasses.replace(pg.Config.tiny(epochs=2), depth=1)
    runs.run_or_load(tmp_path / "run", toy_graph(), config, "gcn", 1)
    assert (tmp_path / "run" / "dataset.npz").read_text() == "mine"


def test_the_same_dataset_twice_in_a_table_is_refused(capsys):
    """The same dataset twice in a table is refused: it would make two identical columns."""
    from conftest import _experiment

    reproduce = _experiment("reproduce")
    assert reproduce.main(["table", "--datasets", "cora", "cora", "--out", "/nonexistent/x"]) == 2
    assert "cora is named twice" in capsys.readouterr().err


def test_reproduce_does_not_reuse_a_run_made_on_other_data(reproduce_module, tmp_path, capsys):
    """A dataset given as a path whose file holds another graph does not get the saved run's
    numbers: the saved data fingerprint is compared."""
    first = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100, seed=0)
    other = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100, seed=1)
    cfg = pg.Config.tiny(epochs=2)
    out = tmp_path / "run"
    reproduce_module.run_or_load(out, first, cfg, "gcn", 1)
    with pytest.raises(pg.CheckpointError, match="its data differ"):
        reproduce_module.run_or_load(out, other, cfg, "gcn", 1)
    reproduce_module.run_or_load(out, first, cfg, "gcn", 1)
    assert "reusing" in capsys.readouterr().out


def test_a_dataset_given_by_path_has_its_runs_under_out(reproduce_module, tmp_path):
    """The runs of a dataset given by path go under --out: as `out / name`, an absolute path as the
    name is the path itself, so the runs would be written into the input's own folder of arrays (or
    fail with "choose a writable folder" for a file)."""
    from policy_gnn_jax import data

    graph = tmp_path / "arr.npz"
    data.write_csbm(graph, num_nodes=300, seed=1, num_val=50, num_test=100)
    before = sorted(p.name for p in graph.iterdir())
    argv = ["table", "--preset", "tiny", "--datasets", str(graph), "--seeds", "1",
            "--episodes", "1", "--out", str(tmp_path / "rep")]  # fmt: skip
    assert reproduce_module.main(argv) == 0
    assert sorted(p.name for p in graph.iterdir()) == before
    assert (tmp_path / "rep" / "arr.npz" / "policy-gnn" / "results.json").is_file()


def test_two_datasets_whose_run_folders_would_be_one_are_refused(reproduce_module, tmp_path):
    from policy_gnn_jax import data

    for where in ("a", "b"):
        data.write_csbm(tmp_path / where / "g.npz", num_nodes=300, seed=1, num_val=50, num_test=100)
    graphs = [str(tmp_path / where / "g.npz") for where in ("a", "b")]
    argv = ["table", "--preset", "tiny", "--datasets", *graphs, "--seeds", "1",
            "--out", str(tmp_path / "rep")]  # fmt: skip
    assert reproduce_module.main(argv) == 2
    assert not (tmp_path / "rep").exists() or not any((tmp_path / "rep").iterdir())


@pytest.mark.parametrize("name", ["..", ".", "g/..", "/"])
def test_a_dataset_path_without_a_name_of_its_own_still_runs_under_out(tmp_path, name):
    """`--datasets ..` puts the runs under --out, not in `out / ".."`, the folder above --out."""
    from policy_gnn_jax.contrib.reproduction import runs

    folder = runs.dataset_folder(tmp_path / "rep", name)
    assert folder.parent == tmp_path / "rep" and folder.name not in ("", ".", "..")


@pytest.mark.parametrize(
    "what, flag, value", [("fig1", "--datasets", "citeseer"), ("table", "--dataset", "citeseer")]
)
def test_reproduce_says_which_dataset_flag_a_command_does_not_read(
    reproduce_module, tmp_path, capsys, monkeypatch, what, flag, value
):
    """`fig1 --datasets citeseer` says fig1 does not read the flag, rather than run Cora without a
    word."""
    from policy_gnn_jax.contrib.reproduction import command

    monkeypatch.setitem(command.COMMANDS, what, lambda args: None)  # the warning, not the run
    argv = [what, flag, value, "--seeds", "1", "--preset", "tiny", "--out", str(tmp_path / "o")]
    assert reproduce_module.main(argv) == 0
    assert f"{flag} is not used by {what}" in capsys.readouterr().err


def test_reproduce_figures_says_the_run_flags_it_does_not_read(
    reproduce_module, tmp_path, capsys, monkeypatch
):
    """`figures --seeds 3 --episodes 7` says figures does not read them, rather than draw the 1-seed
    runs there without a word."""
    from policy_gnn_jax.contrib.reproduction import command

    monkeypatch.setitem(command.COMMANDS, "figures", lambda args: None)
    argv = ["figures", "--seeds", "3", "--episodes", "7", "--out", str(tmp_path / "o")]
    assert reproduce_module.main(argv) == 0
    err = capsys.readouterr().err
    assert "--seeds is not used by figures" in err and "--episodes is not used" in err


def test_the_headroom_cache_of_other_seeds_is_not_replaced_unasked(reproduce_module, tmp_path,
                                                                    capsys):  # fmt: skip
    """A second run with other --seeds is refused and changes nothing: it would replace the cache,
    headroom.json and headroom.md, then refuse the merge saying "nothing was written"."""
    out = tmp_path / "o"
    assert _headroom(reproduce_module, out, 1) == 0
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in files}
    capsys.readouterr()
    assert _headroom(reproduce_module, out, 2) == 2
    err = capsys.readouterr().err
    assert "--overwrite" in err and "another" in err, err
    assert {p: p.read_bytes() for p in sorted(p for p in tmp_path.rglob("*") if p.is_file())} == (
        before
    )


@pytest.mark.parametrize("damage", ["no-tag", "not-npz"])
def test_a_damaged_headroom_cache_is_made_again_with_a_warning(reproduce_module, tmp_path,
                                                               capsys, damage):  # fmt: skip
    """A damaged headroom cache is made again with a warning: a cache without its tag would be a
    KeyError traceback, and one that is not an npz would give numpy's advice to unpickle it."""
    cache = tmp_path / "o" / "csbm" / "headroom_probs.npz"
    cache.parent.mkdir(parents=True)
    if damage == "no-tag":
        np.savez(cache, probs=np.zeros(3))
    else:
        cache.write_bytes(b"not an npz")
    assert _headroom(reproduce_module, tmp_path / "o", 1) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and str(cache) in err, err
    with np.load(cache) as z:
        assert "tag" in z.files
