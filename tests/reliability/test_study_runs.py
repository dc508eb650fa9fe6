"""The studies' runs (heterophily, adaptive depth, decoupled tuning): arguments refused before
training, and saved runs and caches reused only when made alike."""

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import HETEROPHILY_DIR, need
from reliability_helpers import ROOT, run_python
from test_splits import _benchmark_file

import policy_gnn_jax as pg
from policy_gnn_jax import data
from policy_gnn_jax.runtime import locks


def _study(*argv):
    return subprocess.run([sys.executable, "experiments/heterophily.py", "study", *argv],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip


def _heterophily(tmp_path, what, *extra):
    argv = [sys.executable, "experiments/heterophily.py", what, "--datasets", "texas",
            "--data-dir", str(HETEROPHILY_DIR), "--seeds", "1", "--max-depth", "0",
            "--num-splits", "1", "--out", str(tmp_path / "runs"),
            "--options-json", str(tmp_path / "options.json"),
            "--results-json", str(tmp_path / "results.json"),
            "--figure", str(tmp_path / "depths.png"), *extra]  # fmt: skip
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def _hand_edit_a_saved_policy_run(experiment, tmp_path):
    """A study's saved Policy-GNN run (split 0 of Texas), its results.json then edited."""
    import types

    need("texas")
    het = experiment("heterophily")
    args = types.SimpleNamespace(
        num_splits=1, data_dir=str(HETEROPHILY_DIR), skip=["random", "policy-gnn-plus"],
        episodes=1, seeds=1, split_map="map", overwrite=False,
    )  # fmt: skip
    cfg = het.base_config(1, "plain")
    ds = pg.load_dataset("texas", data_dir=HETEROPHILY_DIR, split=0)
    run = tmp_path / "split-0" / "policy-gnn-s1-e1"
    import dataclasses

    cfg_m = dataclasses.replace(cfg, num_episodes=1)
    het.fit_or_load(run, ds, cfg_m, "policy-gnn", 1)
    record = json.loads((run / "results.json").read_text())
    record["test_metric"]["mean"] = 0.99
    (run / "results.json").write_text(json.dumps(record))
    return het, args, run, ds, cfg_m


@pytest.mark.parametrize(
    "script", ["experiments/tune_decoupled.py", "benchmarks/decoupled_forms.py"]
)
def test_a_tuning_script_refuses_an_existing_out(tmp_path, script):
    """A tuning script refuses an existing --out file and asks for --overwrite, rather than run and
    replace the file unasked."""
    out = tmp_path / "x.json"
    out.write_text('{"p": 1}')
    done = run_python(script, "--datasets", "csbm", "--seeds", "1", "--out", str(out))
    assert done.returncode == 2 and "pass --overwrite" in done.stderr, done.stderr
    assert out.read_text() == '{"p": 1}'
    folder = run_python(script, "--datasets", "csbm", "--seeds", "1", "--out", str(tmp_path))
    assert folder.returncode == 2 and "is a folder" in folder.stderr, folder.stderr


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--results-json", "{tmp}/r.md"], "--results-json must name a .json file"),
        (["--num-splits", "0"], "--num-splits must be >= 1"),
        (["--num-splits", "-1"], "--num-splits must be >= 1"),
        (["--max-depth", "-1"], "--max-depth must be >= 0"),
        (["--options-json", "{tmp}/bad.json"], "is not an options file of heterophily.py"),
        (["--out", "{tmp}/file"], "is an existing file, not a folder"),
    ],
)
def test_the_studys_arguments_are_refused_before_any_training(tmp_path, extra, message):
    (tmp_path / "bad.json").write_text('{"texas": {"chosen_by_val": "bogus"}}')
    (tmp_path / "file").write_text("x")
    base = {"--out": f"{tmp_path}/runs", "--options-json": f"{tmp_path}/o.json",
            "--results-json": f"{tmp_path}/r.json", "--figure": f"{tmp_path}/f.png"}  # fmt: skip
    extra = [e.format(tmp=tmp_path) for e in extra]
    for flag, value in base.items():
        if flag not in extra:
            extra += [flag, value]
    done = _study("--datasets", "texas", *extra)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_damaged_fixed_depth_cache_is_trained_again(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("het", ROOT / "experiments" / "heterophily.py")
    het = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(het)
    ds = data.load_heterophily(str(_benchmark_file(tmp_path / "b.npz")), split=0)
    cfg = pg.Config.decoupled(min_depth=0, max_depth=1, epochs=3)
    (tmp_path / "f").mkdir()
    het.fixed_runs.cache_path(tmp_path / "f", cfg, 1).write_bytes(b"garbage")
    fixed = het.fixed_runs.fixed_depths(ds, cfg, 1, tmp_path / "f")
    assert fixed["probs"].shape[:2] == (2, 1)
    assert "fixed-s1-d0-1.npz could not be read" in capsys.readouterr().err
    assert (
        het.fixed_runs.fixed_depths(ds, cfg, 1, tmp_path / "f")["val"].tolist()
        == fixed["val"].tolist()
    )


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


def test_more_splits_than_the_benchmark_has_are_refused(tmp_path):
    """--num-splits 11 is refused, not run on the ten there are without a word."""
    need("texas")
    done = _heterophily(tmp_path, "options", "--num-splits", "11")
    assert done.returncode == 2
    assert "--num-splits 11: texas has 10 splits" in done.stderr.strip().splitlines()[-1]


def test_a_study_without_chosen_options_says_so(tmp_path):
    """A missing --options-json is said, not silently taken to mean the plain options."""
    need("texas")
    done = _heterophily(tmp_path, "study", "--skip", "policy-gnn", "random", "policy-gnn-plus")
    assert done.returncode == 0, done.stderr
    assert "holds no options chosen for texas" in done.stderr


@pytest.mark.parametrize("flag", ["--datasets", "--backbones"])
def test_a_name_given_twice_to_adaptive_depth_is_refused(experiment, tmp_path, capsys, flag):
    """A name given twice is refused: every record would be written twice."""
    values = ["cora", "cora"] if flag == "--datasets" else ["decoupled", "decoupled"]
    argv = ["results", flag, *values, "--out", str(tmp_path / "runs"),
            "--results-json", str(tmp_path / "r.json")]  # fmt: skip
    assert experiment("adaptive_depth").main(argv) == 2
    assert "is named twice" in capsys.readouterr().err


@pytest.mark.parametrize("key", ["probs", "val", "depths"])
def test_a_fixed_depth_cache_whose_arrays_were_changed_is_trained_again(
    experiment, tmp_path, capsys, key
):
    """A cache with its tag kept but an array cut short is trained again: read as this run's, the
    study would fail in NumPy ("operands could not be broadcast together")."""

    fixed_runs = experiment("heterophily").fixed_runs
    ds = pg.load_dataset(str(_benchmark_file(tmp_path / "b.npz")), split=0)
    cfg = pg.Config.decoupled(min_depth=0, max_depth=1, epochs=3)
    fixed = fixed_runs.fixed_depths(ds, cfg, 1, tmp_path / "f")
    cache = fixed_runs.cache_path(tmp_path / "f", cfg, 1)
    with np.load(cache) as z:
        arrays = dict(z)
    arrays[key] = arrays[key][:1]
    np.savez(cache, **arrays)
    again = fixed_runs.fixed_depths(ds, cfg, 1, tmp_path / "f")
    assert f"{cache} could not be read" in capsys.readouterr().err
    for name in ("probs", "val", "test", "depths"):
        np.testing.assert_array_equal(again[name], fixed[name])


def test_a_damaged_saved_policy_run_names_a_fix_that_works(experiment, tmp_path):
    """A damaged saved policy run names a fix that works (delete the run, or pass --overwrite, which
    gets past it), not "Save the fit again", which a study's user cannot do."""
    het, args, run, ds, cfg_m = _hand_edit_a_saved_policy_run(experiment, tmp_path)
    with pytest.raises(pg.CheckpointError) as caught:
        het.fit_or_load(run, ds, cfg_m, "policy-gnn", 1)
    assert f"Delete {run}" in str(caught.value) and "--overwrite" in str(caught.value)
    fitted = het.fit_or_load(run, ds, cfg_m, "policy-gnn", 1, overwrite=True)
    assert pg.load(run).record["test_metric"] == fitted.record["test_metric"]


def test_fixed_depth_runs_of_another_depth_range_are_kept_beside_these(experiment, tmp_path):
    """Fixed-depth runs of another depth range are kept beside these: with one `fixed.npz` per split
    folder, whatever the depth range or seeds, a study at another --max-depth would replace the
    other's runs without a word."""

    fixed_runs = experiment("heterophily").fixed_runs
    ds = pg.load_dataset(str(_benchmark_file(tmp_path / "b.npz")), split=0)
    shallow = pg.Config.decoupled(min_depth=0, max_depth=1, epochs=3)
    first = fixed_runs.fixed_depths(ds, shallow, 1, tmp_path / "f")
    fixed_runs.fixed_depths(ds, pg.Config.decoupled(min_depth=0, max_depth=2, epochs=3), 1,
                            tmp_path / "f")  # fmt: skip
    assert len(list((tmp_path / "f").glob("fixed*.npz"))) == 2
    again = fixed_runs.fixed_depths(ds, shallow, 1, tmp_path / "f")
    np.testing.assert_array_equal(again["probs"], first["probs"])


def test_fixed_depth_runs_of_another_config_are_not_replaced_unasked(experiment, tmp_path):
    fixed_runs = experiment("heterophily").fixed_runs
    ds = pg.load_dataset(str(_benchmark_file(tmp_path / "b.npz")), split=0)
    fixed_runs.fixed_depths(ds, pg.Config.decoupled(min_depth=0, max_depth=1, epochs=3), 1,
                            tmp_path / "f")  # fmt: skip
    (cache,) = (tmp_path / "f").glob("fixed*.npz")
    before = cache.read_bytes()
    other = pg.Config.decoupled(min_depth=0, max_depth=1, epochs=4)
    with pytest.raises(pg.CheckpointError, match="--overwrite"):
        fixed_runs.fixed_depths(ds, other, 1, tmp_path / "f")
    assert cache.read_bytes() == before
    fixed_runs.fixed_depths(ds, other, 1, tmp_path / "f", overwrite=True)
    assert cache.read_bytes() != before


def test_a_folder_where_the_fixed_depth_cache_goes_is_refused_before_training(
    experiment, tmp_path, monkeypatch
):
    """A folder where the fixed-depth cache goes is refused ahead of training, not after the runs
    with "cannot write ... free some space"."""
    fixed_runs = experiment("heterophily").fixed_runs
    ds = pg.load_dataset(str(_benchmark_file(tmp_path / "b.npz")), split=0)
    cfg = pg.Config.decoupled(min_depth=0, max_depth=1, epochs=3)
    fixed_runs.fixed_depths(ds, cfg, 1, tmp_path / "f")
    (cache,) = (tmp_path / "f").glob("fixed*.npz")
    cache.unlink()
    cache.mkdir()
    monkeypatch.setattr(fixed_runs.split_sweep, "fit_splits", lambda *a, **k: 1 / 0)
    with pytest.raises(pg.CheckpointError, match="is a folder"):
        fixed_runs.fixed_depths(ds, cfg, 1, tmp_path / "f")


def test_options_says_which_of_the_studys_flags_it_does_not_use(experiment, tmp_path, capsys):
    """`options --episodes 7 --skip random` says options does not use them, rather than run as if
    they were not there."""
    need("texas")
    het = experiment("heterophily")
    argv = ["options", "--datasets", "texas", "--data-dir", str(HETEROPHILY_DIR), "--seeds", "1",
            "--max-depth", "0", "--num-splits", "1", "--options", "plain", "ego",
            "--episodes", "7", "--skip", "random", "--out", str(tmp_path / "runs"),
            "--options-json", str(tmp_path / "o.json"), "--results-json", str(tmp_path / "r.json"),
            "--figure", str(tmp_path / "f.png")]  # fmt: skip
    assert het.main(argv) == 0
    err = capsys.readouterr().err
    assert "--episodes" in err and "--skip" in err and "not used" in err
    # and the study's own files (these are still checked: a bad one refuses `options` too)
    assert "--results-json" in err and "--figure" in err


def test_a_name_given_twice_to_the_decoupled_tuning_is_refused(tmp_path):
    argv = [sys.executable, "experiments/tune_decoupled.py", "--datasets", "texas", "texas",
            "--out", str(tmp_path / "t.json")]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "twice" in done.stderr, done.stderr


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["results", "--backbone", "gcn-readout"], "--backbone"),
        (["ablate", "--results-json", "x.json"], "--results-json"),
    ],
)
def test_adaptive_depth_says_which_flags_a_command_does_not_read(
    experiment, monkeypatch, capsys, tmp_path, argv, flag
):
    adaptive = experiment("adaptive_depth")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(adaptive, argv[0], lambda args: None)  # the warning, not the run
    files = ["--ablation-json", "a.json", "--out", "o"]
    files += [] if "--results-json" in argv else ["--results-json", "r.json"]
    adaptive.main([*argv, "--datasets", "cora", *files])
    assert f"{flag} is not used by {argv[0]}" in capsys.readouterr().err


def test_a_second_heterophily_run_on_one_out_is_refused_before_it_trains(tmp_path):
    """--out is locked: two studies on one folder would both train everything, and the second would
    then fail with the library's "pass overwrite=True"."""
    from conftest import need
    from test_heterophily_study import _study

    need("texas")
    with locks.FolderLock(tmp_path / "runs", "output folder"):  # as a running study holds it
        done = _study(tmp_path, "options", "--options", "plain", "ego")
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "another" in lines[0] and str(os.getpid()) in lines[0], lines
    assert not (tmp_path / "options.json").exists()


def test_options_chosen_on_another_number_of_splits_are_said(experiment, capsys):
    """A number of splits that differs is said, as seeds and depth ranges that differ are."""
    het = experiment("heterophily")
    args = het.parse_args(["study", "--datasets", "texas", "--seeds", "3", "--max-depth", "4",
                           "--num-splits", "3"])  # fmt: skip
    het._warn_if_chosen_otherwise("texas", {"seeds": 3, "max_depth": 4, "num_splits": 2}, args)
    err = capsys.readouterr().err
    assert "warning:" in err and "num_splits 2" in err, err
    het._warn_if_chosen_otherwise("texas", {"seeds": 3, "max_depth": 4, "num_splits": 3}, args)
    assert capsys.readouterr().err == ""


def test_the_options_command_makes_no_folder_for_the_studys_files(experiment, tmp_path):
    """`heterophily.py options` leaves no empty docs/figures or docs/results in the working folder:
    folders for the study's files, which options never writes."""
    heterophily = experiment("heterophily")
    args = heterophily.parse_args(
        ["options", "--datasets", "texas", "--out", str(tmp_path / "o"),
         "--options-json", str(tmp_path / "o.json"),
         "--results-json", str(tmp_path / "r" / "h.json"),
         "--figure", str(tmp_path / "f" / "d.png")]
    )  # fmt: skip
    heterophily.check_outputs(args)
    assert not (tmp_path / "r").exists() and not (tmp_path / "f").exists()
