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
    cache = fixed_runs.cache_path(tmp_path / "f", cfg, 1)
    with np.load(cache) as z:
        arrays = dict(z)
    arrays[key] = arrays[key][:1]
    np.savez(cache, **arrays)
    again = fixed_runs.fixed_depths(ds, cfg, 1, tmp_path / "f")
    assert f"{cache} could not be read" in capsys.readouterr().err
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


def _with_boundary(tmp_path, name, train_end):
    """A one-split benchmark file: train 0..train_end-1, val train_end..139, test 140..182."""
    import numpy as np

    with np.load(HETEROPHILY_DIR / "texas.npz") as z:
        arrays = {k: z[k] for k in ("node_features", "node_labels", "edges")}
    n = len(arrays["node_labels"])
    masks = {part: np.zeros((1, n), bool) for part in ("train", "val", "test")}
    masks["train"][0, :train_end], masks["val"][0, train_end:140] = True, True
    masks["test"][0, 140:] = True
    np.savez(tmp_path / name, **arrays, **{f"{k}_masks": m for k, m in masks.items()})
    return tmp_path / name


def test_moving_the_boundary_between_two_parts_of_a_split_changes_the_fingerprint(tmp_path):
    """Before: the ids of train, val and test were hashed back to back without their lengths,
    so train 0..99 / val 100..139 and train 0..59 / val 60..139 had one fingerprint: a saved
    split (and a checkpoint) of the one was reused for the other."""
    _need("texas.npz")
    wide = pg.load_dataset(str(_with_boundary(tmp_path, "a.npz", 100)), split=0)
    narrow = pg.load_dataset(str(_with_boundary(tmp_path, "b.npz", 60)), split=0)
    assert wide.fingerprint() != narrow.fingerprint()
    assert wide.legacy_fingerprint() == narrow.legacy_fingerprint()  # what was ambiguous


def test_a_saved_split_of_other_part_sizes_is_not_reused(tmp_path, capsys):
    _need("texas.npz")
    graph = _with_boundary(tmp_path, "blocks.npz", 100)
    argv = ["--dataset", str(graph), "--splits", "0", "--method", "gcn", "--epochs", "3",
            "--seeds", "1", "--no-progress", "--out", str(tmp_path / "o")]  # fmt: skip
    assert cli.main(argv) == 0
    (tmp_path / "o" / "results.json").unlink()  # as an interrupted sweep leaves it
    _with_boundary(tmp_path, "blocks.npz", 60)
    assert cli.main(argv) == 2
    assert "split-0 already holds" in capsys.readouterr().err


def test_a_fit_saved_with_a_fingerprint_of_before_still_loads(tmp_path, small_dataset):
    fitted = pg.fit(small_dataset, pg.Config.tiny(), method="gcn", seeds=1, progress=False)
    fitted.save(tmp_path / "f")
    meta = json.loads((tmp_path / "f" / "fit.json").read_text())
    meta["dataset_fingerprint"] = small_dataset.legacy_fingerprint()  # as saved then
    (tmp_path / "f" / "fit.json").write_text(json.dumps(meta))
    assert pg.load(tmp_path / "f").record["test_accuracy"] == fitted.record["test_accuracy"]


def test_a_checkpoint_of_the_fingerprint_of_before_is_named_as_such(tmp_path, small_dataset):
    """A checkpoint written when dataset fingerprints left out the split's lengths is not
    resumed (it cannot be told from a run on other splits), and the error says so rather than
    "a checkpoint of a different run"."""
    import numpy as np

    from policy_gnn_jax.runtime import checkpoint, saved_fit

    run = (small_dataset, pg.Config.tiny(), "gcn", 1, 0)
    then = saved_fit.run_identity(*run)
    then.pop("dataset fingerprint")  # as identities were written then
    then["dataset"] = (
        f"{small_dataset.name} (fingerprint {small_dataset.legacy_fingerprint()[:12]})"
    )
    state = {"w": np.zeros((2, 2), np.float32)}
    metrics = {"val_accuracy": np.zeros((1, 1), np.float32)}
    checkpoint.Checkpointer(tmp_path / "c", "before", then).save(1, 1, state, metrics)
    now = checkpoint.Checkpointer(
        tmp_path / "c", saved_fit.run_fingerprint(*run), saved_fit.run_identity(*run)
    )
    with pytest.raises(pg.CheckpointError) as caught:
        now.restore(state, lambda units: metrics)
    assert "earlier version" in str(caught.value) and f"Delete {tmp_path / 'c'}" in str(
        caught.value
    )


def test_a_long_but_valid_file_name_is_written(tmp_path):
    """Before: the temporary file was the name plus 14 characters, so a valid name of 242 to
    255 bytes failed at the final write, after the work it was to hold."""
    from policy_gnn_jax.runtime import files

    path = tmp_path / ("a" * 250 + ".json")
    files.check_writable_file(path)
    files.atomic_write_text(path, "{}")
    assert path.read_text() == "{}"


def test_names_and_folders_too_long_to_write_under_are_refused_before_any_work(tmp_path):
    """Before: the up-front check wrote a short probe name and passed; the run then failed at
    its first real write (a 4045-byte --out lost its trained result)."""
    from policy_gnn_jax.runtime import files

    with pytest.raises(pg.CheckpointError, match="too long"):
        files.check_writable_file(tmp_path / ("a" * 256 + ".json"))
    deep = tmp_path
    while len(str(deep)) < 4000:
        deep = deep / ("d" * 200)
    with pytest.raises(pg.CheckpointError, match="shorter"):
        files.check_writable_dir(deep)


def test_a_dataset_given_by_path_has_its_runs_under_out(reproduce_module, tmp_path):
    """Before: each run folder was `out / name`; with an absolute path as the name that is the
    path itself, so the runs were written into the input's own folder of arrays (or failed
    with "choose a writable folder" for a file)."""
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


def test_fixed_depth_runs_of_another_depth_range_are_kept_beside_these(experiment, tmp_path):
    """Before: one `fixed.npz` per split folder, whatever the depth range or seeds: a study at
    another --max-depth replaced the other's runs without a word."""
    import numpy as np

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
    """Before: the runs trained, then "cannot write ... free some space"."""
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


@pytest.mark.parametrize("given", ["gs://bucket/x", "s3://b/run", "gs:/bucket/x"])
def test_a_url_given_as_a_folder_is_refused_before_any_work(tmp_path, monkeypatch, given):
    """Before: `--checkpoint-dir gs://bucket/x` was made as the local ./gs:/bucket/x, training
    ran, and the first checkpoint failed ("free some space"): orbax took it for a URL."""
    from policy_gnn_jax.runtime import files

    monkeypatch.chdir(tmp_path)
    with pytest.raises(pg.CheckpointError, match="remote"):
        files.check_writable_dir(given, "checkpoint folder")
    assert not any(tmp_path.iterdir())


def test_a_replaced_entry_leaves_no_depth_points_of_the_run_it_replaced(experiment, tmp_path):
    """Before: a study of texas without Policy-GNN (its entry replaced with --overwrite) kept
    the replaced run's depth points, and the figure still drew them."""
    import numpy as np

    from policy_gnn_jax.contrib.adaptive_depth import heterophily_table

    results = tmp_path / "r.json"
    heterophily_table.merge_points(results, {"texas": np.ones((4, 3)), "actor": np.ones((2, 3))})
    kept = heterophily_table.merge_points(results, {"texas": np.zeros((0, 3))})
    assert set(kept) == {"actor"}
    with np.load(results.with_suffix(".depths.npz")) as z:
        assert set(z.files) == {"actor"}


def test_options_says_which_of_the_studys_flags_it_does_not_use(experiment, tmp_path, capsys):
    """Before: `options --episodes 7 --skip random` ran as if they were not there, unsaid."""
    _need("texas.npz")
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
