"""The GPU check script (experiments/gpu_check.py) run on the CPU: its arguments, its
environment and its report follow the rules of every other script."""

import fcntl
import json
import os
import subprocess
import sys

import pytest
from reliability_helpers import ROOT

from policy_gnn_jax import data


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
    """An environment JAX cannot start in is named, not a 16-line CalledProcessError traceback that
    hides the child's reason."""
    env = {**os.environ, variable: value}
    argv = [sys.executable, "experiments/gpu_check.py", "--out", str(tmp_path / "g.json"),
            "--steps", "tests", "--budget-s", "30"]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and variable in lines[0], lines
    assert not (tmp_path / "g.json").exists()


@pytest.mark.parametrize("name", ["n" * 300 + ".json"])
def test_the_gpu_check_refuses_a_report_path_it_cannot_write_in_one_line(tmp_path, name):
    done = _gpu_check(tmp_path, "--out", name)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    assert not any(tmp_path.iterdir())


def test_the_gpu_check_runs_the_graph_given_by_a_path_from_where_it_was_started(tmp_path):
    """The check's steps run from where it was started: from the repository's root, a relative path
    would name another graph (or none: "Unknown dataset")."""

    data.write_csbm(tmp_path / "gX", num_nodes=300, seed=1, num_val=50, num_test=100)
    _gpu_check(tmp_path, "--dataset", "gX", "--out", "gc.json")
    report = json.loads((tmp_path / "gc.json").read_text())
    said = json.dumps(report)
    assert str(tmp_path / "gX") in said, said[:2000]


def test_the_gpu_check_takes_the_data_folder_its_missing_file_message_names(tmp_path):
    """A Planetoid graph missing from the data folder is refused with "pass --data-dir", so the GPU
    check has that flag: it is relative to where the check was started, and its steps read that
    folder."""
    (tmp_path / "empty").mkdir()
    done = _gpu_check_from(tmp_path, "--dataset", "cora", "--data-dir", "empty", "--out", "gc.json")
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    assert str(tmp_path / "empty") in lines[0], lines
    said = json.loads((tmp_path / "gc.json").read_text())
    argv = said["steps"]["readme_twice"]["runs"][0]["argv"]
    assert argv[argv.index("--data-dir") + 1] == str(tmp_path / "empty")


def test_a_second_gpu_check_on_the_same_report_is_refused_while_the_first_runs(tmp_path):
    """A second check on one --out is refused while the first runs: otherwise both end with exit 0,
    and one report is lost."""
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


def test_the_gpu_check_refuses_an_out_that_names_a_folder(experiment, tmp_path):
    gpu_check = experiment("gpu_check")
    said = gpu_check._unwritable(f"{tmp_path}/d/", True)
    assert isinstance(said, str) and "folder" in said, said
    assert not (tmp_path / "d").exists()
