"""Findings of the twenty-first adversarial pass. Each a test that failed before its fix."""

import fcntl
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import policy_gnn_jax as pg
from policy_gnn_jax import data
from policy_gnn_jax.runtime import checkpoint, files

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _python(*argv, cwd=ROOT):
    return subprocess.run(
        [sys.executable, *argv], cwd=cwd, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def _held(path: pathlib.Path) -> int:
    """Locks `<path>.lock` as a running script holds it; returns the descriptor."""
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT)
    os.write(fd, b"424242")
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


@pytest.mark.parametrize(
    "script",
    ["experiments/tune_decoupled.py", "benchmarks/bench_splits.py", "benchmarks/bench_compile.py",
     "benchmarks/decoupled_forms.py", "benchmarks/bench_scale.py"],
)  # fmt: skip
def test_a_script_writing_one_out_file_refuses_a_second_run_on_it(tmp_path, script):
    """Before: two runs on one --out both checked it at the start, both wrote it at the end,
    and one's result was lost (exit 0 for both)."""
    out = tmp_path / "r.json"
    fd = _held(out)
    try:
        done = _python(script, "--out", str(out))
    finally:
        os.close(fd)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "424242" in lines[-1], lines
    assert not out.exists()


def test_the_output_file_lock_is_released_for_the_next_run_of_the_same_process(tmp_path):
    out = tmp_path / "r.json"
    checkpoint.check_writable_file(out, overwrite=False)
    files.release_output_locks()
    fd = _held(out)  # another process could now take it
    os.close(fd)


def _bench_scale_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "benchmarks/bench_scale.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _scale_args(tmp_path, module):
    return module.parse_args(["--sizes", "2000", "--data-dir", str(tmp_path / "graphs"),
                              "--features", "8", "--degree", "8"])  # fmt: skip


def test_the_scale_benchmark_does_not_write_a_graph_over_a_users_files(tmp_path):
    """Before: a folder of the benchmark's graph name without a meta.json was written over
    (`write_csbm(..., overwrite=True)`), a user's features.npy with it."""
    module = _bench_scale_module()
    args = _scale_args(tmp_path, module)
    folder = tmp_path / "graphs" / "csbm-2000-f8-d8"
    folder.mkdir(parents=True)
    (folder / "features.npy").write_bytes(b"mine")
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(data.DataError, match="move"):
        module.graph_folder(2000, args)
    assert (folder / "features.npy").read_bytes() == b"mine"


def test_the_scale_benchmark_does_not_measure_another_graph_under_its_name(tmp_path):
    """Before: a 300-node graph in the folder of the 2000-node row was measured as 2000 nodes
    (then a StopIteration traceback)."""
    module = _bench_scale_module()
    args = _scale_args(tmp_path, module)
    data.write_csbm(tmp_path / "graphs" / "csbm-2000-f8-d8", num_nodes=300, num_features=8,
                    avg_degree=8, num_val=50, num_test=100)  # fmt: skip
    with pytest.raises(data.DataError, match="another graph"):
        module.graph_folder(2000, args)


def test_an_interrupted_graph_of_the_scale_benchmark_is_written_again(tmp_path):
    module = _bench_scale_module()
    args = _scale_args(tmp_path, module)
    folder = tmp_path / "graphs" / "csbm-2000-f8-d8"
    folder.mkdir(parents=True)
    np.save(folder / "features.npy", np.zeros((3, 8), np.float32))  # no meta.json: unfinished
    assert module.graph_folder(2000, args) == folder
    assert data.load_arrays(folder).num_nodes == 2000


def test_no_script_writes_over_a_file_of_a_folder_of_arrays(tmp_path):
    """Before: `bench_scale.py --out GRAPH/meta.json --overwrite` broke the graph it read."""
    folder = data.write_csbm(tmp_path / "g", num_nodes=300, num_val=50, num_test=100)
    for name in ("meta.json", "features.npy"):
        with pytest.raises(pg.CheckpointError, match="graph"):
            checkpoint.check_writable_file(folder / name, overwrite=True)
    assert data.load_arrays(folder).num_nodes == 300


def test_a_symlink_loop_as_a_folder_is_named_as_a_loop(tmp_path):
    """Before: "a link to loopB, which does not exist: create that folder"."""
    (tmp_path / "loopA").symlink_to("loopB")
    (tmp_path / "loopB").symlink_to("loopA")
    with pytest.raises(pg.CheckpointError, match="a loop of links"):
        files.check_folder_path(tmp_path / "loopA", "output folder")


def test_a_damaged_input_json_is_not_said_to_be_remade_by_deleting_it(tmp_path):
    """Before: an empty --ablation-json read by `results` was "Delete it ... to recreate it",
    which only `ablate` can."""
    path = tmp_path / "ablation.json"
    path.write_text("")
    with pytest.raises(pg.CheckpointError) as err:
        checkpoint.read_json(path, made_by="adaptive_depth.py ablate")
    assert "adaptive_depth.py ablate" in str(err.value) and "Delete it" not in str(err.value)


def test_an_array_that_is_a_link_loop_is_named_as_such(tmp_path):
    """Before: "has no labels.npy: write the folder again (overwrite=True)" for a link that
    points to itself, advice that would replace the other arrays."""
    folder = data.write_csbm(tmp_path / "g", num_nodes=300, num_val=50, num_test=100)
    (folder / "labels.npy").unlink()
    (folder / "labels.npy").symlink_to("labels.npy")
    with pytest.raises(data.DataError, match="link") as err:
        data.load_arrays(folder)
    assert "overwrite=True" not in str(err.value)


def test_the_gpu_check_protects_the_files_the_library_names(experiment):
    """gpu_check.py imports none of the library (its steps run in child processes), so it
    names a saved fit's and a graph folder's files itself: the same ones."""
    from policy_gnn_jax.data import on_disk

    gpu_check = experiment("gpu_check")
    assert gpu_check.FIT_FILES == files.FIT_FILES
    assert gpu_check.GRAPH_FILES == (on_disk.META_FILE, *on_disk.ARRAY_FILES)
