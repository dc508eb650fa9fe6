"""How a command-line program ends: one `error:` line and exit status 2 for bad input, one line
and 130 (Ctrl-C) or 143 (SIGTERM, SIGHUP, SIGQUIT) for a stop, never a traceback; shared by the
`policy-gnn` command and the scripts in experiments/ and benchmarks/."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import warnings

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import data
from policy_gnn_jax.runtime import cluster, locks, runner

# What ends a command with one `error:` line (`error_line`) and status 2: the user's input going
# wrong, another process of a distributed run failing or out of reach (ProcessError), host memory
# running out, the file system refusing.
FAILURES = (data.DataError, ValueError, FloatingPointError, cluster.ProcessError, MemoryError,
            OSError)  # fmt: skip
Terminated = runner.Terminated
# The signals a scheduler, `kill` or a closed terminal end a run with (exit status 143).
TERMINATING = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def require_at_least_one(**counts: int) -> None:
    """Each named command-line count must be >= 1: `--seeds 0` is an error naming `--seeds`."""
    for name, value in counts.items():
        if value < 1:
            raise config_lib.ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {value}.")


def _stop(signum, frame) -> None:
    """A stop signal ends the run with a KeyboardInterrupt (`Terminated` for all but SIGINT).
    Noted once, so a second signal while the first unwinds changes nothing; inside JAX's
    garbage-collection callback or a finaliser, where a raise is printed and dropped, only
    noted: the runner raises it at its next check."""
    if runner.stop_signal:
        return
    runner.stop_signal.append(signum)
    if frame is None or frame.f_code.co_name not in ("_xla_gc_callback", "__del__"):
        runner.raise_if_stopped()


@contextlib.contextmanager
def guarded():
    """A command's run: SIGINT, SIGTERM, SIGHUP and SIGQUIT stop it through `_stop`, on the
    main thread; the caller's handlers come back afterwards."""
    previous = {}
    runner.stop_signal.clear()
    if threading.current_thread() is threading.main_thread():
        previous = {s: signal.signal(s, _stop) for s in (signal.SIGINT, *TERMINATING)}
    shown, warnings.showwarning = warnings.showwarning, _show_warning
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        warnings.showwarning = shown
        runner.stop_signal.clear()


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """The library's warnings as a command prints them: one `warning:` line each."""
    print(f"warning: {message}", file=sys.stderr)


def error_line(err: BaseException) -> str:
    """The sentence a command ends with for one of `FAILURES`."""
    if isinstance(err, MemoryError):
        return "out of host memory: run something smaller (fewer --seeds, a smaller graph)."
    if isinstance(err, OSError):  # the file system refused: a full disk, a name too long, ...
        return f"{err.strerror or err}{f' ({err.filename})' if err.filename else ''}."
    return str(err)


def stopped_status(stop: KeyboardInterrupt) -> int:
    """130 for a Ctrl-C, 143 for the signals that end a run, as shells report them."""
    return 143 if isinstance(stop, Terminated) else 130


def exit_status(command, *args, saves: bool = True) -> int:
    """Runs `command(*args)` for a script's `main`: 0, or 2 after one `error:` line when the
    input is bad, 130 / 143 after one line for a stop. `saves`: whether the script keeps runs it
    finished (the stop's line says so)."""
    with guarded():
        try:
            command(*args)
        except FAILURES as err:
            print(f"error: {error_line(err)}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as stop:
            code = stopped_status(stop)
            kept = "; runs saved before it are kept and reused" if saves else ""
            print(f"error: interrupted{kept}.", file=sys.stderr)
            return code
        finally:
            locks.release_output_locks()  # the next command of this process may write there
    return 0


def finish(code: int) -> None:
    """A script's exit. After a stop it leaves at once (os._exit): XLA may still be compiling
    on its own threads, and tearing the interpreter down under them crashed (SIGSEGV) after the
    `error:` line. Every file was written and closed by then."""
    if code in (130, 143):
        exit_now(code)
    sys.exit(code)


def exit_now(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # a closed pipe (`| head -1`) or a full device: nothing more to say
            pass
    os._exit(code)


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
