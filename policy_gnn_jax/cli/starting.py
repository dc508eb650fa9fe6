"""Imported first by the scripts under experiments/ and benchmarks/: a Ctrl-C (or SIGTERM,
SIGHUP, SIGQUIT) while a script's slow imports load (JAX and its extensions take a second or
more) is held, and the script then ends with one line (`exit_status` reads it) instead of a
traceback from inside an import, or a silent death.

It acts only for a script run as a program (`python script.py`: its `__main__` has no module
spec) on the main thread; imported by tests or other code it changes nothing.
"""

from __future__ import annotations

import signal
import sys
import threading

HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_received: list[int] = []
_previous: dict = {}


def _record(signum, frame) -> None:
    _received.append(signum)


def _run_as_a_program() -> bool:
    main = sys.modules.get("__main__")
    return (
        main is not None
        and getattr(main, "__spec__", None) is None
        and threading.current_thread() is threading.main_thread()
    )


def release() -> int | None:
    """The caller's handlers back; the first signal received while held, or None."""
    while _previous:
        signum, handler = _previous.popitem()
        signal.signal(signum, handler)
    return _received[0] if _received else None


if _run_as_a_program():
    _previous.update({s: signal.signal(s, _record) for s in HELD})
    from policy_gnn_jax.cli import jax_environment_problem

    if problem := jax_environment_problem():  # before the script's imports meet it
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
