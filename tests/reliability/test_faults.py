"""Faults: a closed or full standard output or a full disk ends with one line naming the
cause, and loses no result or checkpoint."""

import io
import subprocess
import sys

import pytest


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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE")
def test_a_full_disk_is_one_of_the_librarys_errors_naming_the_file(tmp_path):
    """A full disk is one of the library's errors naming the file, not a bare `OSError: [Errno 27]
    File too large` that names no file."""
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-800:]
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith(f"save CheckpointError cannot write {tmp_path}/fit")
    assert lines[1].startswith(f"write_csbm DataError cannot write {tmp_path}/g")
    assert "File too large" in lines[0] and "nothing was replaced" in lines[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE")
def test_a_checkpoint_on_a_full_disk_is_one_checkpoint_error(tmp_path):
    """One CheckpointError naming the folder and the reason."""
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK_CHECKPOINT, str(tmp_path / "ck")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-1500:]
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith(f"CheckpointError cannot write the checkpoint in {tmp_path / 'ck'}")
    assert "File too large" in line
