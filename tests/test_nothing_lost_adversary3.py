"""Findings of the fifth adversarial pass over the command line's signals and messages: each a
test that failed before its fix."""

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from policy_gnn_jax import cli
from policy_gnn_jax.cli import process
from policy_gnn_jax.runtime import runner

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _warnings(capsys, *argv):
    cli.warn_unused_flags(cli.build_parser().parse_args(list(argv)))
    return capsys.readouterr().err


def test_a_set_that_replaces_a_flag_says_so(capsys):
    """Before: `--episodes 3 --set num_episodes=5` ran 5 episodes with no word about the 3."""
    assert "--set num_episodes=5 replaces --episodes 3." in _warnings(
        capsys, "--episodes", "3", "--set", "num_episodes=5"
    )
    assert "--set backbone=decoupled replaces --backbone gcn." in _warnings(
        capsys, "--backbone", "gcn", "--set", "backbone=decoupled"
    )
    assert "--set min_depth=3 replaces --depths 2-4." in _warnings(
        capsys, "--depths", "2-4", "--set", "min_depth=3"
    )
    assert _warnings(capsys, "--episodes", "3", "--set", "num_episodes=3") == ""  # agree


def test_a_set_that_replaces_a_flag_changes_the_config_as_before():
    args = cli.build_parser().parse_args(["--hidden", "8", "--set", "hidden=16"])
    assert cli.config_from_args(args).hidden == 16


def test_a_hidden_flag_the_method_never_reads_is_warned_about(capsys):
    """Before: only `--set q_lr=` was warned about; `--q-lr` was dropped silently."""
    err = _warnings(capsys, "--method", "gcn", "--q-lr", "0.5", "--fanouts", "5,5")
    assert "warning: --q-lr is not used by --method gcn." in err
    assert "warning: --fanouts is not used by --method gcn." in err
    err = _warnings(capsys, "--method", "random", "--q-lr", "0.5")
    assert "--q-lr is not used by --method random" in err


def test_an_uppercase_npz_path_keeps_its_split_and_its_results_under_results(capsys):
    """Before: `--dataset /d/TEXAS.NPZ --split 3` warned that --split was not used (it was),
    and the default output folder was made beside the data file."""
    argv = ["--dataset", "/data/ü/TEXAS.NPZ", "--split", "3", "--method", "gcn"]
    assert _warnings(capsys, *argv) == ""
    args = cli.build_parser().parse_args(argv)
    stem = cli._default_stem(args, cli.config_from_args(args))
    assert stem.startswith("texas-split3-") and "/" not in stem


def test_a_second_signal_while_the_first_unwinds_is_not_raised():
    """Before: a second Ctrl-C 0.01-0.1 s after the first raised inside the clean-up, which
    printed a traceback or crashed the process (SIGSEGV) under XLA's compile threads."""
    runner.clear_stop()
    try:
        with pytest.raises(KeyboardInterrupt):
            process.stop_on_signal(signal.SIGINT, None)
        process.stop_on_signal(signal.SIGINT, None)  # returns
        process.stop_on_signal(signal.SIGTERM, None)
        assert runner.stop_requested() == signal.SIGINT
    finally:
        runner.clear_stop()
    with pytest.raises(KeyboardInterrupt):  # the next run stops again
        process.stop_on_signal(signal.SIGINT, None)
    runner.clear_stop()


def _child(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env,
    )  # fmt: skip


def test_a_signal_after_the_run_finished_is_one_line_and_its_status():
    """Before: a signal while the interpreter shut down after a finished run ended the process
    by the signal (status -2), with nothing on stderr. The command now leaves without that
    shutdown (os._exit), so the signals here come just after the run."""
    finished = _child(
        """
        import os, signal, sys
        from policy_gnn_jax.cli import command
        command.main = lambda: (os.kill(os.getpid(), signal.SIGINT), 0)[1]
        sys.exit(command.entry())
        """
    )
    assert finished.returncode == 130, finished.stderr
    assert finished.stderr == (
        "error: interrupted after the run had finished; its result is complete.\n"
    )
    failed = _child(
        """
        import os, signal, sys
        from policy_gnn_jax.cli import command
        command.main = lambda: (os.kill(os.getpid(), signal.SIGINT), 2)[1]
        sys.exit(command.entry())
        """
    )
    assert (failed.returncode, failed.stderr) == (2, "")  # its own error line said why already


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


def test_the_interrupt_line_names_the_folder_checkpoints_were_rescued_to(tmp_path):
    """Before: after the checkpoint folder's lock was lost and later checkpoints went to
    `<dir>.rescued-*`, a Ctrl-C named the original folder and its older chunk."""
    ck = tmp_path / "ck"
    (ck / "2").mkdir(parents=True)
    rescued = tmp_path / f"ck.rescued-20261127-073312-959351-{os.getpid()}"
    (rescued / "3").mkdir(parents=True)
    (tmp_path / "ck.rescued-20261127-073312-959351-1").mkdir()  # another process's
    args = cli.build_parser().parse_args(["--checkpoint-dir", str(ck)])
    line = cli.interrupted_line(args, None)
    assert str(rescued) in line and "(chunk 3)" in line, line


def test_a_command_line_of_non_strings_is_one_error(capsys):
    """Before: bytes, paths or ints in `main`'s argv gave a TypeError traceback from argparse."""
    for argv in ([b"--dataset"], ["--seeds", 3], ["--out", pathlib.Path("x")]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: argv must hold strings only") and err.count("\n") == 1


def test_a_dataset_source_that_is_not_text_is_named():
    """Before: a lone surrogate in `source` gave a UnicodeEncodeError naming neither field nor
    fix."""
    import dataclasses

    import policy_gnn_jax as pg

    ds = pg.load_dataset("csbm", num_nodes=1600)
    with pytest.raises(pg.InvalidDatasetError, match="source is not valid text"):
        dataclasses.replace(ds, source="/data/\ud800")


def test_an_api_checkpoint_folder_of_other_files_is_named_in_the_apis_words(tmp_path):
    """Before: `fit(..., checkpoint_dir=)` was told about `--checkpoint-dir` only."""
    import policy_gnn_jax as pg

    (tmp_path / "mine.txt").write_text("x")
    ds = pg.load_dataset("csbm", num_nodes=1600)
    with pytest.raises(pg.CheckpointError, match="checkpoint_dir") as err:
        pg.fit(ds, pg.Config.tiny(epochs=1), method="gcn", seeds=1, progress=False,
               checkpoint_dir=tmp_path)  # fmt: skip
    assert str(tmp_path) in str(err.value) and "mine.txt" in str(err.value)


def test_a_csbm_degree_that_is_not_a_number_is_named():
    """Before: NaN passed `avg_degree <= 0` and failed later as "cannot convert float NaN to
    integer"."""
    from policy_gnn_jax import data

    for degree in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="avg_degree must be a finite number"):
            data.make_csbm(num_nodes=1600, avg_degree=degree)
