"""Sweeps over splits: their arguments, saved splits reused only when made alike, and damaged
or stopped sweeps named with the fix."""

import json

import numpy as np
import pytest
from conftest import HETEROPHILY_DIR, need, split_graph_gcn
from reliability_helpers import texas_split_with_boundary
from test_splits import _argv, _benchmark_file

import policy_gnn_jax as pg
from policy_gnn_jax import cli, data, split_sweep


def _last_error(capsys) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


TEXAS_TWO_EPOCHS = ["--dataset", "texas", "--data-dir", str(HETEROPHILY_DIR), "--method", "gcn",
                    "--seeds", "1", "--no-progress", "--epochs", "2"]  # fmt: skip


def _uneven_benchmark(path):
    """Four splits, split 2 one training node smaller than the others."""
    _benchmark_file(path, num_splits=4)
    with np.load(path) as z:
        arrays = dict(z)
    moved = np.flatnonzero(arrays["train_masks"][2])[0]
    arrays["train_masks"][2, moved] = False
    np.savez(path, **arrays)
    return path


def test_splits_with_overwrite_over_a_single_fit_leaves_no_stale_fit(tmp_path):
    """--splits --overwrite over a single fit leaves no stale fit: the old fit.json, dataset.npz and
    snapshots.npz beside the sweep's results.json would make `load` fail with a checksum error."""
    file = _benchmark_file(tmp_path / "bench.npz")
    assert cli.main(_argv(file, tmp_path / "g")) == 0
    assert cli.main(_argv(file, tmp_path / "g", "--splits", "0-1", "--overwrite")) == 0
    assert sorted(p.name for p in (tmp_path / "g").iterdir() if p.is_file()) == ["results.json"]
    with pytest.raises(pg.CheckpointError, match="sweep over splits.*split-0"):
        pg.load(tmp_path / "g")


def test_a_saved_split_of_another_seed_mode_is_not_reused(tmp_path, capsys):
    file = _benchmark_file(tmp_path / "bench.npz")
    assert cli.main(_argv(file, tmp_path / "o", "--splits", "0", "--seed-mode", "vmap")) == 0
    (tmp_path / "o" / "results.json").unlink()
    again = _argv(file, tmp_path / "o", "--splits", "0", "--seed-mode", "map")
    assert cli.main(again) == 2
    err = capsys.readouterr().err
    assert "split-0 already holds" in err and "--overwrite" in err and "overwrite=True" not in err


@pytest.mark.parametrize("text", ["", " ", ","])
def test_an_empty_splits_is_refused(tmp_path, capsys, text):
    """`--splits ""` is refused, not run as one split as if the flag were absent."""
    file = _benchmark_file(tmp_path / "bench.npz")
    assert cli.main(_argv(file, tmp_path / "o", "--splits", text)) == 2
    assert "--splits must be" in capsys.readouterr().err


@pytest.mark.parametrize("content", ["[1, 2]", "{not json"])
def test_a_damaged_split_manifest_is_named(tmp_path, capsys, content):
    """A damaged split manifest is named in one line, not an AttributeError, or a bare
    JSONDecodeError naming no file."""
    file = _benchmark_file(tmp_path / "bench.npz")
    (tmp_path / "o" / "split-0").mkdir(parents=True)
    (tmp_path / "o" / "split-0" / "fit.json").write_text(content)
    assert cli.main(_argv(file, tmp_path / "o", "--splits", "0")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "split-0" in err, err


def test_split_and_splits_together_are_refused_even_for_split_0(tmp_path, capsys):
    file = _benchmark_file(tmp_path / "b.npz")
    argv = ["--dataset", str(file), "--splits", "1-2", "--split", "0", "--out", str(tmp_path / "o")]
    assert cli.main(argv) == 2
    assert "--split K for one split or --splits" in capsys.readouterr().err


def test_a_damaged_split_says_what_to_do_and_overwrite_trains_it_again(tmp_path, capsys):
    """A damaged split says what to do, and --overwrite trains it again: not "... Save the fit
    again.", which a command-line user cannot do, with or without --overwrite."""
    from policy_gnn_jax import cli

    out = tmp_path / "sw"
    gcn = split_graph_gcn(tmp_path)
    assert cli.main([*gcn, "--epochs", "2", "--splits", "0-1", "--out", str(out)]) == 0
    (out / "results.json").unlink()
    with open(out / "split-1" / "snapshots.npz", "ab") as f:
        f.write(b"x")
    assert cli.main([*gcn, "--epochs", "2", "--splits", "0-1", "--out", str(out)]) == 2
    last = _last_error(capsys)
    assert f"Delete {out / 'split-1'}, or pass --overwrite" in last
    argv = [*gcn, "--epochs", "2", "--splits", "0-1", "--out", str(out), "--overwrite"]
    assert cli.main(argv) == 0
    summary = json.loads((out / "results.json").read_text())
    assert summary["reused_splits"] == [0]


def test_a_reversed_split_range_says_so():
    from policy_gnn_jax.cli import splits

    with pytest.raises(pg.ConfigError, match="A-B needs A <= B"):
        splits.parse_splits("9-7", 10)


def test_a_failed_sweep_over_a_single_fit_keeps_that_fit(tmp_path):
    """A failed sweep over a single fit keeps that fit: if --splits --overwrite removed it ahead of
    training, a split that diverged would leave the folder empty."""
    need("texas")
    out = str(tmp_path / "o")
    assert cli.main([*TEXAS_TWO_EPOCHS, "--out", out]) == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "o").iterdir() if p.is_file()}
    diverged = [
        *TEXAS_TWO_EPOCHS,
        "--splits",
        "0-1",
        "--overwrite",
        "--gcn-lr",
        "1e30",
        "--out",
        out,
    ]
    assert cli.main(diverged) == 2
    after = {p.name: p.read_bytes() for p in (tmp_path / "o").iterdir() if p.is_file()}
    assert after == before
    assert json.loads(before["results.json"])["config"]["epochs"] == 2


@pytest.mark.parametrize("name", ["train_index", "val_index"])
def test_split_ids_of_the_wrong_kind_say_what_to_pass(name):
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    splits = dict(train_index=ds.train_index, val_index=ds.val_index, test_index=ds.test_index)
    splits[name] = splits[name].astype(np.float64)
    with pytest.raises(pg.InvalidDatasetError, match=f"{name} must be .*Pass .* integer"):
        pg.from_arrays(ds.features, ds.edges, ds.labels, **splits)


def test_splits_over_several_processes_is_refused_before_waiting_for_them(capsys):
    """--splits over several processes is refused at once: process 1 does not wait for process 0
    (300 s by default) to reach the same refusal."""
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
    """A huge split range names the splits that exist, not an OverflowError traceback, or "out of
    host memory" from building the list."""
    from policy_gnn_jax.cli import splits

    with pytest.raises(pg.ConfigError, match="names split .*, but the dataset has splits 0..9"):
        splits.parse_splits(text, 10)


@pytest.mark.parametrize("split_map", ["map", "vmap"])
def test_the_same_dataset_twice_is_joined_too(split_map):
    """The same dataset twice is joined too, though no array differs between the splits: not JAX's
    "scan got no values to scan over" (map) or "vmap must have at least one non-None value in
    in_axes" (vmap)."""
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    cfg = pg.Config.tiny(epochs=3)
    fits = split_sweep.fit_splits([ds, ds], cfg, method="gcn", seeds=1, progress=False,
                                  split_map=split_map)  # fmt: skip
    alone = pg.fit(ds, cfg, method="gcn", seeds=1, progress=False)
    for fitted in fits:
        np.testing.assert_allclose(fitted.record["test_metric"]["per_seed"],
                                   alone.record["test_metric"]["per_seed"])  # fmt: skip


def test_a_vmap_sweep_over_uneven_splits_reuses_its_own_result(tmp_path, capsys):
    """A vmap sweep over uneven splits reuses its own result: if the record said one batch and the
    check expected another, the same command would refuse (or, with --overwrite, train again) what
    it had just made."""
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
    """Split ids are plain digits: int() would read `0_1` as split 1 and `1_0` as split 10."""
    with pytest.raises(pg.ConfigError, match="--splits"):
        cli.splits.parse_splits(text, 20)  # split 10 exists: 1_0 must not be read as it


def test_a_file_where_a_split_folder_goes_names_the_fix(tmp_path, capsys):
    """A file where a split folder goes names the fix, not "is an existing file, not a folder:
    choose a folder" (the user chooses no split folder)."""
    file = _benchmark_file(tmp_path / "bench.npz")
    out = tmp_path / "o"
    out.mkdir()
    (out / "split-1").write_text("hi")
    assert cli.main(_argv(file, out, "--splits", "0-2")) == 2
    err = capsys.readouterr().err
    assert "split-1 is a file where split 1's folder goes" in err and "move it away" in err
    assert (out / "split-1").read_text() == "hi"
    assert data  # the data package is importable beside the cli (imported above)


def test_a_saved_split_of_other_part_sizes_is_not_reused(tmp_path, capsys):
    need("texas")
    graph = texas_split_with_boundary(tmp_path, "blocks.npz", 100)
    argv = ["--dataset", str(graph), "--splits", "0", "--method", "gcn", "--epochs", "3",
            "--seeds", "1", "--no-progress", "--out", str(tmp_path / "o")]  # fmt: skip
    assert cli.main(argv) == 0
    (tmp_path / "o" / "results.json").unlink()  # as an interrupted sweep leaves it
    texas_split_with_boundary(tmp_path, "blocks.npz", 60)
    assert cli.main(argv) == 2
    assert "split-0 already holds" in capsys.readouterr().err
