"""The GPU check script (experiments/gpu_check.py) run on the CPU: its arguments, its
environment and its report follow the rules of every other script."""

import fcntl
import json
import os
import subprocess
import sys

import pytest
from reliability_helpers import ROOT, occupy_lock_path

import policy_gnn_jax as pg
from policy_gnn_jax import data
from policy_gnn_jax.runtime import files


def _gpu_check(tmp_path, *extra, cwd=None):
    argv = [sys.executable, str(ROOT / "experiments" / "gpu_check.py"), "--steps",
            "readme_twice", "--episodes", "1", "--seeds", "1", "--budget-s", "120",
            *extra]  # fmt: skip
    return subprocess.run(argv, cwd=cwd or tmp_path, capture_output=True, text=True, timeout=300)


def _gpu_check_from(cwd, *extra):
    argv = [sys.executable, str(ROOT / "experiments" / "gpu_check.py"), "--steps",
            "readme_twice", "--episodes", "1", "--seeds", "1", "--budget-s", "120",
            *extra]  # fmt: skip
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    "variable, value", [("JAX_ENABLE_X64", "maybe"), ("JAX_PLATFORMS", "cuda")]
)
def test_the_gpu_check_names_an_environment_jax_cannot_start_in(tmp_path, variable, value):
    """Before: a 16-line CalledProcessError traceback that hid the child's reason."""
    env = {**os.environ, variable: value}
    argv = [sys.executable, "experiments/gpu_check.py", "--out", str(tmp_path / "g.json"),
            "--steps", "tests", "--budget-s", "30"]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and variable in lines[0], lines
    assert not (tmp_path / "g.json").exists()


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

    data.write_csbm(tmp_path / "gX", num_nodes=300, seed=1, num_val=50, num_test=100)
    _gpu_check(tmp_path, "--dataset", "gX", "--out", "gc.json")
    report = json.loads((tmp_path / "gc.json").read_text())
    said = json.dumps(report)
    assert str(tmp_path / "gX") in said, said[:2000]


def test_the_gpu_check_takes_the_data_folder_its_missing_file_message_names(tmp_path):
    """Before: a Planetoid graph missing from the data folder was refused with "pass
    --data-dir", a flag the GPU check did not have. It now has one, relative to where it was
    started, and its steps read that folder."""
    (tmp_path / "empty").mkdir()
    done = _gpu_check_from(tmp_path, "--dataset", "cora", "--data-dir", "empty", "--out", "gc.json")
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    assert str(tmp_path / "empty") in lines[0], lines
    said = json.loads((tmp_path / "gc.json").read_text())
    argv = said["steps"]["readme_twice"]["runs"][0]["argv"]
    assert argv[argv.index("--data-dir") + 1] == str(tmp_path / "empty")


def test_the_gpu_check_refuses_a_data_folder_given_as_a_url(tmp_path):
    done = _gpu_check_from(tmp_path, "--data-dir", "gs://bucket/planetoid", "--out", "gc.json")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "remote" in lines[0], lines
    assert not any(tmp_path.iterdir())


def test_the_gpu_check_never_writes_over_a_saved_fits_file(tmp_path, small_dataset):
    """Before: `--out FIT/results.json --overwrite` wrote the report over the fit's file, and
    the fit no longer loaded."""

    pg.fit(small_dataset, pg.Config.tiny(), method="gcn", seeds=1, progress=False).save(
        tmp_path / "fit"
    )
    before = {p.name: p.read_bytes() for p in (tmp_path / "fit").iterdir()}
    for name in ("results.json", "fit.json"):
        done = _gpu_check_from(
            tmp_path, "--out", f"fit/{name}", "--overwrite", "--dataset", "nosuch"
        )
        assert done.returncode == 2, done.stderr[-2000:]
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "saved fit" in lines[0], lines
    assert {p.name: p.read_bytes() for p in (tmp_path / "fit").iterdir()} == before


def test_a_second_gpu_check_on_the_same_report_is_refused_while_the_first_runs(tmp_path):
    """Before: two checks on one --out both ended with exit 0, and one report was lost."""
    import os

    lock = tmp_path / "gc.json.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    os.write(fd, b"12345")
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running check holds it
    try:
        done = _gpu_check_from(tmp_path, "--out", "gc.json", "--dataset", "nosuch")
    finally:
        os.close(fd)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "12345" in lines[0], lines
    assert not (tmp_path / "gc.json").exists()


def test_the_gpu_check_protects_the_files_the_library_names(experiment):
    """gpu_check.py imports none of the library (its steps run in child processes), so it
    names a saved fit's and a graph folder's files itself: the same ones."""
    from policy_gnn_jax.data import on_disk

    gpu_check = experiment("gpu_check")
    assert gpu_check.FIT_FILES == files.FIT_FILES
    assert gpu_check.GRAPH_FILES == (on_disk.META_FILE, *on_disk.ARRAY_FILES)


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "users-file"])
def test_the_gpu_checks_lock_keeps_what_is_not_a_lock_file(experiment, tmp_path, kind):
    gpu_check = experiment("gpu_check")
    mine, lock = occupy_lock_path(tmp_path / "k.json.lock", kind)
    before = lock.read_bytes()
    said = gpu_check._lock_report(tmp_path / "k.json")
    assert isinstance(said, str) and "lock" in said, said
    assert mine.read_text() == "precious" and lock.read_bytes() == before


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


def test_the_gpu_check_refuses_an_out_named_like_a_lock_file(experiment):
    gpu_check = experiment("gpu_check")
    assert isinstance(gpu_check._unwritable("g.json.lock", True), str)
