"""Findings of the sixth adversarial pass (scripts, --splits, standard output, 64-bit JAX,
ROC AUC's splits): each a test that failed before its fix."""

import dataclasses
import os
import pathlib
import subprocess
import sys

import pytest
from test_splits import _argv, _benchmark_file

import policy_gnn_jax as pg
from policy_gnn_jax import cli, data

ROOT = pathlib.Path(__file__).resolve().parents[1]
TINY_RUN = ["experiments/run.py", "--dataset", "csbm", "--csbm-nodes", "1600", "--seeds", "1",
            "--no-progress", "--method", "gcn", "--epochs", "2"]  # fmt: skip


def _python(*argv, stdout=subprocess.PIPE, env=None):
    return subprocess.run(
        [sys.executable, *argv], cwd=ROOT, stdout=stdout, stderr=subprocess.PIPE, text=True,
        timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )  # fmt: skip


@pytest.mark.parametrize(
    "script", ["experiments/tune_decoupled.py", "benchmarks/decoupled_forms.py"]
)
def test_a_tuning_script_refuses_an_existing_out(tmp_path, script):
    """Before: it ran and replaced the file, which has no --overwrite to ask for."""
    out = tmp_path / "x.json"
    out.write_text('{"p": 1}')
    done = _python(script, "--datasets", "csbm", "--seeds", "1", "--out", str(out))
    assert done.returncode == 2 and "pass --overwrite" in done.stderr, done.stderr
    assert out.read_text() == '{"p": 1}'
    folder = _python(script, "--datasets", "csbm", "--seeds", "1", "--out", str(tmp_path))
    assert folder.returncode == 2 and "is a folder" in folder.stderr, folder.stderr


def test_an_ablation_file_that_is_no_object_is_refused_before_the_sweeps(tmp_path):
    """Before: the whole sweep ran, then `AttributeError: 'list' object has no attribute
    'update'`."""
    path = tmp_path / "a.json"
    path.write_text("[1]")
    done = _python("experiments/adaptive_depth.py", "ablate", "--datasets", "csbm", "--seeds",
                   "1", "--ablation-json", str(path), "--out", str(tmp_path / "o"))  # fmt: skip
    assert done.returncode == 2 and "a.json" in done.stderr, done.stderr
    assert not (tmp_path / "o" / "csbm").exists()


def test_every_script_leaves_through_finish():
    """Before: four scripts ended with sys.exit(main()): after a Ctrl-C the interpreter tore
    down under XLA's compile threads and crashed (SIGSEGV) after the `error:` line."""
    scripts = [*ROOT.glob("experiments/*.py"), *ROOT.glob("benchmarks/*.py")]
    scripts.append(ROOT / "policy_gnn_jax/contrib/reproduction/command.py")
    # gpu_check.py loads no JAX itself: every step runs in a child process.
    loads_jax = [p for p in scripts if "policy_gnn_jax" in p.read_text()]
    assert len(loads_jax) >= 8
    assert [p.name for p in loads_jax if "sys.exit(main())" in p.read_text()] == []


def test_a_full_or_closed_standard_output_loses_nothing(tmp_path):
    """Before: `> /dev/full` or `| head -1` ended in an OSError or BrokenPipeError traceback,
    after or before the save."""
    with open("/dev/full", "w") as full:
        done = _python(*TINY_RUN, "--out", str(tmp_path / "o"), stdout=full)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines() == [
        "warning: standard output could not be written (No space left on device); the results "
        "are in the files."
    ]
    assert pg.load(tmp_path / "o").record["method"] == "gcn"
    piped = subprocess.Popen(
        [sys.executable, *TINY_RUN, "--out", str(tmp_path / "p")], cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    piped.stdout.readline()
    piped.stdout.close()  # as `| head -1` does
    err = piped.stderr.read()
    assert piped.wait(timeout=300) == 0, err
    assert "Traceback" not in err
    assert pg.load(tmp_path / "p").record["method"] == "gcn"


def test_an_out_name_too_long_is_one_error(tmp_path, capsys):
    assert cli.main([*TINY_RUN[1:], "--out", str(tmp_path / ("x" * 300))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: File name too long") and err.count("\n") == 1


def test_64_bit_jax_is_refused():
    """Before: the run went on in 64 bits and recorded another accuracy (0.274 instead of 0.378)
    as bit-identical across processes."""
    done = _python(*TINY_RUN, "--out", "/nonexistent-never-made", env={"JAX_ENABLE_X64": "1"})
    assert done.returncode == 2 and "64-bit JAX is on" in done.stderr, done.stderr


def test_roc_auc_needs_both_classes_in_every_split():
    """Before: a test split of one class recorded a ROC AUC of 0.5."""
    ds = data.make_csbm(num_nodes=1600, num_classes=2, seed=1)
    labels = ds.labels.copy()
    labels[ds.test_index] = 0
    with pytest.raises(pg.InvalidDatasetError, match="the test nodes are all of class 0"):
        dataclasses.replace(ds, labels=labels, metric="roc_auc")


def test_a_set_replacing_either_end_of_depths_is_said(capsys):
    cli.warn_unused_flags(cli.build_parser().parse_args(["--depths", "2-4", "--set",
                                                          "max_depth=3"]))  # fmt: skip
    assert "--set max_depth=3 replaces --depths 2-4." in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--dataset", "cora", "--csbm-nodes", "5"], "--csbm-nodes is not used by --dataset cora"),
        (["--checkpoint-every", "2"], "--checkpoint-every is not used without --checkpoint-dir"),
        (["--dataset", "csbm", "--data-dir", "/tmp"], "--data-dir is not used by --dataset csbm"),
        # The same flags at their default values: given, so still said (before: silent).
        (["--dataset", "cora", "--csbm-nodes", "3000"], "--csbm-nodes is not used by --dataset"),
        (["--dataset", "planted", "--csbm-degree", "5"], "--csbm-degree is not used by --data"),
        (["--checkpoint-every", "5"], "--checkpoint-every is not used without --checkpoint-dir"),
    ],
)
def test_data_flags_that_are_not_used_are_said(capsys, argv, flag):
    cli.warn_unused_flags(cli.build_parser().parse_args(argv))
    assert flag in capsys.readouterr().err


def test_splits_with_overwrite_over_a_single_fit_leaves_no_stale_fit(tmp_path):
    """Before: the old fit.json, dataset.npz and snapshots.npz stayed beside the sweep's
    results.json, and `load` failed with a checksum error."""
    file = _benchmark_file(tmp_path / "bench.npz")
    assert cli.main(_argv(file, tmp_path / "g")) == 0
    assert cli.main(_argv(file, tmp_path / "g", "--splits", "0-1", "--overwrite")) == 0
    assert sorted(p.name for p in (tmp_path / "g").iterdir() if p.is_file()) == ["results.json"]
    with pytest.raises(pg.CheckpointError, match="sweep over splits.*split-0"):
        pg.load(tmp_path / "g")


def test_a_saved_split_of_another_seed_mode_is_not_reused(tmp_path, capsys):
    file = _benchmark_file(tmp_path / "bench.npz")
    assert cli.main(_argv(file, tmp_path / "o", "--splits", "0")) == 0
    (tmp_path / "o" / "results.json").unlink()
    again = _argv(file, tmp_path / "o", "--splits", "0", "--seed-mode", "map")
    assert cli.main(again) == 2
    err = capsys.readouterr().err
    assert "split-0 already holds" in err and "--overwrite" in err and "overwrite=True" not in err


@pytest.mark.parametrize("text", ["", " ", ","])
def test_an_empty_splits_is_refused(tmp_path, capsys, text):
    """Before: `--splits ""` ran one split as if the flag were absent."""
    file = _benchmark_file(tmp_path / "bench.npz")
    assert cli.main(_argv(file, tmp_path / "o", "--splits", text)) == 2
    assert "--splits must be" in capsys.readouterr().err


@pytest.mark.parametrize("content", ["[1, 2]", "{not json"])
def test_a_damaged_split_manifest_is_named(tmp_path, capsys, content):
    """Before: AttributeError, or a bare JSONDecodeError naming no file."""
    file = _benchmark_file(tmp_path / "bench.npz")
    (tmp_path / "o" / "split-0").mkdir(parents=True)
    (tmp_path / "o" / "split-0" / "fit.json").write_text(content)
    assert cli.main(_argv(file, tmp_path / "o", "--splits", "0")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "split-0" in err, err


def test_an_interrupt_before_the_first_split_says_nothing_was_saved(tmp_path):
    args = cli.build_parser().parse_args(["--dataset", "x.npz", "--splits", "all"])
    assert "before the first split finished" in cli.interrupted_line(args, tmp_path)
    (tmp_path / "split-0").mkdir()
    (tmp_path / "split-0" / "fit.json").write_text("{}")
    assert "finished so far are saved" in cli.interrupted_line(args, tmp_path)


def test_a_run_folder_interrupted_before_its_result_is_removed(tmp_path, monkeypatch):
    """Before: `reproduce.py table` stopped by a signal left an empty run folder."""
    from policy_gnn_jax.contrib.reproduction import runs

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runs, "_run_or_load", stopped)
    with pytest.raises(KeyboardInterrupt):
        runs.run_or_load(tmp_path / "run", None, None, "gcn", 1)
    assert not (tmp_path / "run").exists()
