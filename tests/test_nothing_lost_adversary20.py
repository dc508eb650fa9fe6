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


# The same pass's smaller findings: an --out that names no file, a link, or a file with two
# names; a failed run's new folder; folders made for files a command never writes.


@pytest.mark.parametrize("out", ["", "   "])
def test_an_empty_out_is_refused_not_ignored(experiment, capsys, out):
    """Before: `bench_splits.py --out ""` ran, exited 0 and wrote nothing (an empty path was
    taken for no --out)."""
    bench_splits = experiment("bench_splits")
    assert bench_splits.main(["--out", out, "--splits", "1", "--seeds", "1"]) == 2
    assert "empty" in capsys.readouterr().err


def test_an_out_ending_in_a_slash_names_a_folder_and_is_refused(tmp_path):
    """Before: `--out dir8/` wrote a file named `dir8`."""
    with pytest.raises(pg.CheckpointError, match="folder"):
        checkpoint.check_writable_file(f"{tmp_path}/dir8/", overwrite=False)
    assert not (tmp_path / "dir8").exists()


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("target", ["a-file", "nowhere"])
def test_an_out_that_is_a_symlink_is_refused_and_kept(tmp_path, overwrite, target):
    """Before: a link to nowhere was replaced without --overwrite (exists() follows the link);
    with --overwrite a link to a file became a plain file, leaving its target's old result."""
    real = tmp_path / "real.json"
    if target == "a-file":
        real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with pytest.raises(pg.CheckpointError, match="link"):
        checkpoint.check_writable_file(link, overwrite=overwrite)
    files.release_output_locks()
    assert link.is_symlink() and not (tmp_path / "link.json.lock").exists()


def test_replacing_a_file_with_two_names_is_refused(tmp_path):
    """Before: `--out hl.json --overwrite` (a hard link to a file another run held as real.json)
    got past that run's lock."""
    real = tmp_path / "real.json"
    real.write_text("{}")
    os.link(real, tmp_path / "hl.json")
    with pytest.raises(pg.CheckpointError, match="name"):
        checkpoint.check_writable_file(tmp_path / "hl.json", overwrite=True)
    files.release_output_locks()


def test_a_failed_run_removes_the_folder_its_out_made(experiment, tmp_path, capsys):
    """Before: a bad --dataset exited 2 and left the empty folder made for --out."""
    bench_splits = experiment("bench_splits")
    out = tmp_path / "new" / "deeper" / "x.json"
    argv = ["--dataset", "nosuch", "--out", str(out), "--splits", "1", "--seeds", "1"]
    assert bench_splits.main(argv) == 2
    assert "nosuch" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_the_options_command_makes_no_folder_for_the_studys_files(experiment, tmp_path):
    """Before: `heterophily.py options` left empty docs/figures and docs/results in the working
    folder: folders for the study's files, which options never writes."""
    heterophily = experiment("heterophily")
    args = heterophily.parse_args(
        ["options", "--datasets", "texas", "--out", str(tmp_path / "o"),
         "--options-json", str(tmp_path / "o.json"),
         "--results-json", str(tmp_path / "r" / "h.json"),
         "--figure", str(tmp_path / "f" / "d.png")]
    )  # fmt: skip
    heterophily.check_outputs(args)
    assert not (tmp_path / "r").exists() and not (tmp_path / "f").exists()


def test_the_command_refuses_changed_random_numbers_before_loading_data(tmp_path, capsys):
    """Before: run.py with JAX_RANDOM_SEED_OFFSET=1 loaded and described the dataset, then
    refused (the documentation says: before any data is loaded)."""
    from policy_gnn_jax.cli import command

    jax.config.update("jax_random_seed_offset", 1)
    try:
        argv = ["--dataset", "cora", "--seeds", "1", "--episodes", "1"]
        assert command.main([*argv, "--out", str(tmp_path / "o")]) == 2
    finally:
        jax.config.update("jax_random_seed_offset", 0)
    said = capsys.readouterr()
    assert "JAX_RANDOM_SEED_OFFSET" in said.err and said.out == "", said


@pytest.mark.parametrize("big", [2**63 + 5, -(2**24) - 1, 2**53 + 1])
def test_python_integers_that_float32_rounds_are_counted_in_a_list_too(big):
    """Before: a list holding 2**63+5 beside a float became float64 in numpy, and the +5 was
    lost with no warning, while an int64 array of the same value is counted."""
    rows = [[1.5, 1] for _ in range(60)]
    rows[0][1] = big
    args = ([[0, 1, 2], [1, 2, 3]], np.arange(60) % 2, [0, 1], [2, 3], [4, 5])
    with pytest.warns(UserWarning, match="1 feature value"):
        pg.from_arrays(rows, *args)


def _table_argv(out: pathlib.Path) -> list[str]:
    return ["table", "--datasets", "csbm", "--seeds", "1", "--preset", "tiny", "--out", str(out)]


def test_a_table_with_rows_of_other_datasets_is_kept(reproduce_module, tmp_path, capsys):
    """Before: a row added by hand for cornell was dropped from table3.json, unasked."""
    out = tmp_path / "o"
    out.mkdir()
    held = {"rows": {"gcn-d2": {"cornell": {"mean": 0.5, "std": 0.0}}},
            "best_fixed_depth_by_val": {}, "skipped": {}}  # fmt: skip
    (out / "table3.json").write_text(json.dumps(held))
    assert reproduce_module.main(_table_argv(out)) == 2
    assert "cornell" in capsys.readouterr().err
    assert json.loads((out / "table3.json").read_text()) == held


def test_a_table_md_without_its_json_is_kept(reproduce_module, tmp_path, capsys):
    """Before: with table3.json gone, table3.md (which may hold more rows) was rewritten."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "table3.md").write_text("| my | table |\n")
    assert reproduce_module.main(_table_argv(out)) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "table3.md").read_text() == "| my | table |\n"


def test_a_table_json_that_is_a_folder_is_refused_before_any_run(reproduce_module, tmp_path,
                                                                 capsys):  # fmt: skip
    """Before: refused only after the runs, with "free some space" as the fix."""
    out = tmp_path / "o"
    (out / "table3.json").mkdir(parents=True)
    assert reproduce_module.main(_table_argv(out)) == 2
    err = capsys.readouterr().err
    assert "folder" in err and "space" not in err, err
    assert sorted(p.name for p in out.iterdir()) == ["table3.json"]  # no run folder made
