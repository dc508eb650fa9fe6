"""Findings of the twenty-third adversarial pass (a file that appears during a run, outputs
that were not the run's, gpu_check's own output rules, the probe tool's exit). Each a test that
failed before its fix."""

import json
import os
import pathlib

import numpy as np
import pytest
from conftest import PLANETOID_DIR

import policy_gnn_jax as pg
from policy_gnn_jax.runtime import checkpoint, files


def test_an_out_that_appears_during_the_run_is_kept(tmp_path):
    """Before: checked absent at the start, the file another program wrote at --out meanwhile
    was replaced by the result, with exit 0."""
    out = tmp_path / "toc.json"
    checkpoint.check_writable_file(out, overwrite=False)
    out.write_text("theirs")
    try:
        with pytest.raises(pg.CheckpointError, match="rescued"):
            checkpoint.atomic_write_text(out, "ours")
    finally:
        files.release_output_locks()
    assert out.read_text() == "theirs"
    (kept,) = tmp_path.glob("toc.rescued-*.json")
    assert kept.read_text() == "ours"


def test_a_new_out_can_be_written_again_by_its_run(tmp_path):
    out = tmp_path / "r.json"
    checkpoint.check_writable_file(out, overwrite=False)
    try:
        checkpoint.atomic_write_text(out, "first")
        checkpoint.atomic_write_text(out, "second")  # a script that saves as it goes
    finally:
        files.release_output_locks()
    assert out.read_text() == "second"


ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_heterophily_study_keeps_a_users_file_at_figure(tmp_path):
    """Before: `study --figure pic.png` replaced a user's existing pic.png, unasked."""
    from policy_gnn_jax.contrib.adaptive_depth import heterophily_table

    figure = tmp_path / "pic.png"
    figure.write_text("my holiday photo")
    with pytest.raises(pg.CheckpointError, match="pic.png"):
        heterophily_table.check_files(tmp_path / "o.json", tmp_path / "r.json", ("ego",),
                                      figure=figure)  # fmt: skip
    assert figure.read_text() == "my holiday photo"


def test_a_figure_the_library_drew_is_recognised_as_its_own(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from policy_gnn_jax.contrib.adaptive_depth import heterophily_table
    from policy_gnn_jax.contrib.reproduction import figures

    fig, _ = plt.subplots()
    mark = heterophily_table.figure_mark(tmp_path / "r.json", tmp_path / "d.png")
    figures.save_figure(fig, tmp_path / "d.png", mark)
    plt.close(fig)
    heterophily_table.check_files(tmp_path / "o.json", tmp_path / "r.json", ("ego",),
                                  figure=tmp_path / "d.png")  # fmt: skip


def test_fig1_keeps_a_lone_figure_of_its_name(reproduce_module, tmp_path, capsys):
    """Before: a fig1_<dataset>.png with no .json beside it was replaced, unasked."""
    out = tmp_path / "f"
    out.mkdir()
    (out / "fig1_csbm.png").write_text("mine")
    argv = ["fig1", "--dataset", "csbm", "--seeds", "1", "--preset", "tiny", "--out", str(out)]
    assert reproduce_module.main(argv) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "fig1_csbm.png").read_text() == "mine"


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "slash"])
def test_the_gpu_check_follows_the_output_rules_of_the_other_scripts(experiment, tmp_path, kind):
    """Before: gpu_check.py wrote a symlinked --out as a plain file (its target kept the old
    report), one name of a hard-linked file, and `--out dir/` as a file `dir`."""
    gpu_check = experiment("gpu_check")
    real = tmp_path / "real.json"
    real.write_text("precious")
    out = tmp_path / "out.json"
    if kind == "symlink":
        out.symlink_to(real)
    elif kind == "hardlink":
        os.link(real, out)
    said = gpu_check._unwritable(f"{tmp_path}/d/" if kind == "slash" else str(out), True)
    assert isinstance(said, str), said
    assert real.read_text() == "precious" and not (tmp_path / "d").exists()


def _probe_tool(*argv, cwd):
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    tool = str(ROOT / "tools" / "probe_bad_inputs.py")
    return subprocess.run([sys.executable, tool, *argv], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)  # fmt: skip


def test_the_probe_tool_on_a_missing_data_folder_is_one_error_line(tmp_path):
    """Before: a FileNotFoundError traceback, exit 1, and a folder of two .lock files left."""
    done = _probe_tool("--data-dir", str(tmp_path / "nonexist"), "--out", "pb", "--only", "zzz",
                       cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error:") and "Traceback" not in done.stderr, done.stderr
    assert "nonexist" in done.stderr
    assert not (tmp_path / "pb").exists()


def test_the_probe_tool_leaves_no_lock_files(tmp_path):
    """Before: probes.json.lock and probes.md.lock stayed after a run that succeeded."""
    done = _probe_tool("--data-dir", str(PLANETOID_DIR), "--out", "pb", "--only", "zzz",
                       cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "pb").iterdir()) == ["probes.json", "probes.md"]


# Small runs, so that a script that does not refuse ends soon (a test must be able to fail).
SMALL = {
    "bench_compile": ["--dataset", "csbm", "--seeds", "1", "--episodes", "1", "--settings",
                      "default"],
    "bench_scale": ["--sizes", "1600", "--engines", "full", "--episodes", "1", "--data-dir", "g"],
}  # fmt: skip


@pytest.mark.parametrize("script", ["bench_compile", "bench_scale"])
@pytest.mark.parametrize("out, said", [("", "empty"), ("bcd/", "ends in '/'")])
def test_every_benchmark_refuses_an_out_that_names_no_file(experiment, tmp_path, capsys,
                                                           monkeypatch, script, out,
                                                           said):  # fmt: skip
    """Before: these two made --out a path first: "" became "." ("is a folder") and "bcd/" a
    file named bcd."""
    module = experiment(script)
    monkeypatch.chdir(tmp_path)
    assert module.main([*SMALL[script], "--out", out]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "bcd").exists()


def test_a_link_to_nowhere_in_place_of_a_result_is_a_result(tmp_path):
    """Before: a dangling results.json link in --out was replaced without --overwrite (exists()
    follows the link; its result may be on a disk not mounted now)."""
    from policy_gnn_jax.runtime import outputs

    (tmp_path / "results.json").symlink_to("/nonexistent/old_results.json")
    with pytest.raises(pg.CheckpointError, match="--overwrite"):
        outputs.check_no_result(tmp_path, False, "--overwrite")


def _graph(features):
    return pg.from_arrays(features, [[0, 1, 2], [1, 2, 3]], np.arange(60) % 2, [0, 1], [2, 3],
                          [4, 5], symmetrise=True)  # fmt: skip


def test_masked_features_are_refused(tmp_path):
    """Before: the mask was dropped and the masked values used as features."""
    features = np.ma.masked_array(np.ones((60, 2)), mask=np.zeros((60, 2), bool))
    features.mask[0, 0] = True
    with pytest.raises(pg.data.InvalidDatasetError, match="masked"):
        _graph(features)


def test_whole_float64_numbers_float32_rounds_are_counted():
    """Before: 2.0**24 + 1 as float64 became 16777216 with no warning, while the same value as
    an int64 is counted."""
    features = np.ones((60, 2))
    features[0, 0] = 2.0**24 + 1
    with pytest.warns(UserWarning, match="1 feature value"):
        _graph(features)


def test_a_benchmark_files_edge_id_beyond_its_nodes_is_named(tmp_path):
    """Before: "edge endpoint outside 0..182", without the id."""
    with pytest.raises(pg.data.InvalidDatasetError, match="4294967299"):
        pg.data.symmetric_edges(np.array([2**32 + 3, 1]), np.array([0, 2]), 183)


def test_the_gpu_checks_report_keeps_a_file_that_appeared_during_the_check(experiment, tmp_path,
                                                                            capsys):  # fmt: skip
    gpu_check = experiment("gpu_check")
    out = tmp_path / "k.json"
    out.write_text("theirs")  # after the check found no file there
    went = gpu_check.write(out, {"steps": {}}, overwrite=False)
    assert out.read_text() == "theirs" and went != out
    assert json.loads(went.read_text()) == {"steps": {}}
    assert str(went) in capsys.readouterr().err
    assert gpu_check.write(went, {"steps": {"a": 1}}, overwrite=False) == went  # its own now


def test_a_fit_of_the_format_before_manifests_loads_with_a_warning(tmp_path):
    """Before: editing fit.json's "format" to 1 turned its manifest off without a word, and
    another fit's snapshots.npz then loaded silently."""
    ds = pg.data.make_csbm(num_nodes=200, num_val=40, num_test=60)
    fitted = pg.fit(ds, pg.Config.tiny(epochs=2), method="gcn", seeds=1, progress=False)
    fitted.save(tmp_path / "f")
    meta = json.loads((tmp_path / "f" / "fit.json").read_text())
    meta["format"] = 1
    for key in ("files", "run_fingerprint"):
        meta.pop(key)
    (tmp_path / "f" / "fit.json").write_text(json.dumps(meta))
    with pytest.warns(UserWarning, match="cannot be checked"):
        pg.load(tmp_path / "f")


def test_the_committed_study_figure_carries_the_mark():
    """The study's default --figure is redrawn by every study: drawn without the mark, it would
    be refused as a user's file."""
    from policy_gnn_jax.contrib.adaptive_depth import heterophily_table
    from policy_gnn_jax.contrib.study_shapes import is_our_figure

    figure = ROOT / "docs" / "figures" / "heterophily_depths.png"
    results = ROOT / "docs" / "results" / "heterophily.json"  # the study's defaults
    assert is_our_figure(figure, heterophily_table.figure_mark(results, figure))
