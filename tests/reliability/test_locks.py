"""One run writes a folder at a time: the folder and output-file locks, what stands where a
lock goes, and what a run does when its lock is taken away."""

import fcntl
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from reliability_helpers import (
    HOLDER,
    ROOT,
    hold_lock,
    hold_output_file_lock,
    occupy_lock_path,
    run_quick,
    toy_fits,
    toy_graph,
)
from test_splits import _argv, _benchmark_file

import policy_gnn_jax as pg
from policy_gnn_jax import cli
from policy_gnn_jax.cli import command
from policy_gnn_jax.runtime import checkpoint, files, outputs


@pytest.fixture(scope="module")
def one_seed_fits():
    """The toy graph and two one-seed fits of it, seeds 0 and 1."""
    return toy_fits(seeds=1)


def test_a_folder_another_run_writes_is_refused_naming_it(tmp_path, capsys):
    out = tmp_path / "out"
    other = hold_lock(out)
    try:
        assert run_quick("--out", str(out)) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and f"process {other.pid}" in err
        assert not (out / "results.json").exists()
    finally:
        other.kill()
        other.wait()
    # Its owner is gone (killed, no clean-up): the lock went with it, and the next run runs.
    assert run_quick("--out", str(out)) == 0
    assert (out / "results.json").exists()
    assert not outputs.lock_path(out).exists()  # released at the end


def test_a_checkpoint_folder_another_run_writes_is_refused(tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    other = hold_lock(ckpt)
    try:
        code = run_quick("--out", str(tmp_path / "out"), "--checkpoint-dir", str(ckpt))
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("error: ") and f"process {other.pid}" in err
        assert "Traceback" not in err
    finally:
        other.kill()
        other.wait()
    assert not (tmp_path / "out").exists()


def test_a_lock_is_one_per_folder_through_a_symlink_and_dies_with_its_owner(tmp_path, capsys):
    """Before: a symlinked path had a lock of its own, and a lock read as stale was deleted
    whoever had taken it since (two holders at once)."""
    (tmp_path / "ck").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "ck")
    holder = hold_lock(tmp_path / "ck")
    try:
        with pytest.raises(pg.CheckpointError, match=f"process {holder.pid}"):
            with outputs.FolderLock(tmp_path / "link"):
                pass
    finally:
        holder.kill()
        holder.wait()
    with outputs.FolderLock(tmp_path / "link"):  # its owner died: free at once
        pass


def test_locks_raced_by_many_processes_have_one_holder_at_a_time(tmp_path):
    """Eight processes take one lock in turn, each recording when it held it; no two spans
    overlap."""
    code = textwrap.dedent(
        """
        import sys, time
        from policy_gnn_jax.runtime import outputs
        for _ in range(200):
            try:
                with outputs.FolderLock(sys.argv[1]):
                    start = time.time(); time.sleep(0.02); end = time.time()
                print(start, end); break
            except Exception:
                time.sleep(0.005)
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "x")], stdout=subprocess.PIPE)
        for _ in range(8)
    ]
    spans = sorted(tuple(map(float, p.communicate()[0].split())) for p in procs)
    assert len(spans) == 8
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans


def test_a_lock_file_that_is_a_symlink_is_refused_and_its_target_untouched(tmp_path, capsys):
    """Before: the lock followed the symlink and overwrote the file it named."""
    (tmp_path / "precious.txt").write_text("mine")
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / outputs.LOCK_NAME).symlink_to(tmp_path / "precious.txt")
    assert run_quick("--out", str(tmp_path / "o")) == 2
    assert "symlink" in capsys.readouterr().err
    assert (tmp_path / "precious.txt").read_text() == "mine"


def test_a_fifo_where_the_lock_goes_is_named_a_fifo(tmp_path):
    """Before: "a hard link or a special file", leaving the user to guess which."""
    (tmp_path / "o").mkdir()
    os.mkfifo(tmp_path / "o" / outputs.LOCK_NAME)
    with pytest.raises(pg.CheckpointError, match=r"is a named pipe \(FIFO\), not a plain file"):
        with outputs.FolderLock(tmp_path / "o"):
            pass


def test_two_threads_saving_one_folder_never_mix(one_seed_fits, tmp_path):
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
        threads = [threading.Thread(target=save, args=(f,)) for f in one_seed_fits[1]]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert pg.load(tmp_path / "f").record["seed"] in (0, 1)  # whole, one fit's files
    assert all("in use" in str(e) for e in errors)


def test_a_lock_deleted_mid_run_saves_the_result_elsewhere(one_seed_fits, tmp_path):
    """Before: a lock file removed by hand let a second run in, and the first lost its result."""
    out = tmp_path / "o"
    with outputs.FolderLock(out):
        outputs.lock_path(out).unlink()  # by hand, while this run holds it
        with pytest.raises(pg.CheckpointError, match="rescued"):
            one_seed_fits[1][0].save(out)
    assert not (out / "fit.json").exists()
    (rescued,) = tmp_path.glob("o.rescued-*")
    assert pg.load(rescued).record["seed"] == 0


def test_the_rescue_of_out_dot_sits_beside_the_folder_named_after_it(
    one_seed_fits, tmp_path, monkeypatch
):
    """Before: `--out .` put the rescue in the parent as a hidden ".rescued-*" folder."""
    out = tmp_path / "here"
    out.mkdir()
    monkeypatch.chdir(out)
    with outputs.FolderLock("."):
        outputs.lock_path(".").unlink()
        with pytest.raises(pg.CheckpointError, match="here.rescued-"):
            one_seed_fits[1][0].save(".")
    (rescued,) = tmp_path.glob("here.rescued-*")
    assert pg.load(rescued).record["seed"] == 0


def test_a_lock_deleted_mid_run_rescues_even_when_another_run_wrote_there(one_seed_fits, tmp_path):
    """Before: the result check came first, and the first run lost its result to "already holds
    results.json"; its exit also removed the second run's new lock file."""
    out = tmp_path / "o"
    # A second run's lock and result appear after the first run's lock file was deleted.
    with outputs.FolderLock(out) as first:
        outputs.lock_path(out).unlink()
        other = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE)
        assert other.stdout.readline().strip() == b"held"
        (out / "results.json").write_text("{}")  # the other run's result
        try:
            with pytest.raises(pg.CheckpointError, match="rescued"):
                one_seed_fits[1][0].save(out)
        finally:
            first.__exit__(None, None, None)
            other_lock_survives = outputs.lock_path(out).exists()
            other.kill()
            other.wait()
    assert other_lock_survives  # our exit did not remove the other run's lock
    assert (out / "results.json").read_text() == "{}"


def test_a_hard_linked_lock_file_is_refused_and_its_other_name_untouched(tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "precious.txt").write_text("mine")
    os.link(tmp_path / "precious.txt", tmp_path / "o" / outputs.LOCK_NAME)
    with pytest.raises(pg.CheckpointError, match="hard link"):
        with outputs.FolderLock(tmp_path / "o"):
            pass
    assert (tmp_path / "precious.txt").read_text() == "mine"


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
    pg.fit(toy_graph(), config, checkpoint_dir=ckpt, **fit_args)
    (rescued,) = tmp_path.glob("ck.rescued-*")
    assert calls[0] == ckpt.absolute() and set(calls[1:]) == {rescued}
    assert "checkpoints go to" in capsys.readouterr().err
    assert sorted(p.name for p in ckpt.iterdir() if p.name.isdigit()) == ["1"]  # left as it was
    monkeypatch.undo()
    pg.fit(toy_graph(), config, checkpoint_dir=rescued, **fit_args)
    assert "already done" in capsys.readouterr().out


def test_a_sweep_whose_lock_is_removed_writes_no_more_in_its_folder(tmp_path, monkeypatch, capsys):
    """Before: with its lock file deleted mid-sweep, `--splits` went on writing in --out and at
    the end deleted the files of the run that had taken the folder meanwhile."""
    file = _benchmark_file(tmp_path / "bench.npz")
    out = tmp_path / "o"
    fitter, calls = command._fitter, []

    def fitter_that_loses_the_lock(args, config):
        fit = fitter(args, config)

        def wrapped(ds):
            calls.append(ds.split)
            if len(calls) == 2:  # the lock goes, and another run writes its result in `out`
                outputs.lock_path(out).unlink()
                (out / "results.json").write_text('{"another": "run"}')
            return fit(ds)

        return wrapped

    monkeypatch.setattr(command, "_fitter", fitter_that_loses_the_lock)
    argv = _argv(file, out, "--splits", "all", "--split-map", "apart")
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "lock file" in err[-1] and "rescued" in err[-1]
    assert json.loads((out / "results.json").read_text()) == {"another": "run"}
    assert not (out / "split-1").exists() and not (out / "split-2").exists()
    (rescue,) = tmp_path.glob("o.rescued-*")
    summary = json.loads((rescue / "results.json").read_text())
    assert summary["splits"] == [0, 1, 2]
    for row in summary["per_split"]:  # each split's fit is where the summary says it is
        assert pg.load(rescue / row["folder"]).record["split"] == row["split"]


def test_the_rescue_folder_of_a_long_output_name_can_be_made(tmp_path):
    """Before: `<name>.rescued-<time>-<pid>` of a 240-byte name passed the name limit, so a run
    whose lock was removed saved nothing at all."""
    from policy_gnn_jax.runtime import outputs

    rescue = outputs.rescue_folder(tmp_path / ("r" * 240))
    assert rescue.is_dir() and rescue.parent == tmp_path and ".rescued-" in rescue.name


def test_the_files_written_beside_a_merged_file_are_written_under_its_lock(tmp_path):
    """Before: the heterophily study read and rewrote its figure's points (`X.depths.npz`)
    after the merge's lock was released: two studies merging at once lost one's points. The
    merge now writes them in its `then`, while the lock is held."""

    from policy_gnn_jax.runtime import study_files

    path = tmp_path / "m.json"
    seen = {}

    def then(merged):
        fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen["locked"] = False
        except BlockingIOError:
            seen["locked"] = True
        finally:
            os.close(fd)
        seen["merged"] = merged

    study_files.merge(path, "a test file", lambda x: isinstance(x, dict),
                      lambda old: {**old, "a": 1}, then=then)  # fmt: skip
    assert seen == {"locked": True, "merged": {"a": 1}}


def test_the_heterophily_study_writes_its_points_table_and_figure_under_the_lock(
    experiment, tmp_path, monkeypatch
):
    """The study's side files are written inside the merge (the test above), not after it."""
    import json

    het = experiment("heterophily")
    results = tmp_path / "r.json"
    summary = {"texas": json.loads((ROOT / "docs/results/heterophily.json").read_text())
               ["datasets"]["texas"]}  # fmt: skip
    locked = []

    def held() -> bool:
        fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)

    monkeypatch.setattr(het.figures, "depths_by_structure", lambda *a: locked.append(held()))
    monkeypatch.setattr(het.heterophily_table, "write", lambda *a: locked.append(held()))
    args = het.parse_args(["study", "--results-json", str(results),
                           "--figure", str(tmp_path / "f.png")])  # fmt: skip
    het.write_results(args, summary, {"texas": np.ones((4, 3))})
    assert locked == [True, True]
    with np.load(tmp_path / "r.depths.npz") as z:
        assert z["texas"].shape == (4, 3)


def test_the_output_file_lock_is_released_for_the_next_run_of_the_same_process(tmp_path):
    out = tmp_path / "r.json"
    checkpoint.check_writable_file(out, overwrite=False)
    files.release_output_locks()
    fd = hold_output_file_lock(out)  # another process could now take it
    os.close(fd)


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "users-file"])
def test_a_lock_name_that_is_not_a_lock_file_is_refused_and_kept(tmp_path, kind):
    """Before: `<out>.lock` as a link to a user's file, a hard link to one, or a user's own
    file of that name was written with a process id (and removed at the end)."""
    mine, lock = occupy_lock_path(tmp_path / "r.json.lock", kind)
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
