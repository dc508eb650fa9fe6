"""Findings of the seventh adversarial pass (interrupt lines after --overwrite and --splits,
split flags, two-class files, the heterophily study's arguments and caches, scripts' standard
output): each a test that failed before its fix."""

import importlib.util
import io
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from test_splits import _benchmark_file

import policy_gnn_jax as pg
from policy_gnn_jax import cli, data

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _args(*argv):
    return cli.build_parser().parse_args(list(argv))


def test_an_overwrite_stopped_before_its_save_is_not_called_complete(tmp_path):
    """Before: an --overwrite run stopped during training said "interrupted after the result was
    saved; it is complete" because the previous run's fit.json was there."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "fit.json").write_text("{}")
    args = _args("--out", str(out), "--overwrite")
    before = cli.result_stamp(args, out)
    assert "complete" not in cli.interrupted_line(args, out, before)
    (out / "new.json").write_text("{}")
    os.replace(out / "new.json", out / "fit.json")  # as the save publishes a new file
    assert "it is complete" in cli.interrupted_line(args, out, before)


def test_a_stopped_sweep_with_checkpoints_names_them(tmp_path):
    """Before: "nothing was saved" while <checkpoint-dir>/split-0 held checkpoints to resume."""
    (tmp_path / "ck" / "split-0" / "2").mkdir(parents=True)
    args = _args("--dataset", "x.npz", "--splits", "0-1", "--checkpoint-dir", str(tmp_path / "ck"))
    line = cli.interrupted_line(args, tmp_path / "o")
    assert str(tmp_path / "ck" / "split-0") in line and "(chunk 2)" in line, line


def test_split_and_splits_together_are_refused_even_for_split_0(tmp_path, capsys):
    file = _benchmark_file(tmp_path / "b.npz")
    argv = ["--dataset", str(file), "--splits", "1-2", "--split", "0", "--out", str(tmp_path / "o")]
    assert cli.main(argv) == 2
    assert "--split K for one split or --splits" in capsys.readouterr().err


def test_a_two_class_file_numbered_otherwise_is_refused(tmp_path):
    """Before: labels {0, 2} loaded as three classes, scored by accuracy instead of ROC AUC."""
    path = _benchmark_file(tmp_path / "b.npz", classes=2)
    with np.load(path) as z:
        arrays = dict(z)
    arrays["node_labels"] = arrays["node_labels"] * 2
    np.savez(tmp_path / "c.npz", **arrays)
    with pytest.raises(data.DataError, match=r"two classes, numbered \[0, 2\]: number them 0"):
        pg.load_dataset(str(tmp_path / "c.npz"))


def test_the_decoupled_options_message_fits_a_set_backbone():
    with pytest.raises(pg.ConfigError, match="with no --set backbone= naming another"):
        pg.Config(ego_head=True)


def _study(*argv):
    return subprocess.run([sys.executable, "experiments/heterophily.py", "study", *argv],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip


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
    (tmp_path / "f" / "fixed.npz").write_bytes(b"garbage")
    fixed = het.fixed_runs.fixed_depths(ds, cfg, 1, tmp_path / "f")
    assert fixed["probs"].shape[:2] == (2, 1)
    assert "fixed.npz could not be read" in capsys.readouterr().err
    assert (
        het.fixed_runs.fixed_depths(ds, cfg, 1, tmp_path / "f")["val"].tolist()
        == fixed["val"].tolist()
    )


class _ClosedPipe(io.StringIO):
    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self):
        raise io.UnsupportedOperation


def test_a_script_whose_output_is_closed_finishes_its_work(monkeypatch, capsys):
    """Before: only the policy-gnn command survived a closed standard output; the scripts
    (exit_status) raised BrokenPipeError and wrote nothing."""
    done = []

    def work():
        print("a table line")
        done.append(True)

    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert cli.exit_status(work) == 0
    assert done == [True]
    assert "standard output could not be written (Broken pipe)" in capsys.readouterr().err
