"""Stops: a signal or Ctrl-C, at any point of a run, ends it with one line naming what was
saved, and loses no result or checkpoint."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import split_graph_gcn
from reliability_helpers import QUICK, ROOT

from policy_gnn_jax import cli

SIGNAL_DURING_PUBLISH = """
import os, signal, sys
# A run whose Ctrl-C is handled: a child inherits an ignored SIGINT, and the whole suite's
# process was seen to have one (a background shell job's is ignored too).
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, sys.argv[2])
import policy_gnn_jax as pg
from reliability_helpers import toy_graph
ds = toy_graph()
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


def _child(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env,
    )  # fmt: skip


def _args(*argv):
    return cli.build_parser().parse_args(list(argv))


@pytest.mark.parametrize("stop, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_ends_with_one_line_naming_the_last_checkpoint(tmp_path, stop, code):
    """A signal ends the run with one line naming the last checkpoint: not a KeyboardInterrupt
    traceback (SIGINT), nor a SIGTERM that kills the run with no word and leaves its
    empty output folder."""
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


def test_a_signal_during_the_final_save_lands_after_it(tmp_path):
    """A SIGTERM during the final save lands after it: landing between the renames, it would leave
    results.json of one run beside snapshots.npz of the other. Run in a fresh process with SIGINT
    handled: late in the whole suite SIGINT is ignored at the OS level, which a child inherits."""
    tests = str(pathlib.Path(__file__).parent)
    done = subprocess.run([sys.executable, "-c", SIGNAL_DURING_PUBLISH, str(tmp_path / "f"), tests],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "interrupted after the save, seed 1"


def test_a_double_ctrl_c_during_training_is_one_line(tmp_path):
    """The end-to-end form of the second-signal test: two SIGINTs 20 ms apart."""
    proc = subprocess.Popen(
        [sys.executable, "experiments/run.py", "--dataset", "csbm", "--csbm-nodes", "1600",
         "--seeds", "1", "--episodes", "400", "--no-progress", "--out", str(tmp_path / "o")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.stdout.readline()  # the dataset's summary: JAX is loaded, training starts
    time.sleep(1.0)
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: interrupted"), err[-3000:]
    assert not (tmp_path / "o").exists()


def test_an_interrupt_before_the_first_split_says_nothing_was_saved(tmp_path):
    args = cli.build_parser().parse_args(["--dataset", "x.npz", "--splits", "all"])
    assert "before the first split finished" in cli.interrupted_line(args, tmp_path)
    (tmp_path / "split-0").mkdir()
    (tmp_path / "split-0" / "fit.json").write_text("{}")
    assert "finished so far are saved" in cli.interrupted_line(args, tmp_path)


def test_a_run_folder_interrupted_before_its_result_is_removed(tmp_path, monkeypatch):
    """A `reproduce.py table` run stopped by a signal removes its run folder rather than leave it
    empty."""
    from policy_gnn_jax.contrib.reproduction import runs

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runs, "_run_or_load", stopped)
    with pytest.raises(KeyboardInterrupt):
        runs.run_or_load(tmp_path / "run", None, None, "gcn", 1)
    assert not (tmp_path / "run").exists()


def test_an_overwrite_stopped_before_its_save_is_not_called_complete(tmp_path):
    """An --overwrite run stopped during training is not called "interrupted after the result was
    saved; it is complete" because the previous run's fit.json is there."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "fit.json").write_text("{}")
    args = _args("--out", str(out), "--overwrite")
    before = cli.result_stamp(args, out)
    assert "complete" not in cli.interrupted_line(args, out, before)
    (out / "new.json").write_text("{}")
    os.replace(out / "new.json", out / "fit.json")  # as the save publishes a new file
    assert "it is complete" in cli.interrupted_line(args, out, before)


def test_a_stopped_sweep_with_checkpoints_names_them(tmp_path):
    """A stopped sweep names <checkpoint-dir>/split-0 and its checkpoints to resume, not "nothing
    was saved"."""
    (tmp_path / "ck" / "split-0" / "2").mkdir(parents=True)
    args = _args("--dataset", "x.npz", "--splits", "0-1", "--checkpoint-dir", str(tmp_path / "ck"))
    line = cli.interrupted_line(args, tmp_path / "o")
    assert str(tmp_path / "ck" / "split-0") in line and "(chunk 2)" in line, line


def test_a_stopped_run_over_processes_names_its_checkpoints(tmp_path):
    """Each process of a run over several checkpoints in its own folder inside the one named."""
    (tmp_path / "ck" / "process-0-of-2" / "4").mkdir(parents=True)
    args = _args("--checkpoint-dir", str(tmp_path / "ck"))
    line = cli.interrupted_line(args, tmp_path / "o")
    assert "(chunk 4)" in line and "nothing to resume" not in line, line


def test_an_interrupted_overwrite_of_a_sweep_leaves_no_stale_summary(tmp_path, monkeypatch):
    """Stopped after its first split, an --overwrite sweep leaves no old results.json beside a
    split-0 that holds the new run. (Splits run apart: a sweep run as one program saves its splits
    only once all have trained.)"""
    from policy_gnn_jax import api, cli

    out = str(tmp_path / "sw")
    gcn = split_graph_gcn(tmp_path)
    assert cli.main([*gcn, "--epochs", "2", "--splits", "0-1", "--out", out]) == 0
    real_fit, calls = api.fit, []

    def stopped_on_the_second_split(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(api, "fit", stopped_on_the_second_split)
    again = [*gcn, "--epochs", "3", "--splits", "0-1", "--out", out, "--overwrite",
             "--split-map", "apart"]  # fmt: skip
    assert cli.main(again) == 130
    assert not (tmp_path / "sw" / "results.json").exists()
    split0 = json.loads((tmp_path / "sw" / "split-0" / "results.json").read_text())
    assert split0["config"]["epochs"] == 3
