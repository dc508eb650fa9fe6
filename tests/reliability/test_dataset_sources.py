"""Where a dataset comes from (a built-in name, a file, a folder, a data directory, a
generator): the source meant is the source read, and an input is never written over."""

import dataclasses
import json

import numpy as np
import pytest
from conftest import HETEROPHILY_DIR, need
from reliability_helpers import ROOT, run_python
from test_splits import _benchmark_file

import policy_gnn_jax as pg
from policy_gnn_jax import cli, data
from policy_gnn_jax.data import heterophily


def _warnings(capsys, *argv):
    cli.warn_unused_flags(cli.build_parser().parse_args(list(argv)))
    return capsys.readouterr().err


def pathlib_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def test_a_graph_too_large_to_generate_is_refused_before_allocating(tmp_path, capsys):
    """A graph too large to generate is refused up front: no numpy MemoryError traceback, and no
    empty --out folder left behind."""
    code = cli.main(
        ["--dataset", "csbm", "--csbm-nodes", "1000000000", "--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "--csbm-nodes" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.benchmark_data("cora")
def test_data_dir_means_that_folder_only(tmp_path, monkeypatch, capsys):
    """--data-dir means that folder only: a --data-dir lacking files is not filled in from
    $POLICY_GNN_DATA or the cache, and the run says which folder it read."""
    from conftest import PLANETOID_DIR

    partial = tmp_path / "partial"
    partial.mkdir()
    for path in PLANETOID_DIR.glob("ind.cora.*"):
        if not path.name.endswith(".graph"):
            (partial / path.name).write_bytes(path.read_bytes())
    monkeypatch.setenv("POLICY_GNN_DATA", str(PLANETOID_DIR))
    with pytest.raises(pg.DataError, match=r"ind\.cora\.graph") as caught:
        pg.load_dataset("cora", data_dir=partial)
    assert str(PLANETOID_DIR) not in str(caught.value)
    argv = ["--dataset", "cora", "--data-dir", str(PLANETOID_DIR), "--method", "gcn", "--epochs"]
    argv += ["1", "--seeds", "1", "--no-progress", "--out", str(tmp_path / "o")]
    code = cli.main(argv)
    assert code == 0
    assert f"read from {PLANETOID_DIR}" in capsys.readouterr().out
    record = json.loads((tmp_path / "o" / "results.json").read_text())
    assert record["data_source"] == str(PLANETOID_DIR)


def test_a_data_variable_naming_no_folder_is_an_error(monkeypatch, tmp_path):
    """POLICY_GNN_DATA=/no/such/dir is an error, not a fall-back to the cache without a word."""
    monkeypatch.setenv("POLICY_GNN_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(pg.DataError, match="POLICY_GNN_DATA"):
        pg.load_dataset("cora")


@pytest.mark.parametrize("name", ["cora", "texas", "ogbn-arxiv"])
def test_an_empty_data_dir_is_refused_not_read_as_the_current_folder(name, tmp_path, monkeypatch):
    """data_dir="" would search (and download into) the current folder: refused, as the
    command's --data-dir "" is."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POLICY_GNN_OFFLINE", "1")
    with pytest.raises(pg.DataError, match="data_dir is an empty path"):
        pg.load_dataset(name, data_dir="")
    assert not any(tmp_path.iterdir())


def test_an_uppercase_npz_path_keeps_its_split_and_its_results_under_results(capsys):
    """`--dataset /d/TEXAS.NPZ --split 3` gives no warning that --split is not used (it is), and the
    default output folder is made under results/, not beside the data file."""
    argv = ["--dataset", "/data/ü/TEXAS.NPZ", "--split", "3", "--method", "gcn"]
    assert _warnings(capsys, *argv) == ""
    args = cli.build_parser().parse_args(argv)
    stem = cli._default_stem(args, cli.config_from_args(args))
    assert stem.startswith("texas-split3-") and "/" not in stem


def test_a_dataset_source_that_is_not_text_is_named():
    """A lone surrogate in `source` is named as not valid text, not a UnicodeEncodeError naming
    neither field nor fix."""

    import policy_gnn_jax as pg

    ds = pg.load_dataset("csbm", num_nodes=1600)
    with pytest.raises(pg.InvalidDatasetError, match="source is not valid text"):
        dataclasses.replace(ds, source="/data/\ud800")


def test_a_two_class_file_numbered_otherwise_is_refused(tmp_path):
    """Labels {0, 2} are refused: they would load as three classes, scored by accuracy instead of
    ROC AUC."""
    path = _benchmark_file(tmp_path / "b.npz", classes=2)
    with np.load(path) as z:
        arrays = dict(z)
    arrays["node_labels"] = arrays["node_labels"] * 2
    np.savez(tmp_path / "c.npz", **arrays)
    with pytest.raises(data.DataError, match=r"two classes, numbered \[0, 2\]: number them 0"):
        pg.load_dataset(str(tmp_path / "c.npz"))


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


def test_a_file_named_like_a_built_in_dataset_keeps_its_file_name(tmp_path):
    """A texas copy saved as cora.npz keeps its file name as the dataset's, not recorded as dataset
    "cora"."""
    need("texas")
    source = heterophily.resolve_file("texas", str(HETEROPHILY_DIR), False)
    copy = tmp_path / "cora.npz"
    copy.write_bytes(pathlib_bytes(source))
    assert pg.load_dataset(str(copy)).name == "cora.npz"
    other = tmp_path / "mygraph.npz"
    other.write_bytes(pathlib_bytes(source))
    assert pg.load_dataset(str(other)).name == "mygraph"


def test_a_file_path_with_a_data_dir_is_refused_not_read_from_elsewhere(tmp_path, monkeypatch):
    """load_dataset('graph.npz', data_dir=D) is refused: it would read ./graph.npz and ignore D."""
    need("texas")
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "graph.npz").write_bytes((HETEROPHILY_DIR / "texas.npz").read_bytes())
    monkeypatch.chdir(tmp_path / "cwd")
    with pytest.raises(pg.DataError, match="graph.npz is a file.*takes no data_dir"):
        pg.load_dataset("graph.npz", data_dir=str(tmp_path / "elsewhere"))
    assert pg.load_dataset("graph.npz").num_nodes == 183


def test_a_folder_of_arrays_named_like_an_npz_file_runs(tmp_path):
    """A folder of arrays named like an npz file runs, without "... takes no split (it takes: none)"
    when no split is given."""
    folder = pg.data.write_csbm(tmp_path / "graph.npz", num_nodes=1600, num_features=4)
    out = str(tmp_path / "o")
    argv = ["--dataset", str(folder), "--method", "gcn", "--epochs", "2", "--seeds", "1",
            "--no-progress", "--out", out]  # fmt: skip
    assert cli.main(argv) == 0
    assert json.loads((tmp_path / "o" / "results.json").read_text())["dataset"] == "csbm"


@pytest.mark.parametrize("extra", [[], ["--overwrite"], ["--splits", "0-1", "--overwrite"]])
def test_an_input_graph_that_a_result_would_replace_is_refused(tmp_path, capsys, extra):
    """An input graph at DIR/dataset.npz is refused without advice to pass --overwrite, which would
    replace the user's graph with the fit's own dataset file."""
    out = tmp_path / "o"
    out.mkdir()
    graph = out / "dataset.npz"
    _benchmark_file(graph, num_splits=2, n=300)
    before = graph.read_bytes()
    argv = ["--dataset", str(graph), "--method", "gcn", "--epochs", "2", "--seeds", "1",
            "--no-progress", "--out", str(out), *extra]  # fmt: skip
    assert pg.cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "would be replaced" in err and "--overwrite" not in err.split("would be replaced")[1]
    assert graph.read_bytes() == before


def test_an_input_graph_reached_through_a_link_is_kept(tmp_path, capsys):
    """A link to <out>/dataset.npz is followed: without the check, --splits would delete the
    graph."""
    out = tmp_path / "o"
    out.mkdir()
    graph = out / "dataset.npz"
    _benchmark_file(graph, num_splits=2, n=300)
    link = tmp_path / "g.npz"
    link.symlink_to(graph)
    argv = ["--dataset", str(link), "--method", "gcn", "--epochs", "2", "--seeds", "1",
            "--no-progress", "--out", str(out), "--splits", "0-1", "--overwrite"]  # fmt: skip
    assert cli.main(argv) == 2
    assert "would be replaced" in capsys.readouterr().err
    assert graph.is_file()


@pytest.mark.benchmark_data("texas")
def test_a_folder_named_like_a_built_in_dataset_is_said_to_be_shadowed(tmp_path, monkeypatch):
    """With a folder of arrays ./texas here, `texas` warns that the folder is shadowed rather than
    run the built-in graph silently."""
    from policy_gnn_jax import data

    monkeypatch.chdir(tmp_path)
    data.write_csbm(tmp_path / "texas", num_nodes=300, seed=1, num_val=50, num_test=100)
    with pytest.warns(UserWarning, match=r"\./texas"):
        ds = data.load_dataset("texas", data_dir=HETEROPHILY_DIR)
    assert ds.num_nodes == 183  # the built-in graph, as the warning says


def test_the_current_folder_as_the_dataset_gets_a_named_output_folder(tmp_path):
    """`--dataset .` without --out gets a named output folder, not
    results/-policy-gnn-<time>-<pid>."""
    from policy_gnn_jax import data

    data.write_csbm(tmp_path / "mygraph", num_nodes=300, seed=1, num_val=50, num_test=100)
    argv = ["--dataset", ".", "--method", "gcn", "--epochs", "1", "--seeds", "1", "--no-progress"]
    done = run_python(str(ROOT / "experiments" / "run.py"), *argv, cwd=tmp_path / "mygraph")
    assert done.returncode == 0, done.stderr[-2000:]
    made = [p.name for p in (tmp_path / "mygraph" / "results").iterdir()]
    assert len(made) == 1 and made[0].startswith("mygraph-"), made
