"""Findings of the sixteenth adversarial pass: a headroom file that is the run's own output, an
input graph reached through a link, the study's files beside its JSON, a JSON that is a link,
identical datasets joined, a stop inside a finaliser, batches of uneven splits, and --splits
parsing. Each a test that failed before its fix."""

import json
import signal
import sys

import numpy as np
import pytest
from test_heterophily import HETEROPHILY_DIR
from test_splits import _argv, _benchmark_file

import policy_gnn_jax as pg
from policy_gnn_jax import cli, data, split_sweep
from policy_gnn_jax.runtime import runner, study_files


def test_a_headroom_file_that_is_the_runs_own_output_is_refused(reproduce_module, tmp_path, capsys):
    """Before: the run wrote its own headroom.json over the merged file, then refused it: the
    earlier entries were gone."""
    out = tmp_path / "o"
    out.mkdir()
    merged = out / "headroom.json"
    merged.write_text(json.dumps({"gcn": {"citeseer": {"note": "earlier"}}}))
    before = merged.read_bytes()
    argv = ["headroom", "--datasets", "cora", "--seeds", "1", "--preset", "tiny",
            "--out", str(out), "--headroom-json", str(merged)]  # fmt: skip
    assert reproduce_module.main(argv) == 2
    assert "is this run's own headroom.json" in capsys.readouterr().err
    assert merged.read_bytes() == before


def test_an_input_graph_reached_through_a_link_is_kept(tmp_path, capsys):
    """Before: a link to <out>/dataset.npz passed the check; --splits then deleted the graph."""
    out = tmp_path / "o"
    out.mkdir()
    graph = out / "dataset.npz"
    graph.write_bytes((HETEROPHILY_DIR / "texas.npz").read_bytes())
    link = tmp_path / "g.npz"
    link.symlink_to(graph)
    argv = ["--dataset", str(link), "--method", "gcn", "--epochs", "2", "--seeds", "1",
            "--no-progress", "--out", str(out), "--splits", "0-1", "--overwrite"]  # fmt: skip
    assert cli.main(argv) == 2
    assert "would be replaced" in capsys.readouterr().err
    assert graph.is_file()


@pytest.mark.parametrize("side", ["md", "depths-folder", "depths-corrupt"])
def test_the_studys_files_beside_its_json_are_checked_first(experiment, tmp_path, capsys, side):
    """Before: a user's X.md beside --results-json X.json was replaced by the table; X.depths.npz
    as a folder was a traceback, and a corrupt one numpy's pickle message, both after the JSON
    had been written."""
    results = tmp_path / "r.json"
    if side == "md":
        (tmp_path / "r.md").write_text("my notes\n")
    elif side == "depths-folder":
        (tmp_path / "r.depths.npz").mkdir()
    else:
        (tmp_path / "r.depths.npz").write_bytes(b"not an npz")
    argv = ["study", "--datasets", "texas", "--data-dir", str(HETEROPHILY_DIR), "--seeds", "1",
            "--max-depth", "1", "--num-splits", "1", "--out", str(tmp_path / "runs"),
            "--options-json", str(tmp_path / "o.json"), "--results-json", str(results),
            "--figure", str(tmp_path / "f.png")]  # fmt: skip
    assert experiment("heterophily").main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "r." in err and "Traceback" not in err
    assert not results.exists() and not (tmp_path / "runs").exists()
    if side == "md":
        assert (tmp_path / "r.md").read_text() == "my notes\n"


def test_a_merged_json_that_is_a_link_updates_its_target(tmp_path):
    """Before: the link was replaced by a regular file; the file it pointed to never changed."""
    target = tmp_path / "real" / "merged.json"
    target.parent.mkdir()
    target.write_text(json.dumps({"a": {}}))
    link = tmp_path / "link.json"
    link.symlink_to(target)
    study_files.merge(link, "a test file", lambda v: isinstance(v, dict),
                      lambda old: {**old, "b": {}})  # fmt: skip
    assert link.is_symlink()
    assert set(json.loads(target.read_text())) == {"a", "b"}


@pytest.mark.parametrize("split_map", ["map", "vmap"])
def test_the_same_dataset_twice_is_joined_too(split_map):
    """Before: JAX's "scan got no values to scan over" (map) or "vmap must have at least one
    non-None value in in_axes" (vmap): no array differed between the splits."""
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    cfg = pg.Config.tiny(epochs=3)
    fits = split_sweep.fit_splits([ds, ds], cfg, method="gcn", seeds=1, progress=False,
                                  split_map=split_map)  # fmt: skip
    alone = pg.fit(ds, cfg, method="gcn", seeds=1, progress=False)
    for fitted in fits:
        np.testing.assert_allclose(fitted.record["test_accuracy"]["per_seed"],
                                   alone.record["test_accuracy"]["per_seed"])  # fmt: skip


def test_a_stop_inside_a_finaliser_is_noted_not_raised():
    """Before: a Ctrl-C landing in a progress bar's __del__ printed "Exception ignored in ...
    __del__" with a traceback (Python drops exceptions raised in finalisers)."""
    from policy_gnn_jax.cli import process

    def __del__():  # noqa: N807 (a frame named as a finaliser's)
        process.stop_on_signal(signal.SIGINT, sys._getframe())

    runner.clear_stop()
    try:
        __del__()  # no KeyboardInterrupt here
        assert runner.stop_requested() == signal.SIGINT
    finally:
        runner.clear_stop()


def _uneven_benchmark(path):
    """Four splits, split 2 one training node smaller than the others."""
    _benchmark_file(path, num_splits=4)
    with np.load(path) as z:
        arrays = dict(z)
    moved = np.flatnonzero(arrays["train_masks"][2])[0]
    arrays["train_masks"][2, moved] = False
    np.savez(path, **arrays)
    return path


def test_a_vmap_sweep_over_uneven_splits_reuses_its_own_result(tmp_path, capsys):
    """Before: the record said one batch and the check expected another, so the same command
    refused (or, with --overwrite, trained again) what it had just made."""
    file = _uneven_benchmark(tmp_path / "bench.npz")
    out = tmp_path / "o"
    assert cli.main(_argv(file, out, "--splits", "2")) == 0  # the odd one, saved first
    (out / "results.json").unlink()
    argv = _argv(file, out, "--splits", "0-3", "--split-map", "vmap")
    assert cli.main(argv) == 0
    (out / "results.json").unlink()
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert json.loads((out / "results.json").read_text())["reused_splits"] == [0, 1, 2, 3]


@pytest.mark.parametrize("text", ["0_1", "1_0", "٣"])
def test_split_ids_are_plain_digits(text):
    """Before: int() read `0_1` as split 1 and `1_0` as split 10."""
    with pytest.raises(pg.ConfigError, match="--splits"):
        cli.splits.parse_splits(text, 20)  # split 10 exists: 1_0 must not be read as it


def test_a_file_where_a_split_folder_goes_names_the_fix(tmp_path, capsys):
    """Before: "is an existing file, not a folder: choose a folder" (the user chooses no split
    folder)."""
    file = _benchmark_file(tmp_path / "bench.npz")
    out = tmp_path / "o"
    out.mkdir()
    (out / "split-1").write_text("hi")
    assert cli.main(_argv(file, out, "--splits", "0-2")) == 2
    err = capsys.readouterr().err
    assert "split-1 is a file where split 1's folder goes" in err and "move it away" in err
    assert (out / "split-1").read_text() == "hi"
    assert data  # the data package is importable beside the cli (imported above)
