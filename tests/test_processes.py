"""Seeds over several processes (JAX's distributed runtime, CPU processes on this host): 2 and 3
processes give one process's `--seed-mode map` result bit for bit, through the command line and
through `fit`."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from conftest import dies_after_first_save

import policy_gnn_jax as pg
from policy_gnn_jax.runtime import cluster, processes

COMMAND = [
    sys.executable, "-m", "policy_gnn_jax.cli",
    "--dataset", "csbm", "--csbm-nodes", "1600", "--seeds", "5", "--episodes", "4",
    "--episodes-per-call", "2", "--steps-per-episode", "2", "--buffer-size", "16",
    "--no-progress", "--seed-mode", "map",
]  # fmt: skip
# Fields that say how the run went, not what it computed.
HOW_IT_RAN = {"wall_time_s", "processes"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(argv_of, count: int, env_of=None, timeout: int = 400) -> list:
    """Starts `count` processes (argv_of(i, port), environment env_of[i] or this one's)
    together and waits for all of them."""
    port = _free_port()
    env_of = env_of or {}
    started = [
        subprocess.Popen(
            argv_of(i, port),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env_of.get(i),
        )  # fmt: skip
        for i in range(count)
    ]
    done = []
    for p in started:
        out, err = p.communicate(timeout=timeout)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done


def _flags(i: int, port: int, count: int) -> list[str]:
    return ["--coordinator", f"127.0.0.1:{port}", "--num-processes", str(count),
            "--process-id", str(i)]  # fmt: skip


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    out = tmp_path_factory.mktemp("one") / "out"
    done = subprocess.run([*COMMAND, "--out", str(out)], capture_output=True, text=True,
                          timeout=400)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.parametrize("count", [2, 3])
def test_several_processes_equal_one_bit_for_bit(one_process, tmp_path, count):
    out = tmp_path / "out"
    done = _launch(lambda i, port: [*COMMAND, "--out", str(out), *_flags(i, port, count)], count)
    for i, p in enumerate(done):
        assert p.returncode == 0, (i, p.stderr[-2000:])
    # Only process 0 writes; the others say which seeds they ran and where the result goes.
    assert "results:" in done[0].stdout
    assert "process 1 of" in done[1].stdout and "process 0 writes" in done[1].stdout
    assert sorted(os.listdir(tmp_path)) == ["out"]
    want = json.loads((one_process / "results.json").read_text())
    got = json.loads((out / "results.json").read_text())
    assert got["processes"] == count and want["processes"] == 1
    assert {k for k in want if want[k] != got.get(k)} <= HOW_IT_RAN
    with np.load(one_process / "snapshots.npz") as a, np.load(out / "snapshots.npz") as b:
        assert a.files == b.files
        for name in a.files:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_a_killed_process_stops_the_other_and_a_rerun_resumes_bit_identical(one_process, tmp_path):
    """Process 1 dies (SIGKILL) right after its first checkpoint; process 0 finishes its seeds,
    then says which process stopped, writes nothing and leaves no folder. Rerunning both
    resumes each from its own checkpoint and ends equal to the uninterrupted one-process run."""
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def argv(i, port, dies=()):
        command = dies_after_first_save(COMMAND) if i in dies else COMMAND
        return [*command, "--out", str(out), "--checkpoint-dir", str(ckpt),
                "--checkpoint-every", "1", *_flags(i, port, 2)]  # fmt: skip

    killed = _launch(lambda i, port: argv(i, port, dies=(1,)), 2)
    assert killed[1].returncode == -signal.SIGKILL, killed[1].stderr[-2000:]
    assert killed[0].returncode == 2, killed[0].stderr[-2000:]
    last = killed[0].stderr.strip().splitlines()[-1]
    assert last.startswith("error: process 1 stopped before handing over its seeds"), last
    assert not out.exists()
    assert sorted(os.listdir(ckpt)) == ["process-0-of-2", "process-1-of-2"]
    resumed = _launch(argv, 2)
    for i, p in enumerate(resumed):
        assert p.returncode == 0, (i, p.stderr[-2000:])
    assert "2 of 4 episodes already done" in resumed[1].stdout
    assert "4 of 4 episodes already done" in resumed[0].stdout
    want = json.loads((one_process / "results.json").read_text())
    got = json.loads((out / "results.json").read_text())
    assert {k for k in want if want[k] != got.get(k)} <= HOW_IT_RAN | {"resumed"}
    with np.load(one_process / "snapshots.npz") as a, np.load(out / "snapshots.npz") as b:
        for name in a.files:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


FIT_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax
    jax.distributed.initialize(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    import numpy as np
    import policy_gnn_jax as pg
    ds = pg.load_dataset("csbm", num_nodes=1600)
    config = pg.Config.tiny(num_episodes=2, episodes_per_call=2)
    fit = pg.fit(ds, config, seeds=3, seed_mode="map", progress=False)
    if jax.process_index() == 0:
        depths = np.asarray(fit.predict_depths(ds.test_index)).tolist()
        print(json.dumps({"record": fit.record, "depths": depths}))
    """
)


def test_fit_over_two_processes_equals_one():
    done = _launch(
        lambda i, port: [sys.executable, "-c", FIT_SCRIPT, f"127.0.0.1:{port}", "2", str(i)], 2
    )
    for i, p in enumerate(done):
        assert p.returncode == 0, (i, p.stderr[-2000:])
    got = json.loads(done[0].stdout.strip().splitlines()[-1])
    ds = pg.load_dataset("csbm", num_nodes=1600)
    config = pg.Config.tiny(num_episodes=2, episodes_per_call=2)
    want = pg.fit(ds, config, seeds=3, seed_mode="map", progress=False)
    record = json.loads(json.dumps(want.record))
    assert {k for k in record if record[k] != got["record"].get(k)} <= HOW_IT_RAN
    assert got["depths"] == np.asarray(want.predict_depths(ds.test_index)).tolist()


@pytest.mark.parametrize(
    "count, me, seeds, block",
    [(1, 0, 5, (0, 5)), (2, 0, 5, (0, 3)), (2, 1, 5, (3, 5)), (3, 2, 5, (4, 5)), (3, 1, 6, (2, 4))],
)
def test_seed_blocks_cover_the_seeds_in_order(monkeypatch, count, me, seeds, block):
    monkeypatch.setattr(cluster, "count", lambda: count)
    monkeypatch.setattr(cluster, "index", lambda: me)
    assert processes.seed_block(seeds) == block


def test_fewer_seeds_than_processes_is_refused(monkeypatch):
    monkeypatch.setattr(cluster, "count", lambda: 4)
    with pytest.raises(pg.ConfigError, match="3 seeds cannot be shared by 4 processes"):
        processes.seed_block(3)


def test_a_checkpoint_folder_of_another_process_count_is_refused(small_dataset, tmp_path):
    (tmp_path / "ckpt" / "process-0-of-3").mkdir(parents=True)
    with pytest.raises(pg.ConfigError, match="run over 3 processes.*--num-processes 3"):
        pg.fit(small_dataset, pg.Config.tiny(num_episodes=2, episodes_per_call=2), seeds=1,
               progress=False, checkpoint_dir=tmp_path / "ckpt")  # fmt: skip


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--coordinator", "127.0.0.1:1234"], "go together"),
        (["--coordinator", "nohost", "--num-processes", "2", "--process-id", "0"], "HOST:PORT"),
        (["--coordinator", "h:1", "--num-processes", "2", "--process-id", "2"], "0..1"),
        (["--coordinator", "h:1", "--num-processes", "0", "--process-id", "0"], ">= 1"),
        (
            [
                "--seeds",
                "1",
                "--coordinator",
                "127.0.0.1:1",
                "--num-processes",
                "2",
                "--process-id",
                "0",
            ],
            "1 seeds cannot be shared by 2 processes",
        ),  # fmt: skip
    ],
)
def test_wrong_process_flags_are_one_error(tmp_path, flags, message):
    done = subprocess.run([*COMMAND, "--out", str(tmp_path / "o"), *flags], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error:") and message in last, last
    assert not (tmp_path / "o").exists()


def test_processes_started_with_different_runs_are_refused(tmp_path):
    """Different base seeds (or data, config, method) per process would join seeds of two runs
    into one record: every process refuses at the hand-over, and nothing is written."""
    out = tmp_path / "out"

    def argv(i, port):
        seed = ["--seed", "3"] if i == 1 else []
        return [*COMMAND, "--episodes", "2", "--out", str(out), *seed, *_flags(i, port, 2)]

    for i, p in enumerate(_launch(argv, 2)):
        assert p.returncode == 2, (i, p.stderr[-2000:])
        assert "process 1 ran another run than process 0" in p.stderr.strip().splitlines()[-1]
    assert not out.exists()


def test_a_run_refused_by_process_0_ends_every_process_with_one_line(tmp_path):
    """When process 0 refuses an --out holding a result, every process ends with one line: otherwise
    the other trains, then JAX aborts it (a C++ stack trace, status 134) when process 0's service
    goes away."""
    out = tmp_path / "held"
    out.mkdir()
    (out / "results.json").write_text("{}")
    done = _launch(lambda i, port: [*COMMAND, "--out", str(out), *_flags(i, port, 2)], 2)
    assert [p.returncode for p in done] == [2, 2], [p.stderr[-1500:] for p in done]
    assert done[0].stderr.strip().splitlines()[-1].startswith(f"error: {out} already holds")
    last = done[1].stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: process 0 refused the run: {out} already holds"), last


@pytest.mark.parametrize("process_id", [0, 1])
def test_a_process_whose_partner_never_starts_stops_with_one_line(tmp_path, process_id):
    """Process 1 without process 0, or process 0 without process 1: each waits
    POLICY_GNN_CONNECT_TIMEOUT_S (2.5: JAX takes whole seconds, and is given them), then stops
    with one line. Waiting inside JAX, it would be deaf to signals, and JAX would then abort it
    (a C++ stack trace, status 134)."""
    env = {**os.environ, cluster.CONNECT_TIMEOUT_ENV: "2.5"}
    argv = [*COMMAND, "--out", str(tmp_path / "o"), *_flags(process_id, _free_port(), 2)]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: could not join the other processes at 127.0.0.1:"), last
    assert "not every process joined in 2.5 s" in last and time.monotonic() - started >= 2.5
    assert "Traceback" not in done.stderr and "DEADLINE_EXCEEDED" not in done.stderr
    assert not (tmp_path / "o").exists()


def test_a_stop_signal_while_the_processes_join_is_one_line(tmp_path):
    """SIGTERM while process 0 waits for a partner that never comes ends it at once, with one
    line and status 143 (inside JAX's wait the signal would wait for JAX's abort)."""
    env = {**os.environ, cluster.CONNECT_TIMEOUT_ENV: "100"}
    argv = [*COMMAND, "--out", str(tmp_path / "o"), *_flags(0, _free_port(), 2)]
    run = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=env)
    for line in run.stderr:  # said after 5 s of waiting
        if line.startswith("waiting for the other processes"):
            run.send_signal(signal.SIGTERM)
            break
    rest = run.stderr.read()
    assert run.wait(timeout=60) == 143, rest[-2000:]
    assert rest.strip().splitlines()[-1].startswith("error: interrupted"), rest[-2000:]
    assert "Traceback" not in rest and "Check failure" not in rest


def test_a_bad_connect_timeout_is_one_error(tmp_path):
    env = {**os.environ, cluster.CONNECT_TIMEOUT_ENV: "soon"}
    argv = [*COMMAND, "--out", str(tmp_path / "o"), *_flags(1, _free_port(), 2)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2
    assert (
        "POLICY_GNN_CONNECT_TIMEOUT_S must be a number of seconds > 0, got 'soon'"
        in (done.stderr.strip().splitlines()[-1])
    )
