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
COMPARED = ("test_metric", "val_metric", "val_metric_curve", "best_step", "test_depths",
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
    metrics = {"val_metric": np.zeros((1, 2), np.float32)}
    checkpoint.Checkpointer(tmp_path / "c", "run").save(1, 2, saved, metrics)
    newer = {**saved, "val_logits": np.zeros((3, 2), np.float32)}
    like = {"val_metric": np.zeros((1, 2), np.float32)}
    with pytest.raises(pg.CheckpointError) as err:
        checkpoint.Checkpointer(tmp_path / "c", "run").restore(newer, lambda units: like)
    message = str(err.value)
    assert "another version" in message and "Delete" in message
    assert len(message) < 800, len(message)


def _metrics_like(units):
    return {"m": np.zeros((1, units))}


def _saved_steps(folder, steps=(1, 2, 3)):
    ck = checkpoint.Checkpointer(folder, "run")
    for step in steps:
        ck.save(step, step, {"w": np.full((3,), step, np.float32)}, {"m": np.zeros((1, step))})
    ck.close()


def test_a_kill_while_an_old_step_is_deleted_leaves_the_folder_resumable(tmp_path, monkeypatch):
    """The third save deletes the first step; a kill halfway through that deletion (its
    meta.json gone, its run.npz not yet) must not leave a half step that makes the next run
    refuse the folder with its two good checkpoints."""
    _saved_steps(tmp_path / "c", steps=(1, 2))

    rmtree = checkpoint.shutil.rmtree

    def killed_midway(path, ignore_errors=False):
        if not pathlib.Path(path).name.startswith("1"):  # not the old step: as usual
            return rmtree(path, ignore_errors=ignore_errors)
        (pathlib.Path(path) / "meta.json").unlink()
        raise SystemExit("killed")

    monkeypatch.setattr(checkpoint.shutil, "rmtree", killed_midway)
    ck = checkpoint.Checkpointer(tmp_path / "c", "run")
    with pytest.raises(SystemExit):
        ck.save(3, 3, {"w": np.full((3,), 3, np.float32)}, {"m": np.zeros((1, 3))})
    ck.close()
    monkeypatch.undo()
    ck = checkpoint.Checkpointer(tmp_path / "c", "run")
    chunks, _, state, _ = ck.restore({"w": np.zeros((3,), np.float32)}, _metrics_like)
    ck.close()
    assert chunks == 3 and state["w"].tolist() == [3.0, 3.0, 3.0]
    assert sorted(p.name for p in (tmp_path / "c").iterdir() if p.is_dir()) == ["2", "3"]


@pytest.mark.parametrize("meta", ["[]", "null", '{"fingerprint": "run"}'])
def test_a_meta_file_that_is_not_a_checkpoints_is_one_error(tmp_path, meta):
    _saved_steps(tmp_path / "c", steps=(1,))
    (tmp_path / "c" / "1" / "meta.json").write_text(meta)
    ck = checkpoint.Checkpointer(tmp_path / "c", "run")
    with pytest.raises(pg.CheckpointError, match="could not be read"):
        ck.restore({"w": np.zeros((3,), np.float32)}, _metrics_like)
    ck.close()


def test_arrays_are_matched_by_their_place_in_the_state_not_their_order(tmp_path):
    """Two fields of one shape renamed between versions are refused, not resumed swapped."""
    ck = checkpoint.Checkpointer(tmp_path / "c", "run")
    ck.save(1, 1, {"a": np.zeros(2, np.float32), "b": np.ones(2, np.float32)}, {})
    ck.close()
    ck = checkpoint.Checkpointer(tmp_path / "c", "run")
    like = {"b": np.zeros(2, np.float32), "c": np.zeros(2, np.float32)}
    with pytest.raises(pg.CheckpointError, match="another version"):
        ck.restore(like, lambda u: {})
    ck.close()



def test_parameters_of_a_type_numpy_cannot_name_resume_as_saved(tmp_path):
    """A custom backbone's bfloat16 parameters: an .npz holds them as raw two-byte records, which
    must come back as the bfloat16 values saved, not as bytes that refuse the checkpoint."""
    import jax.numpy as jnp

    w = np.asarray(jnp.array([1.5, -2.25, 3e-3], jnp.bfloat16))
    ck = checkpoint.Checkpointer(tmp_path / "c", "run")
    ck.save(1, 1, {"w": w}, {})
    ck.close()
    ck = checkpoint.Checkpointer(tmp_path / "c", "run")
    _, _, state, _ = ck.restore({"w": np.zeros(3, jnp.bfloat16)}, lambda u: {})
    ck.close()
    assert state["w"].dtype == jnp.bfloat16
    np.testing.assert_array_equal(state["w"].view(np.uint16), w.view(np.uint16))


def test_parameters_of_another_two_byte_type_are_refused_not_reinterpreted(tmp_path):
    """bfloat16 bits read as float16 would resume another model: the saved type is compared."""
    import jax.numpy as jnp

    ck = checkpoint.Checkpointer(tmp_path / "c", "run")
    ck.save(1, 1, {"w": np.asarray(jnp.ones(3, jnp.bfloat16))}, {})
    ck.close()
    ck = checkpoint.Checkpointer(tmp_path / "c", "run")
    with pytest.raises(pg.CheckpointError, match="another version"):
        ck.restore({"w": np.zeros(3, jnp.float16)}, lambda u: {})
    ck.close()


def test_a_resume_under_other_xla_flags_is_refused(small_dataset, tmp_path, monkeypatch):
    """XLA_FLAGS change the compiled kernels and so the bits: a checkpoint made under other
    flags is refused, naming them, not resumed into a result neither run would give (found by an
    adversarial pass: 80 record fields differed). Runs without flags keep their fingerprints."""
    config = pg.Config.tiny(num_episodes=2, episodes_per_call=1)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    pg.fit(small_dataset, config, seeds=1, progress=False, checkpoint_dir=tmp_path / "c")
    monkeypatch.delenv("XLA_FLAGS")
    with pytest.raises(pg.CheckpointError, match="XLA_FLAGS"):
        pg.fit(small_dataset, config, seeds=1, progress=False, checkpoint_dir=tmp_path / "c")


def test_a_stop_during_the_final_evaluation_is_not_dropped(small_dataset, monkeypatch):
    """A signal noted where it cannot be raised (JAX's garbage-collection callback) after the
    last chunk still stops the run, after the evaluation: else the command ends with status 0
    and no line (found by an adversarial pass)."""
    import signal

    from policy_gnn_jax.mdp import policy_gnn
    from policy_gnn_jax.runtime import runner

    real = policy_gnn.evaluate

    def evaluate_then_signal(*args):
        runner.stop_signal.append(signal.SIGTERM)  # as `cli.process._stop` notes one there
        return real(*args)

    monkeypatch.setattr(policy_gnn, "evaluate", evaluate_then_signal)
    try:
        with pytest.raises(runner.Terminated):
            pg.fit(small_dataset, pg.Config.tiny(num_episodes=2), seeds=1, progress=False)
    finally:
        runner.stop_signal.clear()
