"""Findings of the twelfth adversarial pass (a failed --splits --overwrite, the studies' merged
results files, paths and values that meant something else, full disks): each a test that failed
before its fix."""

import argparse
import json
import subprocess
import sys

import pytest
from conftest import _experiment
from test_heterophily import HETEROPHILY_DIR, _need

import policy_gnn_jax as pg
from policy_gnn_jax import cli
from policy_gnn_jax.runtime import records

TEXAS = ["--dataset", "texas", "--data-dir", str(HETEROPHILY_DIR), "--method", "gcn", "--seeds",
         "1", "--no-progress", "--epochs", "2"]  # fmt: skip


def test_a_failed_sweep_over_a_single_fit_keeps_that_fit(tmp_path):
    """Before: --splits --overwrite removed the single fit before training, and a split that
    diverged left the folder empty."""
    _need("texas.npz")
    out = str(tmp_path / "o")
    assert cli.main([*TEXAS, "--out", out]) == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "o").iterdir() if p.is_file()}
    diverged = [*TEXAS, "--splits", "0-1", "--overwrite", "--gcn-lr", "1e30", "--out", out]
    assert cli.main(diverged) == 2
    after = {p.name: p.read_bytes() for p in (tmp_path / "o").iterdir() if p.is_file()}
    assert after == before
    assert json.loads(before["results.json"])["config"]["epochs"] == 2


def test_a_merged_entry_is_replaced_only_by_the_same_or_when_asked(tmp_path):
    old = {"texas": {"seeds": 3, "rows": [0.85, (1, 2)]}, "actor": {"seeds": 3}}
    same = {"texas": {"seeds": 3, "rows": [0.85, [1, 2]]}, "cornell": {"seeds": 1}}
    records.check_replaced_entries(old, same, "r.json", overwrite=False)  # as JSON: the same
    other = {"texas": {"seeds": 1, "rows": [0.9]}}
    with pytest.raises(pg.CheckpointError, match="r.json already holds texas from another run"):
        records.check_replaced_entries(old, other, "r.json", overwrite=False)
    records.check_replaced_entries(old, other, "r.json", overwrite=True)


def _row(dataset, backbone, method, test):
    return {"dataset": dataset, "backbone": backbone, "method": method, "test_accuracy": test}


def test_adaptive_depth_results_keep_the_other_datasets_records(tmp_path):
    """Before: `results --datasets cora --backbones decoupled` rewrote the whole file, from 20
    records to 3."""
    script = _experiment("adaptive_depth")
    old = {"records": [_row("cora", "gcn", "random", 0.78), _row("cora", "decoupled", "random",
                       0.80), _row("citeseer", "gcn", "random", 0.65)],
           "missing": ["citeseer/decoupled: no headroom analysis"]}  # fmt: skip
    args = argparse.Namespace(datasets=["cora"], backbones=["decoupled"], overwrite=False)
    new = [_row("cora", "decoupled", "random", 0.80)]
    merged = script.merged_records(old, new, [], tmp_path / "a.json", args)
    assert sorted(merged["records"], key=str) == sorted(old["records"], key=str)
    assert merged["missing"] == old["missing"]
    other = [_row("cora", "decoupled", "random", 0.70)]
    with pytest.raises(pg.CheckpointError, match="cora/decoupled from another run"):
        script.merged_records(old, other, [], tmp_path / "a.json", args)
    args.overwrite = True
    merged = script.merged_records(old, other, [], tmp_path / "a.json", args)
    assert len(merged["records"]) == 3 and other[0] in merged["records"]


def test_a_file_path_with_a_data_dir_is_refused_not_read_from_elsewhere(tmp_path, monkeypatch):
    """Before: load_dataset('graph.npz', data_dir=D) read ./graph.npz and ignored D."""
    _need("texas.npz")
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "graph.npz").write_bytes((HETEROPHILY_DIR / "texas.npz").read_bytes())
    monkeypatch.chdir(tmp_path / "cwd")
    with pytest.raises(pg.DataError, match="graph.npz is a file.*takes no data_dir"):
        pg.load_dataset("graph.npz", data_dir=str(tmp_path / "elsewhere"))
    assert pg.load_dataset("graph.npz").num_nodes == 183


def test_a_folder_of_arrays_named_like_an_npz_file_runs(tmp_path):
    """Before: "... takes no split (it takes: none)", though no split was given."""
    folder = pg.data.write_csbm(tmp_path / "graph.npz", num_nodes=1600, num_features=4)
    out = str(tmp_path / "o")
    argv = ["--dataset", str(folder), "--method", "gcn", "--epochs", "2", "--seeds", "1",
            "--no-progress", "--out", out]  # fmt: skip
    assert cli.main(argv) == 0
    assert json.loads((tmp_path / "o" / "results.json").read_text())["dataset"] == "csbm"


@pytest.mark.parametrize("field", ["gcn_lr", "q_lr", "weight_decay", "teleport", "dropout"])
def test_a_value_float32_rounds_to_zero_is_refused(field):
    """Before: gcn_lr=1e-50 passed "> 0" and trained with a learning rate of 0."""
    with pytest.raises(pg.ConfigError, match=f"{field} is 1e-50, which float32 .* rounds to 0"):
        pg.Config(**{field: 1e-50})
    pg.Config(**{field: 1e-30})  # small, and still itself in float32


@pytest.mark.parametrize("path", ["", "  "])
def test_an_empty_checkpoint_dir_is_refused(tmp_path, monkeypatch, path):
    """Before: checkpoint_dir="" wrote the checkpoints into the current folder."""
    monkeypatch.chdir(tmp_path)
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    with pytest.raises(pg.CheckpointError, match="checkpoint folder is an empty path"):
        pg.fit(ds, pg.Config.tiny(num_episodes=1), seeds=1, checkpoint_dir=path, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_one_field_set_twice_to_different_values_is_refused():
    """Before: `--set hidden=8 --set hidden=32` kept 32 without a word."""
    with pytest.raises(pg.ConfigError, match="--set hidden is given twice, as 8 and as 32"):
        pg.config.parse_overrides(["hidden=8", "hidden=32"])
    assert pg.config.parse_overrides(["hidden=8", "hidden= 8"]) == {"hidden": 8}


def test_a_subpackage_is_an_attribute_before_anything_else_is_used():
    """Before: `pg.data` raised AttributeError until another name had loaded it."""
    code = "import policy_gnn_jax as pg; pg.data.write_csbm; pg.metrics; print(pg.config.Config)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and "Config" in done.stdout, done.stderr[-500:]
    bad = "import policy_gnn_jax as pg; pg.nothing_here"
    done = subprocess.run([sys.executable, "-c", bad], capture_output=True, text=True)
    assert "has no attribute 'nothing_here'" in done.stderr


def test_a_refused_value_is_the_one_line_even_for_a_field_the_method_ignores(capsys):
    """Before: a warning that the field is not used, then the refusal of its value."""
    argv = ["--dataset", "csbm", "--method", "gcn", "--set", "episodes_per_call=0",
            "--show-config"]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "episodes_per_call" in err[0]


FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails, not kills
import policy_gnn_jax as pg
ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
fitted = pg.fit(ds, pg.Config.tiny(num_episodes=1), seeds=1, progress=False)
resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))  # as if the disk filled up
for name, call in [("save", lambda: fitted.save(sys.argv[1] + "/fit")),
                   ("write_csbm", lambda: pg.data.write_csbm(sys.argv[1] + "/g", num_nodes=5000))]:
    try:
        call()
    except (pg.CheckpointError, pg.DataError) as err:
        print(name, type(err).__name__, err)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE")
def test_a_full_disk_is_one_of_the_librarys_errors_naming_the_file(tmp_path):
    """Before: a bare `OSError: [Errno 27] File too large` that named no file."""
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-800:]
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith(f"save CheckpointError cannot write {tmp_path}/fit")
    assert lines[1].startswith(f"write_csbm DataError cannot write {tmp_path}/g")
    assert "File too large" in lines[0] and "nothing was replaced" in lines[0]


FULL_DISK_CHECKPOINT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails, not kills
import policy_gnn_jax as pg
ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))  # as if the disk filled up
try:
    pg.fit(ds, pg.Config.tiny(num_episodes=1), seeds=1, progress=False,
           checkpoint_dir=sys.argv[1])
except pg.CheckpointError as err:
    print("CheckpointError", err)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE")
def test_a_checkpoint_on_a_full_disk_is_one_error_and_no_traceback(tmp_path):
    """Before: orbax's ValueError, after dozens of asyncio and absl tracebacks."""
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK_CHECKPOINT, str(tmp_path / "ck")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-1500:]
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith(f"CheckpointError cannot write the checkpoint in {tmp_path / 'ck'}")
    assert "File too large" in line


@pytest.fixture
def debug_nans():
    import jax

    jax.config.update("jax_debug_nans", True)
    yield
    jax.config.update("jax_debug_nans", False)


def test_a_divergence_under_jax_debug_nans_is_the_divergence_error(debug_nans):
    """Before: JAX_DEBUG_NANS=1 turned the one-line divergence error into JAX's traceback."""
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    cfg = pg.Config.tiny(gcn_lr=1e30, epochs=3)
    with pytest.raises(pg.DivergenceError, match="JAX_DEBUG_NANS stopped the run at its first"):
        pg.fit(ds, cfg, method="gcn", seeds=1, progress=False)
