"""Findings of the eighteenth adversarial pass. Each a test that failed before its fix."""

import json
import os
import subprocess
import sys

import pytest
from test_heterophily import HETEROPHILY_DIR, _need
from test_nothing_lost_adversary14 import ROOT, _with_boundary

import policy_gnn_jax as pg


def test_a_long_name_of_wide_characters_is_written(tmp_path):
    """Before: the temporary name kept 64 characters of the name, which for 4-byte characters
    is 256 bytes: the write failed after the work."""
    from policy_gnn_jax.runtime import files

    path = tmp_path / ("\U0001f600" * 60 + ".json")  # 245 bytes
    files.check_writable_file(path)
    files.atomic_write_text(path, "{}")
    assert path.read_text() == "{}"


def test_the_rescue_folder_of_a_long_output_name_can_be_made(tmp_path):
    """Before: `<name>.rescued-<time>-<pid>` of a 240-byte name passed the name limit, so a run
    whose lock was removed saved nothing at all."""
    from policy_gnn_jax.runtime import outputs

    rescue = outputs.rescue_folder(tmp_path / ("r" * 240))
    assert rescue.is_dir() and rescue.parent == tmp_path and ".rescued-" in rescue.name


def test_the_adaptive_depth_table_takes_no_run_of_another_graph_of_the_same_name(
    experiment, small_dataset
):
    """Before: `results --datasets g2/cora` read results/reproduce/cora, the built-in Cora's
    runs, as that graph's rows."""
    adaptive = experiment("adaptive_depth")
    record = {"config": {"backbone": "gcn"}, "seeds": 1, "dataset_fingerprint": "0" * 64}
    assert "data" in adaptive._mismatch(record, "gcn", 1, small_dataset)
    record["dataset_fingerprint"] = small_dataset.fingerprint()
    assert adaptive._mismatch(record, "gcn", 1, small_dataset) is None


@pytest.mark.parametrize("name", ["..", ".", "g/..", "/"])
def test_a_dataset_path_without_a_name_of_its_own_still_runs_under_out(tmp_path, name):
    """Before: `--datasets ..` put the runs in `out / ".."`, the folder above --out."""
    from policy_gnn_jax.contrib.reproduction import runs

    folder = runs.dataset_folder(tmp_path / "rep", name)
    assert folder.parent == tmp_path / "rep" and folder.name not in ("", ".", "..")


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


@pytest.mark.parametrize(
    "held", ["[1, 2]", '{"decoupled": {"texas": {"fixed_depth": [1]}}}', '{"gcn": 3}']
)
def test_the_forms_benchmark_refuses_a_headroom_file_of_another_shape_first(tmp_path, held):
    """Before: the sweep ran, then an AttributeError traceback; nothing was written."""
    _need("texas.npz")
    headroom = tmp_path / "h.json"
    headroom.write_text(held)
    argv = [sys.executable, "benchmarks/decoupled_forms.py", "--datasets", "texas",
            "--data-dir", str(HETEROPHILY_DIR), "--seeds", "1", "--depths", "0",
            "--headroom-json", str(headroom), "--out", str(tmp_path / "o.json")]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(f"error: {headroom}")
    assert "cached depth" not in done.stdout  # refused before the sweep


def _as_saved_before(folder, ds, method="gcn", seeds=1, seed=0):
    """Rewrites a saved fit's fit.json as the version before the parts' sizes were hashed
    wrote it: both fingerprints made from the legacy dataset fingerprint."""
    import hashlib

    from policy_gnn_jax.runtime import saved_fit

    meta = json.loads((folder / "fit.json").read_text())
    meta["dataset_fingerprint"] = ds.legacy_fingerprint()
    parts = [ds.legacy_fingerprint(), meta["config"], method, seeds, seed, ds.num_classes]
    meta["run_fingerprint"] = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    assert (
        saved_fit.run_fingerprint(ds, meta["config"], method, seeds, seed)
        != meta["run_fingerprint"]
    )
    (folder / "fit.json").write_text(json.dumps(meta))


def test_a_fit_saved_before_the_sizes_were_hashed_loads_and_is_reused(tmp_path, small_dataset):
    """Before: its run fingerprint (made from the older dataset fingerprint) was compared with
    today's only: "results.json and fit.json describe different runs"."""
    from policy_gnn_jax import methods
    from policy_gnn_jax.runtime import saved_fit

    cfg = pg.Config.tiny()
    fitted = pg.fit(small_dataset, cfg, method="gcn", seeds=1, progress=False)
    fitted.save(tmp_path / "f")
    _as_saved_before(tmp_path / "f", small_dataset)
    assert pg.load(tmp_path / "f").record["test_accuracy"] == fitted.record["test_accuracy"]
    prepared = methods.get("gcn").prepare(cfg)
    found = saved_fit.saved_record_of(tmp_path / "f", small_dataset, prepared, "gcn", 1, 0, "vmap")
    assert found is not None


def test_a_fit_saved_before_is_not_reused_for_parts_of_other_sizes(tmp_path):
    _need("texas.npz")
    from policy_gnn_jax import methods
    from policy_gnn_jax.runtime import saved_fit

    wide = pg.load_dataset(str(_with_boundary(tmp_path, "a.npz", 100)), split=0)
    narrow = pg.load_dataset(str(_with_boundary(tmp_path, "b.npz", 60)), split=0)
    cfg = pg.Config.decoupled(min_depth=0, max_depth=1, epochs=3)
    pg.fit(wide, cfg, method="gcn", seeds=1, progress=False).save(tmp_path / "f")
    _as_saved_before(tmp_path / "f", wide)
    prepared = methods.get("gcn").prepare(cfg)
    assert saved_fit.saved_record_of(tmp_path / "f", wide, prepared, "gcn", 1, 0, "vmap")
    assert saved_fit.saved_record_of(tmp_path / "f", narrow, prepared, "gcn", 1, 0, "vmap") is None


def test_fig1_of_another_graph_of_the_same_name_is_not_replaced_unasked(
    reproduce_module, tmp_path, monkeypatch
):
    """Before: two folders of arrays both named csbm: the second fig1 replaced the first's
    fig1_csbm.{png,json} without a word."""
    from policy_gnn_jax import data

    for where, seed in (("g", 0), ("g4", 3)):
        data.write_csbm(tmp_path / where, num_nodes=300, seed=seed, num_val=50, num_test=100)
    argv = ["fig1", "--seeds", "1", "--preset", "tiny", "--out", str(tmp_path / "f")]
    assert reproduce_module.main([*argv, "--dataset", str(tmp_path / "g")]) == 0
    first = (tmp_path / "f" / "fig1_csbm.json").read_bytes()
    assert json.loads(first)["dataset_fingerprint"]
    assert reproduce_module.main([*argv, "--dataset", str(tmp_path / "g4")]) == 2
    assert (tmp_path / "f" / "fig1_csbm.json").read_bytes() == first
    assert reproduce_module.main([*argv, "--dataset", str(tmp_path / "g")]) == 0  # its own: redrawn


@pytest.mark.parametrize(
    "what, flag, value", [("fig1", "--datasets", "citeseer"), ("table", "--dataset", "citeseer")]
)
def test_reproduce_says_which_dataset_flag_a_command_does_not_read(
    reproduce_module, tmp_path, capsys, monkeypatch, what, flag, value
):
    """Before: `fig1 --datasets citeseer` ran Cora without a word."""
    from policy_gnn_jax.contrib.reproduction import command

    monkeypatch.setitem(command.COMMANDS, what, lambda args: None)  # the warning, not the run
    argv = [what, flag, value, "--seeds", "1", "--preset", "tiny", "--out", str(tmp_path / "o")]
    assert reproduce_module.main(argv) == 0
    assert f"{flag} is not used by {what}" in capsys.readouterr().err


def test_a_url_in_a_files_folder_is_said_once(tmp_path):
    from policy_gnn_jax.runtime import files

    with pytest.raises(pg.CheckpointError) as caught:
        files.check_writable_file("gs://b/r.json")
    assert "the the" not in str(caught.value) and "gs://b" in str(caught.value)
