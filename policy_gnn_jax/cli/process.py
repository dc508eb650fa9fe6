"""How a command-line program ends: one `error:` line and an exit status for bad input and for
a Ctrl-C or SIGTERM, never a traceback; shared by the `policy-gnn` command and the scripts in
experiments/ and benchmarks/."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import pathlib
import signal
import subprocess
import sys
import threading

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import data
from policy_gnn_jax.cli import starting, stopped_status
from policy_gnn_jax.runtime import checkpoint, files, processes, runner

# Everything that is the user's input going wrong (all exit 2 with one `error:` line).
# ProcessError: another process of a distributed run failed or could not be reached.
INPUT_ERRORS = (data.DataError, ValueError, FloatingPointError, processes.ProcessError)


def require_at_least_one(**counts: int) -> None:
    """Each named command-line count must be >= 1: `--seeds 0` is an error naming `--seeds`."""
    for name, value in counts.items():
        if value < 1:
            raise config_lib.ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {value}.")


@contextlib.contextmanager
def guarded():
    """A command's run: SIGINT, SIGTERM, SIGHUP and SIGQUIT stop it through `stop_on_signal`
    (the main thread only), and standard output cannot fail it (`TolerantStdout`: one warning
    at the end).
    The caller's handlers and stdout come back afterwards."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        runner.clear_stop()
        previous = {s: signal.signal(s, stop_on_signal) for s in checkpoint.STOP_SIGNALS}
    stdout = sys.stdout = TolerantStdout(sys.stdout)
    try:
        yield
    finally:
        sys.stdout = stdout.stream
        if stdout.failed is not None:  # the run went on; only what it printed was lost
            why = stdout.failed.strerror or stdout.failed
            print(f"warning: standard output could not be written ({why}); the results are in "
                  f"the files.", file=sys.stderr)  # fmt: skip
        for s, handler in previous.items():  # a caller in the same process keeps its own
            signal.signal(s, handler)
        runner.clear_stop()


def exit_status(command, *args, saves: bool = True, folders=()) -> int:
    """Runs `command(*args)` for a script's `main`: 0, or 2 after one `error:` line when the
    input is bad (the policy-gnn command's convention), 130 / 143 after one line for a Ctrl-C /
    SIGTERM. `saves`: whether the script keeps runs it finished (the message says so).
    `folders`: the folders the script writes into; those it makes and leaves empty on the way
    out of a failed run are removed."""
    held = starting.release()
    if held is not None:  # a stop while the script's imports loaded
        print("error: interrupted while starting; nothing was run.", file=sys.stderr)
        return stopped_status(held)
    made = files.absent_folders(folders)
    files.FOLDERS_MADE.clear()  # those the command makes for its outputs join `made`
    with guarded():
        try:
            check_xla_flags()
            command(*args)
            files.release_output_locks()  # the next command of this process may write there
        except INPUT_ERRORS as err:
            print(f"error: {err}", file=sys.stderr)
            return _remove_empty(made, 2)
        except MemoryError:
            print("error: out of host memory: run something smaller.", file=sys.stderr)
            return _remove_empty(made, 2)
        except OSError as err:  # the file system refused: a full disk, a folder where a file goes
            where = f" ({err.filename})" if err.filename else ""
            print(f"error: {err.strerror or err}{where}.", file=sys.stderr)
            return _remove_empty(made, 2)
        except KeyboardInterrupt as stop:
            kept = "; runs saved before it are kept and reused" if saves else ""
            print(f"error: interrupted{kept}.", file=sys.stderr)
            return _remove_empty(made, 143 if isinstance(stop, Terminated) else 130)
    return 0


def _remove_empty(made: list[pathlib.Path], code: int) -> int:
    """Removes the folders of `made` that hold no file (with their empty sub-folders: all of
    them this run's own), the deepest first; returns `code`."""
    files.release_output_locks()  # their lock files first: a failed run leaves none
    files.remove_folders_left_empty(made)
    return code


def finish(code: int) -> None:
    """A script's exit. After a signal it leaves at once (os._exit): XLA may still be compiling
    on its own threads, and tearing the interpreter down under them crashed (SIGSEGV) after the
    `error:` line. Nothing is left to save by then."""
    if code in (130, 143):
        exit_now(code)
    sys.exit(code)


def tune_malloc() -> None:
    """glibc returns XLA's large scratch buffers to the OS after every call, which doubled the
    time of large programs here (docs/performance.md): raise both thresholds before JAX
    allocates anything."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 30)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    except OSError:  # not glibc: nothing to tune
        pass


Terminated = runner.Terminated


def stop_on_signal(signum, frame):
    # Inside a garbage-collection callback (JAX runs one) a raised exception is printed as
    # "Exception ignored in ..." with a traceback and dropped: note the stop instead; the runner
    # raises it at its next check, and `main` reports one that came too late for any check.
    # A finaliser (`__del__`, a progress bar's among them) drops what it raises the same way.
    if frame is not None and frame.f_code.co_name in ("_xla_gc_callback", "__del__"):
        runner.note_stop(signum)
        return
    runner.request_stop(signum)


def exit_now(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def late_stop(code: int, signum: int) -> int:
    """The exit status for a signal that came after `main` returned `code`: a finished run is
    complete, which the line says; a failed one has said why already."""
    if code != 0:
        return code
    print("error: interrupted after the run had finished; its result is complete.",
          file=sys.stderr)  # fmt: skip
    return 130 if signum == signal.SIGINT else 143


class TolerantStdout:
    """Standard output that a closed pipe (`| head -1`) or a full device cannot turn into a
    traceback after the work is done: the first failed write is remembered (`failed`), later
    output is dropped, and the file descriptor is pointed at /dev/null so that Python's own
    flush at exit cannot fail either."""

    def __init__(self, stream):
        self.stream, self.failed = stream, None

    def write(self, text: str) -> int:
        if self.failed is None:
            try:
                return self.stream.write(text)
            except OSError as err:  # BrokenPipeError, ENOSPC, EIO, ...
                self._give_up(err)
        return len(text)

    def flush(self) -> None:
        if self.failed is None:
            try:
                self.stream.flush()
            except OSError as err:
                self._give_up(err)

    def _give_up(self, err: OSError) -> None:
        self.failed = err
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # no file descriptor (a test's capture): nothing to flush
            pass

    def __getattr__(self, name):
        return getattr(self.stream, name)


def check_xla_flags() -> None:
    """XLA_FLAGS that XLA cannot parse end the process from C++ (a fatal log line, status 1)
    the moment a backend starts, with no chance to say more: they are tried first in a child
    process (on the CPU: no accelerator memory is touched), once per value and jaxlib version,
    the answer cached, and refused with one line."""
    flags = os.environ.get("XLA_FLAGS", "").strip()
    if not flags and os.environ.get("XLA_FLAGS"):  # XLA reads blanks as the name of a file
        raise runner.ResourceError(
            "XLA_FLAGS is blank, which XLA cannot start with (it reads it as the name of a file "
            "of flags): unset XLA_FLAGS, or give it flags."
        )
    if not flags:
        return
    import jaxlib

    key = hashlib.sha256(f"{jaxlib.__version__}\0{flags}".encode()).hexdigest()
    cache = data.planetoid.default_cache_dir().parent / "xla-flags-checked" / key
    if cache.exists():
        return
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    tried = subprocess.run([sys.executable, "-c", "import jax; jax.devices()"], env=env,
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    if tried.returncode != 0:
        lines = [line for line in tried.stderr.splitlines() if line.strip()]
        # XLA's own complaint: its first error log line ("Unknown flags in XLA_FLAGS", "Couldn't
        # interpret value"); the generic "Check failed" and the help for every flag follow it.
        logged = [line for line in lines if line[:1] in "EF" and line[1:5].isdigit()]
        logged = [line for line in logged if "Check failed" not in line] or logged
        said = logged[0] if logged else lines[-1] if lines else ""
        raise runner.ResourceError(
            f"XLA cannot start with XLA_FLAGS={flags!r} ({said.split('] ')[-1][:200]}): fix or "
            f"unset XLA_FLAGS."
        )
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.touch()
    except OSError:  # no cache: the check runs again next time
        pass
