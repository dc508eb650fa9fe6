"""Findings of a second adversarial pass over the output, lock and manifest handling: each a test
that failed before its fix."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from test_nothing_lost_adversary import _run, _toy

import policy_gnn_jax as pg
from policy_gnn_jax.runtime import outputs


@pytest.fixture(scope="module")
def fits():
    """Two one-seed fixed-depth fits of one toy graph, seeds 0 and 1."""
    ds = _toy()
    config = pg.Config.tiny(epochs=3)
    return ds, [pg.fit(ds, config, method="gcn", seeds=1, seed=s, progress=False) for s in (0, 1)]


def test_a_lock_file_that_is_a_symlink_is_refused_and_its_target_untouched(tmp_path, capsys):
    """Before: the lock followed the symlink and overwrote the file it named."""
    (tmp_path / "precious.txt").write_text("mine")
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / outputs.LOCK_NAME).symlink_to(tmp_path / "precious.txt")
    assert _run("--out", str(tmp_path / "o")) == 2
    assert "symlink" in capsys.readouterr().err
    assert (tmp_path / "precious.txt").read_text() == "mine"


def test_a_fifo_where_the_lock_goes_is_named_a_fifo(tmp_path):
    """Before: "a hard link or a special file", leaving the user to guess which."""
    (tmp_path / "o").mkdir()
    os.mkfifo(tmp_path / "o" / outputs.LOCK_NAME)
    with pytest.raises(pg.CheckpointError, match=r"is a named pipe \(FIFO\), not a plain file"):
        with outputs.FolderLock(tmp_path / "o"):
            pass


def test_two_threads_saving_one_folder_never_mix(fits, tmp_path):
    """Before: the lock counted any thread of the process as its owner, and both threads shared
    one staging folder: raw FileNotFoundError, or a folder that did not load."""
    import threading

    errors = []

    def save(fit):
        try:
            fit.save(tmp_path / "f", overwrite=True)
        except pg.CheckpointError as err:
            errors.append(err)

    for _ in range(5):
        threads = [threading.Thread(target=save, args=(f,)) for f in fits[1]]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert pg.load(tmp_path / "f").record["seed"] in (0, 1)  # whole, one fit's files
    assert all("in use" in str(e) for e in errors)


def test_overwrite_refuses_a_result_name_that_is_a_folder_before_training(tmp_path, capsys):
    out = tmp_path / "o"
    assert _run("--out", str(out)) == 0
    (out / "results.json").unlink()
    (out / "results.json").mkdir()
    assert _run("--out", str(out), "--overwrite") == 2
    assert "results.json" in capsys.readouterr().err
    assert (out / "fit.json").exists()  # nothing was removed


def test_fit_save_refuses_a_checkpoint_folder(fits, tmp_path):
    (tmp_path / "ck" / "3").mkdir(parents=True)
    (tmp_path / "ck" / "3" / "commit_success.txt").write_text("ok")
    with pytest.raises(pg.CheckpointError, match="checkpoint"):
        fits[1][0].save(tmp_path / "ck")


SIGNAL_DURING_PUBLISH = """
import os, signal, sys
# A run whose Ctrl-C is handled: a child inherits an ignored SIGINT, and the whole suite's
# process was seen to have one (a background shell job's is ignored too).
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, sys.argv[2])
import policy_gnn_jax as pg
from test_nothing_lost_adversary import _toy
ds = _toy()
fits = [pg.fit(ds, pg.Config.tiny(epochs=3), method="gcn", seeds=1, seed=s, progress=False)
        for s in (0, 1)]
out = sys.argv[1]
fits[0].save(out)
real_replace = os.replace
def replace_with_a_signal(src, dst):
    if ".staging-" not in str(dst):  # a rename into the final folder: mid-publish
        os.kill(os.getpid(), signal.SIGINT)
    return real_replace(src, dst)
os.replace = replace_with_a_signal
try:
    fits[1].save(out, overwrite=True)
    print("no interrupt")
except KeyboardInterrupt:
    os.replace = real_replace
    print("interrupted after the save, seed", pg.load(out).record["seed"])
"""


def test_a_signal_during_the_final_save_lands_after_it(tmp_path):
    """Before: a SIGTERM between the renames left results.json of one run beside
    snapshots.npz of the other. Run in a fresh process with SIGINT handled: late in the whole
    suite SIGINT is ignored at the OS level, which a child inherits."""
    tests = str(pathlib.Path(__file__).parent)
    done = subprocess.run([sys.executable, "-c", SIGNAL_DURING_PUBLISH, str(tmp_path / "f"), tests],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "interrupted after the save, seed 1"


def test_a_checkpoint_of_another_class_count_is_refused_in_one_line(tmp_path, capsys):
    """Before: num_classes was not in the fingerprint: 47 orbax tracebacks."""
    ds = _toy()
    import dataclasses

    other = dataclasses.replace(ds, num_classes=3)
    config = pg.Config.tiny(num_episodes=2, episodes_per_call=1)
    pg.fit(ds, config, seeds=1, progress=False, checkpoint_dir=tmp_path / "ck")
    with pytest.raises(pg.CheckpointError, match="different run"):
        pg.fit(other, config, seeds=1, progress=False, checkpoint_dir=tmp_path / "ck")


def test_a_manifest_is_required_from_the_format_that_writes_one(fits, tmp_path):
    """Before: removing "files" from fit.json passed as a fit saved before manifests."""
    fits[1][0].save(tmp_path / "f")
    meta = json.loads((tmp_path / "f" / "fit.json").read_text())
    meta.pop("files")
    (tmp_path / "f" / "fit.json").write_text(json.dumps(meta))
    with pytest.raises(pg.CheckpointError, match="manifest"):
        pg.load(tmp_path / "f")


def test_a_heterophily_file_is_checked_like_from_arrays(tmp_path):
    """Before: a label beyond int32 overflowed inside JAX; 1e39 features were called NaN."""
    from policy_gnn_jax.data import heterophily

    n = 6
    masks = np.zeros((1, n), bool)
    arrays = dict(
        node_features=np.ones((n, 2), np.float64),
        node_labels=np.array([0, 1, 0, 1, 0, 1], np.int64),
        edges=np.array([[0, 1], [2, 3], [4, 5]], np.int64),
        train_masks=masks.copy(), val_masks=masks.copy(), test_masks=masks.copy(),
    )  # fmt: skip
    arrays["train_masks"][0, :2] = arrays["val_masks"][0, 2:4] = arrays["test_masks"][0, 4:] = 1
    labels = arrays["node_labels"].copy()
    labels[5] = 2**32 + 1
    np.savez(tmp_path / "a.npz", **{**arrays, "node_labels": labels})
    with pytest.raises(pg.DataError, match=str(2**32 + 1)):
        heterophily.load_heterophily(str(tmp_path / "a.npz"))
    features = arrays["node_features"].copy()
    features[0, 0] = 1e39
    np.savez(tmp_path / "b.npz", **{**arrays, "node_features": features})
    with pytest.raises(pg.DataError, match="float32"):
        heterophily.load_heterophily(str(tmp_path / "b.npz"))


def test_reproduce_overwrite_over_a_saved_fit_leaves_a_loadable_or_no_fit(fits, tmp_path):
    """Before: only results.json was replaced, and the folder's fit no longer loaded."""
    import dataclasses

    from policy_gnn_jax.contrib.reproduction import runs

    ds, (first, _) = fits
    first.save(tmp_path / "run")
    config = dataclasses.replace(pg.Config.tiny(epochs=2), depth=1)
    runs.run_or_load(tmp_path / "run", ds, config, "gcn", 1, replace=True)
    assert not (tmp_path / "run" / "fit.json").exists()
    assert json.loads((tmp_path / "run" / "results.json").read_text())["config"]["depth"] == 1


def test_a_stop_asked_for_is_not_lost_if_its_exception_was_swallowed():
    """Before: a SIGTERM whose exception landed in a JAX callback was discarded, and the run
    went on to the end. The runner now checks the request after every chunk."""
    import signal

    from policy_gnn_jax.runtime import runner

    runner._stop_requested = signal.SIGTERM  # as a handler leaves it when its raise is lost
    try:
        with pytest.raises(runner.Terminated):
            pg.fit(_toy(), pg.Config.tiny(epochs=4), method="gcn", seeds=1, progress=False)
    finally:
        runner.clear_stop()


def test_a_lock_deleted_mid_run_saves_the_result_elsewhere(fits, tmp_path):
    """Before: a lock file removed by hand let a second run in, and the first lost its result."""
    out = tmp_path / "o"
    with outputs.FolderLock(out):
        outputs.lock_path(out).unlink()  # by hand, while this run holds it
        with pytest.raises(pg.CheckpointError, match="rescued"):
            fits[1][0].save(out)
    assert not (out / "fit.json").exists()
    (rescued,) = tmp_path.glob("o.rescued-*")
    assert pg.load(rescued).record["seed"] == 0


def test_the_rescue_of_out_dot_sits_beside_the_folder_named_after_it(fits, tmp_path, monkeypatch):
    """Before: `--out .` put the rescue in the parent as a hidden ".rescued-*" folder."""
    out = tmp_path / "here"
    out.mkdir()
    monkeypatch.chdir(out)
    with outputs.FolderLock("."):
        outputs.lock_path(".").unlink()
        with pytest.raises(pg.CheckpointError, match="here.rescued-"):
            fits[1][0].save(".")
    (rescued,) = tmp_path.glob("here.rescued-*")
    assert pg.load(rescued).record["seed"] == 0


# --- a third pass ---------------------------------------------------------------------------------


def test_a_lock_deleted_mid_run_rescues_even_when_another_run_wrote_there(fits, tmp_path):
    """Before: the result check came first, and the first run lost its result to "already holds
    results.json"; its exit also removed the second run's new lock file."""
    out = tmp_path / "o"
    # A second run's lock and result appear after the first run's lock file was deleted.
    with outputs.FolderLock(out) as first:
        outputs.lock_path(out).unlink()
        other = subprocess.Popen(
            [sys.executable, "-c", HOLDER_SNIPPET, str(out)], stdout=subprocess.PIPE
        )
        assert other.stdout.readline().strip() == b"held"
        (out / "results.json").write_text("{}")  # the other run's result
        try:
            with pytest.raises(pg.CheckpointError, match="rescued"):
                fits[1][0].save(out)
        finally:
            first.__exit__(None, None, None)
            other_lock_survives = outputs.lock_path(out).exists()
            other.kill()
            other.wait()
    assert other_lock_survives  # our exit did not remove the other run's lock
    assert (out / "results.json").read_text() == "{}"


HOLDER_SNIPPET = (
    "import sys, time\n"
    "from policy_gnn_jax.runtime import outputs\n"
    "with outputs.FolderLock(sys.argv[1]):\n"
    "    print('held', flush=True)\n"
    "    time.sleep(60)\n"
)


def test_a_hard_linked_lock_file_is_refused_and_its_other_name_untouched(tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "precious.txt").write_text("mine")
    os.link(tmp_path / "precious.txt", tmp_path / "o" / outputs.LOCK_NAME)
    with pytest.raises(pg.CheckpointError, match="hard link"):
        with outputs.FolderLock(tmp_path / "o"):
            pass
    assert (tmp_path / "precious.txt").read_text() == "mine"


def test_overwrite_keeps_a_users_folder_named_like_staging(tmp_path):
    out = tmp_path / "o"
    assert _run("--out", str(out)) == 0
    (out / ".staging-notes").mkdir()
    (out / ".staging-notes" / "a.txt").write_text("mine")
    assert _run("--out", str(out), "--overwrite") == 0
    assert (out / ".staging-notes" / "a.txt").read_text() == "mine"


def test_reproduce_keeps_a_users_file_beside_a_fresh_run(tmp_path):
    import dataclasses

    from policy_gnn_jax.contrib.reproduction import runs

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "dataset.npz").write_text("mine")
    config = dataclasses.replace(pg.Config.tiny(epochs=2), depth=1)
    runs.run_or_load(tmp_path / "run", _toy(), config, "gcn", 1)
    assert (tmp_path / "run" / "dataset.npz").read_text() == "mine"


def test_a_checkpoint_folder_whose_lock_is_deleted_mid_run_moves_the_checkpoints(
    tmp_path, monkeypatch, capsys
):
    """Before: the run went on saving into a folder another run could now take as well."""
    from policy_gnn_jax.runtime import checkpoint

    ckpt = tmp_path / "ck"
    real_save = checkpoint.Checkpointer.save
    calls = []

    def save_then_lose_the_lock(self, *args):
        real_save(self, *args)
        calls.append(self.directory)
        if len(calls) == 1:
            outputs.lock_path(ckpt).unlink()  # by hand, while the run holds it

    monkeypatch.setattr(checkpoint.Checkpointer, "save", save_then_lose_the_lock)
    config = pg.Config.tiny(num_episodes=3, episodes_per_call=1)
    fit_args = dict(seeds=1, progress=False, checkpoint_every=1)
    pg.fit(_toy(), config, checkpoint_dir=ckpt, **fit_args)
    (rescued,) = tmp_path.glob("ck.rescued-*")
    assert calls[0] == ckpt.absolute() and set(calls[1:]) == {rescued}
    assert "checkpoints go to" in capsys.readouterr().err
    assert sorted(p.name for p in ckpt.iterdir() if p.name.isdigit()) == ["1"]  # left as it was
    monkeypatch.undo()
    pg.fit(_toy(), config, checkpoint_dir=rescued, **fit_args)
    assert "already done" in capsys.readouterr().out
