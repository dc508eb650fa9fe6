"""Findings of the twenty-second adversarial pass (the output-file lock, the report check, a
prediction under changed JAX settings). Each a test that failed before its fix."""

import json
import os
import pathlib

import jax
import numpy as np
import pytest

import policy_gnn_jax as pg
from policy_gnn_jax.runtime import checkpoint, files

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _occupy(lock: pathlib.Path, kind: str) -> tuple[pathlib.Path, pathlib.Path]:
    """A user's file `mine.txt` beside `lock`, and `lock` made a symlink or a hard link to it,
    or a user's own file of that name."""
    mine = lock.with_name("mine.txt")
    mine.write_text("precious")
    if kind == "symlink":
        lock.symlink_to(mine)
    elif kind == "hardlink":
        os.link(mine, lock)
    else:
        lock.write_text("my notes")
    return mine, lock


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "users-file"])
def test_a_lock_name_that_is_not_a_lock_file_is_refused_and_kept(tmp_path, kind):
    """Before: `<out>.lock` as a link to a user's file, a hard link to one, or a user's own
    file of that name was written with a process id (and removed at the end)."""
    mine, lock = _occupy(tmp_path / "r.json.lock", kind)
    before = lock.read_bytes()
    with pytest.raises(pg.CheckpointError, match="lock"):
        checkpoint.check_writable_file(tmp_path / "r.json", overwrite=False)
    files.release_output_locks()
    assert mine.read_text() == "precious" and lock.read_bytes() == before


def test_a_stale_lock_file_of_a_killed_run_is_taken_over(tmp_path):
    (tmp_path / "r.json.lock").write_text("12345")  # its process is gone: the lock is free
    checkpoint.check_writable_file(tmp_path / "r.json", overwrite=False)
    files.release_output_locks()
    assert not (tmp_path / "r.json.lock").exists()


def test_an_out_named_like_a_lock_file_is_refused(tmp_path):
    """Before: `--out r.json.lock --overwrite` replaced another run's lock with its result."""
    with pytest.raises(pg.CheckpointError, match="lock"):
        checkpoint.check_writable_file(tmp_path / "r.json.lock", overwrite=True)


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "users-file"])
def test_the_gpu_checks_lock_keeps_what_is_not_a_lock_file(experiment, tmp_path, kind):
    gpu_check = experiment("gpu_check")
    mine, lock = _occupy(tmp_path / "k.json.lock", kind)
    before = lock.read_bytes()
    said = gpu_check._lock_report(tmp_path / "k.json")
    assert isinstance(said, str) and "lock" in said, said
    assert mine.read_text() == "precious" and lock.read_bytes() == before


@pytest.mark.parametrize("held", [{}, {"best_fixed_depth_by_val": "cora", "skipped": {}}])
def test_a_table_report_of_another_shape_is_one_error(reproduce_module, tmp_path, capsys, held):
    """Before: `{}` was a KeyError traceback; a string was split into letters ("holds c, o,
    r, a")."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "table3.json").write_text(json.dumps(held))
    argv = ["table", "--datasets", "csbm", "--seeds", "1", "--preset", "tiny", "--out", str(out)]
    assert reproduce_module.main(argv) == 2
    err = capsys.readouterr().err
    assert "--overwrite" in err and ", o, " not in err, err
    assert json.loads((out / "table3.json").read_text()) == held


def test_predicting_under_changed_random_settings_is_the_librarys_error(tmp_path, small_dataset):
    """Before: `jax.config.update('jax_default_prng_impl', 'rbg')` after `load` made predict
    raise JAX's TypeError about key data; fit refuses the same setting in one sentence."""
    fitted = pg.fit(small_dataset, pg.Config.tiny(), method="gcn", seeds=1, progress=False)
    fitted.save(tmp_path / "fit")
    loaded = pg.load(tmp_path / "fit")
    jax.config.update("jax_default_prng_impl", "rbg")
    try:
        with pytest.raises(pg.ConfigError, match="JAX_DEFAULT_PRNG_IMPL"):
            loaded.predict(np.arange(5))
    finally:
        jax.config.update("jax_default_prng_impl", "threefry2x32")
