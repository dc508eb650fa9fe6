"""Nothing lost: a result, a saved fit or a checkpoint is never replaced or mixed by accident, a
folder is written by one run at a time, and a damaged or mismatched file is named on load."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import policy_gnn_jax as pg
from policy_gnn_jax import cli
from policy_gnn_jax.runtime import outputs

# A tiny generated graph and the cheapest method: each run takes a few seconds.
QUICK = ["--dataset", "csbm", "--csbm-nodes", "1600", "--seeds", "1", "--method", "gcn"]
QUICK += ["--epochs", "2", "--no-progress"]


def _run(*argv) -> int:
    return cli.main([*QUICK, *argv])


def _toy(seed=0):
    rng = np.random.default_rng(seed)
    n = 60
    labels = np.arange(n) % 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pg.from_arrays(
            rng.normal(size=(n, 4)) + labels[:, None],
            np.stack([np.arange(n - 1), np.arange(1, n)]),
            labels,
            np.arange(10),
            np.arange(10, 30),
            np.arange(30, 60),
        )


@pytest.fixture(scope="module")
def two_fits():
    ds = _toy()
    config = pg.Config.tiny(epochs=3)
    return ds, [pg.fit(ds, config, method="gcn", seeds=2, seed=s, progress=False) for s in (0, 1)]


def test_default_output_folders_are_new_and_distinct(tmp_path):
    """Before: the default name had one-second resolution and an existing folder was reused, so
    runs started in the same second wrote into one folder."""
    made = [outputs.new_folder(tmp_path / "results", "cora-policy-gnn") for _ in range(20)]
    assert len(set(made)) == 20 and all(folder.is_dir() for folder in made)
    assert all(str(os.getpid()) in folder.name for folder in made)


def test_two_runs_without_out_keep_both_results(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _run("--seed", "0") == 0 and _run("--seed", "1") == 0
    found = sorted((tmp_path / "results").glob("*/results.json"))
    assert len(found) == 2
    assert {json.loads(p.read_text())["seed"] for p in found} == {0, 1}


def test_an_out_holding_a_result_is_refused_unless_overwrite(tmp_path, capsys):
    out = tmp_path / "out"
    assert _run("--out", str(out), "--seed", "0") == 0
    before = (out / "results.json").read_bytes()
    capsys.readouterr()
    assert _run("--out", str(out), "--seed", "1") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "--overwrite" in err and str(out) in err
    assert (out / "results.json").read_bytes() == before
    assert _run("--out", str(out), "--seed", "1", "--overwrite") == 0
    assert json.loads((out / "results.json").read_text())["seed"] == 1
    assert pg.load(out).record["seed"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing left beside it
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # nor inside it


def test_fit_save_refuses_to_replace_a_saved_fit(two_fits, tmp_path):
    ds, (first, second) = two_fits
    first.save(tmp_path / "fit")
    with pytest.raises(pg.CheckpointError, match="overwrite=True"):
        second.save(tmp_path / "fit")
    assert pg.load(tmp_path / "fit").record["seed"] == 0
    second.save(tmp_path / "fit", overwrite=True)
    again = pg.load(tmp_path / "fit")
    assert again.record["seed"] == 1
    np.testing.assert_array_equal(again.predict(ds.test_index), second.predict(ds.test_index))


HOLDER = (
    "import sys, time\n"
    "from policy_gnn_jax.runtime import outputs\n"
    "with outputs.FolderLock(sys.argv[1]):\n"
    "    print('held', flush=True)\n"
    "    time.sleep(60)\n"
)


def _holder(folder):
    """Another process that holds `folder`'s lock until killed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"held"
    return proc


def test_a_folder_another_run_writes_is_refused_naming_it(tmp_path, capsys):
    out = tmp_path / "out"
    other = _holder(out)
    try:
        assert _run("--out", str(out)) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and f"process {other.pid}" in err
        assert not (out / "results.json").exists()
    finally:
        other.kill()
        other.wait()
    # Its owner is gone (killed, no clean-up): the lock went with it, and the next run runs.
    assert _run("--out", str(out)) == 0
    assert (out / "results.json").exists()
    assert not outputs.lock_path(out).exists()  # released at the end


def test_a_checkpoint_folder_another_run_writes_is_refused(tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    other = _holder(ckpt)
    try:
        code = _run("--out", str(tmp_path / "out"), "--checkpoint-dir", str(ckpt))
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("error: ") and f"process {other.pid}" in err
        assert "Traceback" not in err
    finally:
        other.kill()
        other.wait()
    assert not (tmp_path / "out").exists()


def test_a_user_folder_given_as_checkpoint_dir_is_not_a_checkpoint(tmp_path, capsys):
    """Before: "written by another version of policy-gnn-jax ... Delete <folder>", advice that
    would delete a user's files."""
    folder = tmp_path / "my_notes"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    assert _run("--out", str(tmp_path / "out"), "--checkpoint-dir", str(folder)) == 2
    err = capsys.readouterr().err
    assert "not a policy-gnn checkpoint" in err and "Delete" not in err
    assert (folder / "notes.txt").read_text() == "mine"


def test_load_refuses_snapshots_copied_from_another_fit(two_fits, tmp_path):
    """Before: accepted, and predictions then disagreed with the recorded accuracy."""
    _, (first, second) = two_fits
    first.save(tmp_path / "a")
    second.save(tmp_path / "b")
    (tmp_path / "a" / "snapshots.npz").write_bytes((tmp_path / "b" / "snapshots.npz").read_bytes())
    with pytest.raises(pg.CheckpointError, match="snapshots.npz"):
        pg.load(tmp_path / "a")


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_load_names_a_damaged_file(two_fits, tmp_path, damage):
    """Before: zipfile.BadZipFile from deep inside numpy."""
    first = two_fits[1][0]
    first.save(tmp_path / "a")
    path = tmp_path / "a" / "snapshots.npz"
    raw = bytearray(path.read_bytes())
    if damage == "flip":
        raw[len(raw) // 2] ^= 0xFF
    else:
        raw = raw[: len(raw) // 2]
    path.write_bytes(bytes(raw))
    with pytest.raises(pg.CheckpointError, match="snapshots.npz"):
        pg.load(tmp_path / "a")


def test_load_of_a_fit_json_that_is_not_an_object(two_fits, tmp_path):
    two_fits[1][0].save(tmp_path / "a")
    (tmp_path / "a" / "fit.json").write_text("[1, 2]")
    with pytest.raises(pg.CheckpointError, match="fit.json"):
        pg.load(tmp_path / "a")


def test_output_files_follow_the_umask(two_fits, tmp_path):
    """Before: every file 0600 whatever the umask (a shared results folder was unreadable)."""
    old = os.umask(0o022)
    try:
        two_fits[1][0].save(tmp_path / "a")
    finally:
        os.umask(old)
    for name in ("results.json", "fit.json", "snapshots.npz", "dataset.npz"):
        assert (tmp_path / "a" / name).stat().st_mode & 0o777 == 0o644, name


@pytest.mark.parametrize("stop, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_ends_with_one_line_naming_the_last_checkpoint(tmp_path, stop, code):
    """Before: a KeyboardInterrupt traceback and orbax's (SIGINT); SIGTERM killed the run with
    no word and left its empty output folder."""
    ckpt = tmp_path / "ckpt"
    command = [sys.executable, "-m", "policy_gnn_jax.cli", *QUICK[:-5], "--episodes", "400"]
    command += ["--checkpoint-dir", str(ckpt), "--set", "episodes_per_call=2"]
    command += ["--checkpoint-every", "1", "--out", str(tmp_path / "out"), "--no-progress"]
    run = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not any(p.name.isdigit() for p in ckpt.glob("*")) and time.time() < deadline:
        time.sleep(0.2)
    run.send_signal(stop)
    _, err = run.communicate(timeout=60)
    assert run.returncode == code, err
    assert "Traceback" not in err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: interrupted")
    assert str(ckpt) in lines[0] and "same command" in lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("stop", [signal.SIGHUP, signal.SIGQUIT])
def test_a_hangup_or_a_quit_stops_a_run_as_sigterm_does(capsys, stop):
    """SIGHUP (a closed terminal or ssh session) and SIGQUIT take SIGTERM's path, which the
    test above follows through a checkpointed run: one line, exit status 143."""

    def run():
        os.kill(os.getpid(), stop)
        time.sleep(5)  # the handler runs at the next instruction; never reached

    assert cli.exit_status(run) == 143
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: interrupted; runs saved before it are kept and reused."
    ]


def test_a_backend_that_is_not_there_is_one_clear_error(tmp_path):
    """Before: a bare AssertionError."""
    env = dict(os.environ, JAX_PLATFORMS="cuda")
    command = [sys.executable, "-m", "policy_gnn_jax.cli", *QUICK, "--out", str(tmp_path / "o")]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "JAX_PLATFORMS" in done.stderr
    assert not (tmp_path / "o").exists()


def test_a_graph_too_large_to_generate_is_refused_before_allocating(tmp_path, capsys):
    """Before: numpy's MemoryError traceback, and an empty --out folder left behind."""
    code = cli.main(
        ["--dataset", "csbm", "--csbm-nodes", "1000000000", "--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "--csbm-nodes" in err
    assert not (tmp_path / "o").exists()


def test_the_fault_injection_variable_is_named_when_wrong(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("POLICY_GNN_KILL_AFTER_CHECKPOINTS", "soon")
    code = _run("--out", str(tmp_path / "o"), "--checkpoint-dir", str(tmp_path / "c"))
    err = capsys.readouterr().err
    assert code == 2 and "POLICY_GNN_KILL_AFTER_CHECKPOINTS" in err


def test_data_dir_means_that_folder_only(tmp_path, monkeypatch, capsys):
    """Before: a --data-dir lacking files was filled in from $POLICY_GNN_DATA or the cache, and
    the run never said which folder it read."""
    from conftest import PLANETOID_DIR

    partial = tmp_path / "partial"
    partial.mkdir()
    for path in PLANETOID_DIR.glob("ind.cora.*"):
        if not path.name.endswith(".graph"):
            (partial / path.name).write_bytes(path.read_bytes())
    monkeypatch.setenv("POLICY_GNN_DATA", str(PLANETOID_DIR))
    with pytest.raises(pg.DataError, match=r"ind\.cora\.graph") as caught:
        pg.load_dataset("cora", data_dir=partial)
    assert str(PLANETOID_DIR) not in str(caught.value)
    argv = ["--dataset", "cora", "--data-dir", str(PLANETOID_DIR), "--method", "gcn", "--epochs"]
    argv += ["1", "--seeds", "1", "--no-progress", "--out", str(tmp_path / "o")]
    code = cli.main(argv)
    assert code == 0
    assert f"read from {PLANETOID_DIR}" in capsys.readouterr().out
    record = json.loads((tmp_path / "o" / "results.json").read_text())
    assert record["data_source"] == str(PLANETOID_DIR)


def test_new_folder_is_exclusive(tmp_path):
    """Two processes asking in the same microsecond still get two folders (mkdir is atomic)."""
    first = outputs.new_folder(tmp_path, "x")
    assert pathlib.Path(first).is_dir()
    assert outputs.new_folder(tmp_path, "x") != first
