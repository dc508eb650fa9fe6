"""Faults: a closed or full standard output, a full disk or a diverging run ends with one
line naming the cause, and loses no result or checkpoint."""

import io
import subprocess
import sys

import pytest
from reliability_helpers import ROOT, TINY_RUN, run_python

import policy_gnn_jax as pg
from policy_gnn_jax import cli


class _ClosedPipe(io.StringIO):
    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self):
        raise io.UnsupportedOperation


FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails, not kills
import policy_gnn_jax as pg
ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
fitted = pg.fit(ds, pg.Config.tiny(num_episodes=1), seeds=1, progress=False)
resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))  # as if the disk filled up
for name, call in [("save", lambda: fitted.save(sys.argv[1] + "/fit")),
                   ("write_csbm", lambda: pg.data.write_csbm(sys.argv[1] + "/g", num_nodes=5000))]:
    try:
        call()
    except (pg.CheckpointError, pg.DataError) as err:
        print(name, type(err).__name__, err)
"""


FULL_DISK_CHECKPOINT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails, not kills
import policy_gnn_jax as pg
ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))  # as if the disk filled up
try:
    pg.fit(ds, pg.Config.tiny(num_episodes=1), seeds=1, progress=False,
           checkpoint_dir=sys.argv[1])
except pg.CheckpointError as err:
    print("CheckpointError", err)
"""


@pytest.fixture
def debug_nans():
    import jax

    jax.config.update("jax_debug_nans", True)
    yield
    jax.config.update("jax_debug_nans", False)


def test_a_full_or_closed_standard_output_loses_nothing(tmp_path):
    """Before: `> /dev/full` or `| head -1` ended in an OSError or BrokenPipeError traceback,
    after or before the save."""
    with open("/dev/full", "w") as full:
        done = run_python(*TINY_RUN, "--out", str(tmp_path / "o"), stdout=full)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines() == [
        "warning: standard output could not be written (No space left on device); the results "
        "are in the files."
    ]
    assert pg.load(tmp_path / "o").record["method"] == "gcn"
    piped = subprocess.Popen(
        [sys.executable, *TINY_RUN, "--out", str(tmp_path / "p")], cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    piped.stdout.readline()
    piped.stdout.close()  # as `| head -1` does
    err = piped.stderr.read()
    assert piped.wait(timeout=300) == 0, err
    assert "Traceback" not in err
    assert pg.load(tmp_path / "p").record["method"] == "gcn"


def test_a_script_whose_output_is_closed_finishes_its_work(monkeypatch, capsys):
    """Before: only the policy-gnn command survived a closed standard output; the scripts
    (exit_status) raised BrokenPipeError and wrote nothing."""
    done = []

    def work():
        print("a table line")
        done.append(True)

    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert cli.exit_status(work) == 0
    assert done == [True]
    assert "standard output could not be written (Broken pipe)" in capsys.readouterr().err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE")
def test_a_full_disk_is_one_of_the_librarys_errors_naming_the_file(tmp_path):
    """Before: a bare `OSError: [Errno 27] File too large` that named no file."""
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-800:]
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith(f"save CheckpointError cannot write {tmp_path}/fit")
    assert lines[1].startswith(f"write_csbm DataError cannot write {tmp_path}/g")
    assert "File too large" in lines[0] and "nothing was replaced" in lines[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE")
def test_a_checkpoint_on_a_full_disk_is_one_error_and_no_traceback(tmp_path):
    """Before: orbax's ValueError, after dozens of asyncio and absl tracebacks."""
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK_CHECKPOINT, str(tmp_path / "ck")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-1500:]
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith(f"CheckpointError cannot write the checkpoint in {tmp_path / 'ck'}")
    assert "File too large" in line


def test_a_divergence_under_jax_debug_nans_is_the_divergence_error(debug_nans):
    """Before: JAX_DEBUG_NANS=1 turned the one-line divergence error into JAX's traceback."""
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    cfg = pg.Config.tiny(gcn_lr=1e30, epochs=3)
    with pytest.raises(pg.DivergenceError, match="JAX_DEBUG_NANS stopped the run at its first"):
        pg.fit(ds, cfg, method="gcn", seeds=1, progress=False)
