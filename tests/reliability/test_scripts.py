"""The benchmark and tool scripts: each refuses to write over a file it did not make, and
ends through the same one-line exit as the commands."""

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import HETEROPHILY_DIR, PLANETOID_DIR, need
from reliability_helpers import ROOT, hold_output_file_lock, run_python

from policy_gnn_jax import data


def _bench_scale_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "benchmarks/bench_scale.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _scale_args(tmp_path, module):
    return module.parse_args(["--sizes", "2000", "--data-dir", str(tmp_path / "graphs"),
                              "--features", "8", "--degree", "8"])  # fmt: skip


def _probe_tool(*argv, cwd):
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    tool = str(ROOT / "tools" / "probe_bad_inputs.py")
    return subprocess.run([sys.executable, tool, *argv], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)  # fmt: skip


# Small runs, so that a script that does not refuse ends soon (a test must be able to fail).
SMALL = {
    "bench_compile": ["--dataset", "csbm", "--seeds", "1", "--episodes", "1", "--settings",
                      "default"],
    "bench_scale": ["--sizes", "1600", "--engines", "full", "--episodes", "1", "--data-dir", "g"],
}  # fmt: skip


def test_every_script_leaves_through_finish():
    """Every script leaves through finish, not sys.exit(main()): after a Ctrl-C the interpreter
    would tear down under XLA's compile threads and crash (SIGSEGV) after the `error:` line."""
    scripts = [*ROOT.glob("experiments/*.py"), *ROOT.glob("benchmarks/*.py")]
    scripts.append(ROOT / "policy_gnn_jax/contrib/reproduction/command.py")
    # gpu_check.py loads no JAX itself: every step runs in a child process.
    loads_jax = [p for p in scripts if "policy_gnn_jax" in p.read_text()]
    assert len(loads_jax) >= 8
    assert [p.name for p in loads_jax if "sys.exit(main())" in p.read_text()] == []


def test_the_split_benchmark_does_not_replace_an_existing_file(tmp_path):
    """`bench_splits.py --out` does not replace an existing file, a saved fit's results.json
    included."""
    need("texas")
    out = tmp_path / "results.json"
    out.write_text('{"mine": 1}')
    argv = [sys.executable, "benchmarks/bench_splits.py", "--data-dir", str(HETEROPHILY_DIR),
            "--seeds", "1", "--splits", "2", "--out", str(out)]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr
    assert "--overwrite" in done.stderr.strip().splitlines()[-1]
    assert out.read_text() == '{"mine": 1}'


@pytest.mark.parametrize(
    "held", ["[1, 2]", '{"decoupled": {"texas": {"fixed_depth": [1]}}}', '{"gcn": 3}']
)
def test_the_forms_benchmark_refuses_a_headroom_file_of_another_shape_first(tmp_path, held):
    """A headroom file of another shape is refused first: otherwise the sweep runs, then ends in an
    AttributeError traceback with nothing written."""
    need("texas")
    headroom = tmp_path / "h.json"
    headroom.write_text(held)
    argv = [sys.executable, "benchmarks/decoupled_forms.py", "--datasets", "texas",
            "--data-dir", str(HETEROPHILY_DIR), "--seeds", "1", "--depths", "0",
            "--headroom-json", str(headroom), "--out", str(tmp_path / "o.json")]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(f"error: {headroom}")
    assert "cached depth" not in done.stdout  # refused before the sweep


def test_the_probe_tool_does_not_replace_an_earlier_table_unasked(tmp_path):
    """`--only X` over a folder holding the full table does not replace it with one row (refused
    before any probe runs)."""
    out = tmp_path / "probes"
    out.mkdir()
    (out / "probes.md").write_text("the full table\n")
    done = run_python("tools/probe_bad_inputs.py", "--data-dir", str(tmp_path), "--out", str(out),
                   "--only", "figures with no runs")  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--overwrite" in lines[0], lines
    assert (out / "probes.md").read_text() == "the full table\n"


def test_the_revision_comparer_names_a_revision_git_does_not_know_in_one_line(tmp_path):
    """A revision git does not know is one error line, not a CalledProcessError traceback."""
    done = run_python("tools/compare_revisions.py", "--before", "no-such-revision-x",
                   "--cache", str(tmp_path / "cache"))  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    assert "no-such-revision-x" in lines[0]


@pytest.mark.parametrize(
    "script",
    ["experiments/tune_decoupled.py", "benchmarks/bench_splits.py", "benchmarks/bench_compile.py",
     "benchmarks/decoupled_forms.py", "benchmarks/bench_scale.py"],
)  # fmt: skip
def test_a_script_writing_one_out_file_refuses_a_second_run_on_it(tmp_path, script):
    """A second run on one --out is refused: if both checked it at the start and both wrote it at
    the end, one's result would be lost (exit 0 for both)."""
    out = tmp_path / "r.json"
    fd = hold_output_file_lock(out)
    try:
        done = run_python(script, "--out", str(out))
    finally:
        os.close(fd)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "424242" in lines[-1], lines
    assert not out.exists()


def test_the_scale_benchmark_does_not_write_a_graph_over_a_users_files(tmp_path):
    """A folder of the benchmark's graph name without a meta.json is not written over
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
    """A 300-node graph in the folder of the 2000-node row is refused as another graph, not measured
    as 2000 nodes (then a StopIteration traceback)."""
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


@pytest.mark.parametrize("out", ["", "   "])
def test_an_empty_out_is_refused_not_ignored(experiment, capsys, out):
    """`bench_splits.py --out ""` is refused: an empty path taken for no --out would run, exit 0 and
    write nothing."""
    bench_splits = experiment("bench_splits")
    assert bench_splits.main(["--out", out, "--splits", "1", "--seeds", "1"]) == 2
    assert "empty" in capsys.readouterr().err


def test_the_probe_tool_on_a_missing_data_folder_is_one_error_line(tmp_path):
    """A missing data folder is one error line, not a FileNotFoundError traceback, exit 1, and a
    folder of two .lock files left."""
    done = _probe_tool("--data-dir", str(tmp_path / "nonexist"), "--out", "pb", "--only", "zzz",
                       cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error:") and "Traceback" not in done.stderr, done.stderr
    assert "nonexist" in done.stderr
    assert not (tmp_path / "pb").exists()


@pytest.mark.benchmark_data("cora")
def test_the_probe_tool_leaves_no_lock_files(tmp_path):
    """A run that succeeds leaves no probes.json.lock or probes.md.lock behind."""
    done = _probe_tool("--data-dir", str(PLANETOID_DIR), "--out", "pb", "--only",
                       "figures with no runs", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "pb").iterdir()) == ["probes.json", "probes.md"]


@pytest.mark.parametrize("script", ["bench_compile", "bench_scale"])
@pytest.mark.parametrize("out, said", [("", "empty"), ("bcd/", "ends in '/'")])
def test_every_benchmark_refuses_an_out_that_names_no_file(experiment, tmp_path, capsys,
                                                           monkeypatch, script, out,
                                                           said):  # fmt: skip
    """These two check --out as given: made a path first, "" would become "." ("is a folder") and
    "bcd/" a file named bcd."""
    module = experiment(script)
    monkeypatch.chdir(tmp_path)
    assert module.main([*SMALL[script], "--out", out]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "bcd").exists()


@pytest.mark.parametrize(
    "script, argv, named",
    [
        ("bench_compile", ["--sizes", "0", "--settings"], "--sizes 0"),
        ("bench_scale", ["--sizes", "100"], "--sizes 100"),
        ("bench_splits", ["--dataset", "texas", "--splits", "99"], "--splits 99"),
        ("bench_splits", ["--dataset", "cora"], "no fixed splits"),
    ],
)
def test_a_benchmarks_bad_size_or_split_names_its_flag(experiment, tmp_path, capsys, script,
                                                       argv, named):  # fmt: skip
    assert experiment(script).main([*argv, "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and named in err[0], err
