"""Findings left over from the nineteenth adversarial pass and of the twentieth. Each a test
that failed before its fix."""

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _gpu_check(cwd, *extra):
    argv = [sys.executable, str(ROOT / "experiments" / "gpu_check.py"), "--steps",
            "readme_twice", "--episodes", "1", "--seeds", "1", "--budget-s", "120",
            *extra]  # fmt: skip
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_gpu_check_takes_the_data_folder_its_missing_file_message_names(tmp_path):
    """Before: a Planetoid graph missing from the data folder was refused with "pass
    --data-dir", a flag the GPU check did not have. It now has one, relative to where it was
    started, and its steps read that folder."""
    (tmp_path / "empty").mkdir()
    done = _gpu_check(tmp_path, "--dataset", "cora", "--data-dir", "empty", "--out", "gc.json")
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    assert str(tmp_path / "empty") in lines[0], lines
    said = json.loads((tmp_path / "gc.json").read_text())
    argv = said["steps"]["readme_twice"]["runs"][0]["argv"]
    assert argv[argv.index("--data-dir") + 1] == str(tmp_path / "empty")


def test_the_gpu_check_refuses_a_data_folder_given_as_a_url(tmp_path):
    done = _gpu_check(tmp_path, "--data-dir", "gs://bucket/planetoid", "--out", "gc.json")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "remote" in lines[0], lines
    assert not any(tmp_path.iterdir())


def test_a_fit_is_not_saved_over_a_sweeps_checkpoint_folder(tmp_path, small_dataset):
    """Before: a `--splits` sweep's `--checkpoint-dir` holds one checkpoint folder per split
    (`split-K/`), and `Fit.save` into the folder above them was accepted, mixing a result into
    the checkpoints a resumed sweep reads."""
    import policy_gnn_jax as pg

    config = pg.Config.tiny(num_episodes=2)
    fitted = pg.fit(small_dataset, config, seeds=1, progress=False,
                    checkpoint_dir=tmp_path / "ckpt" / "split-0")  # fmt: skip
    with pytest.raises(pg.CheckpointError, match="checkpoint"):
        fitted.save(tmp_path / "ckpt")
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["split-0"]


def test_the_gpu_check_never_writes_over_a_saved_fits_file(tmp_path, small_dataset):
    """Before: `--out FIT/results.json --overwrite` wrote the report over the fit's file, and
    the fit no longer loaded."""
    import policy_gnn_jax as pg

    pg.fit(small_dataset, pg.Config.tiny(), method="gcn", seeds=1, progress=False).save(
        tmp_path / "fit"
    )
    before = {p.name: p.read_bytes() for p in (tmp_path / "fit").iterdir()}
    for name in ("results.json", "fit.json"):
        done = _gpu_check(tmp_path, "--out", f"fit/{name}", "--overwrite", "--dataset", "nosuch")
        assert done.returncode == 2, done.stderr[-2000:]
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "saved fit" in lines[0], lines
    assert {p.name: p.read_bytes() for p in (tmp_path / "fit").iterdir()} == before


def test_a_second_gpu_check_on_the_same_report_is_refused_while_the_first_runs(tmp_path):
    """Before: two checks on one --out both ended with exit 0, and one report was lost."""
    import fcntl
    import os

    lock = tmp_path / "gc.json.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    os.write(fd, b"12345")
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running check holds it
    try:
        done = _gpu_check(tmp_path, "--out", "gc.json", "--dataset", "nosuch")
    finally:
        os.close(fd)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "12345" in lines[0], lines
    assert not (tmp_path / "gc.json").exists()
