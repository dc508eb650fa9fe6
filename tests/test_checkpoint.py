"""Checkpoints: a run killed with SIGKILL resumes and ends bit-identical; a checkpoint of another
run or a damaged one is refused with a clear error."""

import json
import pathlib
import signal
import subprocess
import sys

import numpy as np
import pytest
from conftest import dies_after_first_save

import policy_gnn_jax as pg
from policy_gnn_jax.runtime import checkpoint

COMMAND = [
    sys.executable, "-m", "policy_gnn_jax.cli",
    "--dataset", "csbm", "--csbm-nodes", "1600", "--seeds", "2", "--episodes", "6",
    "--episodes-per-call", "2", "--steps-per-episode", "2", "--buffer-size", "16",
    "--no-progress",
]  # fmt: skip
COMPARED = ("test_accuracy", "val_accuracy", "val_accuracy_curve", "best_step", "test_depths",
            "train_action_share", "gcn_updates_per_step")  # fmt: skip


def _run(*extra, command=COMMAND):
    return subprocess.run([*command, *extra], capture_output=True, text=True, timeout=600)


def test_a_killed_run_resumes_to_a_bit_identical_result(tmp_path):
    reference = _run("--out", str(tmp_path / "reference"))
    assert reference.returncode == 0, reference.stderr
    ckpt, out = str(tmp_path / "ckpt"), str(tmp_path / "out")
    killed = _run("--out", out, "--checkpoint-dir", ckpt, "--checkpoint-every", "1",
                  command=dies_after_first_save(COMMAND))
    assert killed.returncode == -signal.SIGKILL, killed.stderr  # died after its first save
    assert not (pathlib.Path(out) / "results.json").exists()
    resumed = _run("--out", out, "--checkpoint-dir", ckpt, "--checkpoint-every", "1")
    assert resumed.returncode == 0, resumed.stderr
    assert "2 of 6 episodes already done" in resumed.stdout
    want = json.loads((tmp_path / "reference" / "results.json").read_text())
    got = json.loads((pathlib.Path(out) / "results.json").read_text())
    for field in COMPARED:
        assert got[field] == want[field], field


@pytest.fixture(scope="module")
def finished(small_dataset, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt")
    config = pg.Config.tiny(num_episodes=4, episodes_per_call=2)
    fit = pg.fit(small_dataset, config, seeds=2, progress=False, checkpoint_dir=folder,
                 checkpoint_every=1)  # fmt: skip
    return folder, config, fit


def test_rerun_of_a_finished_run_reads_the_final_checkpoint(finished, small_dataset):
    folder, config, fit = finished
    again = pg.fit(small_dataset, config, seeds=2, progress=False, checkpoint_dir=folder)
    for field in COMPARED:
        assert again.record[field] == fit.record[field], field
    np.testing.assert_array_equal(again.predict(small_dataset.test_index),
                                  fit.predict(small_dataset.test_index))  # fmt: skip


def test_a_checkpoint_of_another_run_is_refused(finished, small_dataset):
    folder, config, _ = finished
    with pytest.raises(pg.CheckpointError, match="different run"):
        pg.fit(small_dataset, config, seeds=3, progress=False, checkpoint_dir=folder)


def test_a_damaged_checkpoint_is_named_with_the_fix(finished, small_dataset, tmp_path):
    folder, config, _ = finished
    damaged = tmp_path / "damaged"
    subprocess.run(["cp", "-r", str(folder), str(damaged)], check=True)
    latest = max(int(p.name) for p in damaged.iterdir() if p.name.isdigit())
    (damaged / str(latest) / "run.npz").write_bytes(b"garbage")
    with pytest.raises(pg.CheckpointError, match=r"could not be read.*Delete that step"):
        pg.fit(small_dataset, config, seeds=2, progress=False, checkpoint_dir=damaged)
    # The advice holds: without the damaged step the run resumes from the one before it and
    # ends as the uninterrupted run did (the whole folder need not go).
    subprocess.run(["rm", "-r", str(damaged / str(latest))], check=True)
    again = pg.fit(small_dataset, config, seeds=2, progress=False, checkpoint_dir=damaged)
    for field in COMPARED:
        assert again.record[field] == finished[2].record[field], field


def test_a_checkpoint_of_another_state_layout_is_a_short_clear_error(tmp_path):
    """A checkpoint written before the state gained a field (the kept validation logits) cannot be
    resumed. The error says why, in short, not with a list of every saved array."""
    saved = {"params": {f"w_{i}": np.zeros((4, 4), np.float32) for i in range(40)}}
    metrics = {"val_accuracy": np.zeros((1, 2), np.float32)}
    checkpoint.Checkpointer(tmp_path / "c", "run").save(1, 2, saved, metrics)
    newer = {**saved, "val_logits": np.zeros((3, 2), np.float32)}
    like = {"val_accuracy": np.zeros((1, 2), np.float32)}
    with pytest.raises(pg.CheckpointError) as err:
        checkpoint.Checkpointer(tmp_path / "c", "run").restore(newer, lambda units: like)
    message = str(err.value)
    assert "another version" in message and "Delete" in message
    assert len(message) < 800, len(message)
