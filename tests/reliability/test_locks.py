"""One run writes a folder at a time: the folder and output-file locks (docs/reliability.md,
promise 4)."""

import fcntl
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from reliability_helpers import (
    ROOT,
    hold_lock,
    hold_output_file_lock,
    run_quick,
    toy_fits,
)

import policy_gnn_jax as pg
from policy_gnn_jax.runtime import locks


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
    assert not (out / locks.LOCK_NAME).exists()  # released at the end


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
    """A symlinked path shares its folder's lock, and a lock read as stale is not deleted once
    another has taken it: either would let two hold the lock at once."""
    (tmp_path / "ck").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "ck")
    holder = hold_lock(tmp_path / "ck")
    try:
        with pytest.raises(pg.CheckpointError, match=f"process {holder.pid}"):
            with locks.FolderLock(tmp_path / "link"):
                pass
    finally:
        holder.kill()
        holder.wait()
    with locks.FolderLock(tmp_path / "link"):  # its owner died: free at once
        pass


def test_locks_raced_by_many_processes_have_one_holder_at_a_time(tmp_path):
    """Eight processes take one lock in turn, each recording when it held it; no two spans
    overlap."""
    code = textwrap.dedent(
        """
        import sys, time
        from policy_gnn_jax.runtime import locks
        for _ in range(200):
            try:
                with locks.FolderLock(sys.argv[1]):
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


def test_two_threads_saving_one_folder_never_mix(one_seed_fits, tmp_path):
    """The lock's owner is one thread, not any thread of the process, and each save stages in its
    own folder: shared, two threads give a raw FileNotFoundError, or a folder that does not load."""
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


def test_the_files_written_beside_a_merged_file_are_written_under_its_lock(tmp_path):
    """The heterophily study reads and rewrites its figure's points (`X.depths.npz`) in the merge's
    `then`, while the lock is held: after the lock's release, two studies merging at once would lose
    one's points."""

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
    locks.claim_output_file(out, overwrite=False)
    locks.release_output_locks()
    fd = hold_output_file_lock(out)  # another process could now take it
    os.close(fd)


def test_a_stale_lock_file_of_a_killed_run_is_taken_over(tmp_path):
    (tmp_path / "r.json.lock").write_text("12345")  # its process is gone: the lock is free
    locks.claim_output_file(tmp_path / "r.json", overwrite=False)
    locks.release_output_locks()
    assert not (tmp_path / "r.json.lock").exists()


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_a_lock_file_removed_between_its_open_and_its_lock_is_not_taken(tmp_path, monkeypatch,
                                                                        kind):  # fmt: skip
    """Its owner removes the lock file as it lets go: a file opened before that and locked after
    is nobody's lock, and holding it would let two runs write at once."""
    folder = tmp_path / "f"
    folder.mkdir()
    path = folder / locks.LOCK_NAME if kind == "folder" else tmp_path / "r.json.lock"
    path.write_text("")
    real_flock, locked = fcntl.flock, []

    def flock_after_release(fd, operation):
        if not locked:  # between this open and this lock, the owner lets go
            path.unlink()
        locked.append(fd)
        return real_flock(fd, operation)

    monkeypatch.setattr(locks.fcntl, "flock", flock_after_release)
    if kind == "folder":
        with locks.FolderLock(folder):
            assert path.exists() and len(locked) == 2  # locked the file at the path
    else:
        locks.hold_output_lock(tmp_path / "r.json")
        try:
            assert path.exists() and len(locked) == 2
        finally:
            locks.release_output_locks()
