"""Findings of the seventeenth adversarial pass. Each a test that failed before its fix."""

import json
import os
import subprocess
import sys

import pytest
from test_heterophily import HETEROPHILY_DIR, _need
from test_splits import _argv, _benchmark_file

import policy_gnn_jax as pg
from policy_gnn_jax import cli
from policy_gnn_jax.cli import command
from policy_gnn_jax.runtime import outputs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_split_benchmark_does_not_replace_an_existing_file(tmp_path):
    """Before: `bench_splits.py --out` replaced any file, a saved fit's results.json included."""
    _need("texas.npz")
    out = tmp_path / "results.json"
    out.write_text('{"mine": 1}')
    argv = [sys.executable, "benchmarks/bench_splits.py", "--data-dir", str(HETEROPHILY_DIR),
            "--seeds", "1", "--splits", "2", "--out", str(out)]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr
    assert "--overwrite" in done.stderr.strip().splitlines()[-1]
    assert out.read_text() == '{"mine": 1}'


def test_a_sweep_whose_lock_is_removed_writes_no_more_in_its_folder(tmp_path, monkeypatch, capsys):
    """Before: with its lock file deleted mid-sweep, `--splits` went on writing in --out and at
    the end deleted the files of the run that had taken the folder meanwhile."""
    file = _benchmark_file(tmp_path / "bench.npz")
    out = tmp_path / "o"
    fitter, calls = command._fitter, []

    def fitter_that_loses_the_lock(args, config):
        fit = fitter(args, config)

        def wrapped(ds):
            calls.append(ds.split)
            if len(calls) == 2:  # the lock goes, and another run writes its result in `out`
                outputs.lock_path(out).unlink()
                (out / "results.json").write_text('{"another": "run"}')
            return fit(ds)

        return wrapped

    monkeypatch.setattr(command, "_fitter", fitter_that_loses_the_lock)
    argv = _argv(file, out, "--splits", "all", "--split-map", "apart")
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "lock file" in err[-1] and "rescued" in err[-1]
    assert json.loads((out / "results.json").read_text()) == {"another": "run"}
    assert not (out / "split-1").exists() and not (out / "split-2").exists()
    (rescue,) = tmp_path.glob("o.rescued-*")
    summary = json.loads((rescue / "results.json").read_text())
    assert summary["splits"] == [0, 1, 2]
    for row in summary["per_split"]:  # each split's fit is where the summary says it is
        assert pg.load(rescue / row["folder"]).record["split"] == row["split"]


@pytest.mark.parametrize(
    "variable, value, entry",
    [
        ("JAX_DEFAULT_MATMUL_PRECISION", "", ["experiments/run.py"]),
        ("JAX_ENABLE_X64", "maybe", ["-m", "policy_gnn_jax.cli"]),
        ("JAX_DEFAULT_MATMUL_PRECISION", "fastest", ["experiments/heterophily.py", "study"]),
    ],
)
def test_a_jax_variable_jax_cannot_read_is_one_line(tmp_path, variable, value, entry):
    """Before: JAX's ValueError while it was imported, as a 25-line traceback."""
    env = {**os.environ, variable: value}
    argv = [sys.executable, *entry, "--dataset" if "study" not in entry else "--datasets",
            "texas", "--out", str(tmp_path / "o")]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and variable in lines[0], lines
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("key", ["probs", "val", "depths"])
def test_a_fixed_depth_cache_whose_arrays_were_changed_is_trained_again(
    experiment, tmp_path, capsys, key
):
    """Before: a cache with its tag kept but an array cut short was read as this run's; the
    study then failed in NumPy ("operands could not be broadcast together")."""
    import numpy as np

    fixed_runs = experiment("heterophily").fixed_runs
    ds = pg.load_dataset(str(_benchmark_file(tmp_path / "b.npz")), split=0)
    cfg = pg.Config.decoupled(min_depth=0, max_depth=1, epochs=3)
    fixed = fixed_runs.fixed_depths(ds, cfg, 1, tmp_path / "f")
    with np.load(tmp_path / "f" / "fixed.npz") as z:
        arrays = dict(z)
    arrays[key] = arrays[key][:1]
    np.savez(tmp_path / "f" / "fixed.npz", **arrays)
    again = fixed_runs.fixed_depths(ds, cfg, 1, tmp_path / "f")
    assert "fixed.npz could not be read" in capsys.readouterr().err
    for name in ("probs", "val", "test", "depths"):
        np.testing.assert_array_equal(again[name], fixed[name])


def _hand_edit_a_saved_policy_run(experiment, tmp_path):
    """A study's saved Policy-GNN run (split 0 of Texas), its results.json then edited."""
    import types

    _need("texas.npz")
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
    record["test_accuracy"]["mean"] = 0.99
    (run / "results.json").write_text(json.dumps(record))
    return het, args, run, ds, cfg_m


def test_a_damaged_saved_policy_run_names_a_fix_that_works(experiment, tmp_path):
    """Before: "Save the fit again", which a study's user cannot do, and --overwrite did not
    get past it."""
    het, args, run, ds, cfg_m = _hand_edit_a_saved_policy_run(experiment, tmp_path)
    with pytest.raises(pg.CheckpointError) as caught:
        het.fit_or_load(run, ds, cfg_m, "policy-gnn", 1)
    assert f"Delete {run}" in str(caught.value) and "--overwrite" in str(caught.value)
    fitted = het.fit_or_load(run, ds, cfg_m, "policy-gnn", 1, overwrite=True)
    assert pg.load(run).record["test_accuracy"] == fitted.record["test_accuracy"]
