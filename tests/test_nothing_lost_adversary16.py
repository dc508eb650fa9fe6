"""Findings of the nineteenth adversarial pass. Each a test that failed before its fix."""

import json
import pathlib
import subprocess
import sys

import pytest
from test_heterophily import HETEROPHILY_DIR, _need

import policy_gnn_jax as pg

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("where", ["gs://bucket/run1", "s3://b/r", "file:///tmp/x"])
def test_a_fit_is_not_saved_to_or_loaded_from_a_url(tmp_path, monkeypatch, small_dataset, where):
    """Before: `fit.save("gs://bucket/run1")` wrote the local ./gs:/bucket/run1, and `load`
    read it back, both without a word."""
    monkeypatch.chdir(tmp_path)
    fitted = pg.fit(small_dataset, pg.Config.tiny(), method="gcn", seeds=1, progress=False)
    with pytest.raises(pg.CheckpointError, match="remote"):
        fitted.save(where)
    with pytest.raises(pg.CheckpointError, match="remote"):
        pg.load(where)
    assert not any(tmp_path.iterdir())


def _gpu_check(tmp_path, *extra, cwd=None):
    argv = [sys.executable, str(ROOT / "experiments" / "gpu_check.py"), "--steps",
            "readme_twice", "--episodes", "1", "--seeds", "1", "--budget-s", "120",
            *extra]  # fmt: skip
    return subprocess.run(argv, cwd=cwd or tmp_path, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", ["gs://b/gc.json", "n" * 300 + ".json"])
def test_the_gpu_check_refuses_a_report_path_it_cannot_write_in_one_line(tmp_path, name):
    """Before: a URL became a local folder; a name too long was an OSError traceback."""
    done = _gpu_check(tmp_path, "--out", name)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    assert not any(tmp_path.iterdir())


def test_the_gpu_check_runs_the_graph_given_by_a_path_from_where_it_was_started(tmp_path):
    """Before: its steps ran from the repository's root, where a relative path named another
    graph (or none: "Unknown dataset")."""
    from policy_gnn_jax import data

    data.write_csbm(tmp_path / "gX", num_nodes=300, seed=1, num_val=50, num_test=100)
    _gpu_check(tmp_path, "--dataset", "gX", "--out", "gc.json")
    report = json.loads((tmp_path / "gc.json").read_text())
    said = json.dumps(report)
    assert str(tmp_path / "gX") in said, said[:2000]


def test_a_benchmark_does_not_write_over_a_saved_fits_file_even_with_overwrite(
    tmp_path, small_dataset
):
    """Before: `bench_compile.py --out FIT/results.json --overwrite` broke the fit."""
    from policy_gnn_jax.runtime import files

    pg.fit(small_dataset, pg.Config.tiny(), method="gcn", seeds=1, progress=False).save(
        tmp_path / "f"
    )
    with pytest.raises(pg.CheckpointError, match="saved fit"):
        files.check_writable_file(tmp_path / "f" / "results.json", overwrite=True)
    assert pg.load(tmp_path / "f")


def test_a_fit_saved_under_a_name_too_long_is_one_library_error(tmp_path, small_dataset):
    fitted = pg.fit(small_dataset, pg.Config.tiny(), method="gcn", seeds=1, progress=False)
    with pytest.raises(pg.CheckpointError, match="too long"):
        fitted.save(tmp_path / ("f" * 300))


def test_fig1_of_other_seeds_or_seed_mode_is_not_replaced_unasked(reproduce_module, tmp_path):
    """Before: only another graph's fig1 was refused; one of other seeds was replaced, and
    --seed-mode was not used at all."""
    _need("texas.npz")
    argv = ["fig1", "--dataset", "texas", "--data-dir", str(HETEROPHILY_DIR), "--preset", "tiny",
            "--out", str(tmp_path / "f")]  # fmt: skip
    assert reproduce_module.main([*argv, "--seeds", "1", "--seed-mode", "map"]) == 0
    saved = json.loads((tmp_path / "f" / "fig1_texas.json").read_text())
    assert saved["seed_mode"] == "map" and saved["seeds"] == 1
    assert reproduce_module.main([*argv, "--seeds", "2", "--seed-mode", "map"]) == 2
    assert json.loads((tmp_path / "f" / "fig1_texas.json").read_text()) == saved


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


def test_reproduce_figures_says_the_run_flags_it_does_not_read(
    reproduce_module, tmp_path, capsys, monkeypatch
):
    """Before: `figures --seeds 3 --episodes 7` drew the 1-seed runs there without a word."""
    from policy_gnn_jax.contrib.reproduction import command

    monkeypatch.setitem(command.COMMANDS, "figures", lambda args: None)
    argv = ["figures", "--seeds", "3", "--episodes", "7", "--out", str(tmp_path / "o")]
    assert reproduce_module.main(argv) == 0
    err = capsys.readouterr().err
    assert "--seeds is not used by figures" in err and "--episodes is not used" in err
