"""The `policy-gnn` command (also `python experiments/run.py` and `python -m policy_gnn_jax.cli`).

The command itself is `command.py`; this module stays light (no JAX) so that `launch`, what the
installed command runs, is in place before the slow imports start: a Ctrl-C while JAX loads is
then one line, not a traceback. Every name of `command` (`main`, `entry`, `exit_status`, ...)
is available here too, imported on first use.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys


def stopped_status(signum: int) -> int:
    """The exit status of a command a signal stopped: 130 for a Ctrl-C (SIGINT), 143 for the
    signals that end a run (SIGTERM, and a closed terminal's SIGHUP or a SIGQUIT alike), the same
    while starting as during a run."""
    return 130 if signum == signal.SIGINT else 143


def launch() -> int:
    """The installed `policy-gnn` command: imports the command, then runs it.

    A Ctrl-C or SIGTERM while JAX and its extensions load is held until they have loaded, then
    ends the command with one line: raised inside an extension's initialisation, it would
    surface as an ImportError traceback, or be swallowed by a library's optional import."""
    received = []
    held = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
    previous = {s: signal.signal(s, lambda signum, frame: received.append(signum)) for s in held}
    try:
        problem = jax_environment_problem()
        entry = None if problem else importlib.import_module("policy_gnn_jax.cli.command").entry
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if received:
        print("error: interrupted while starting; nothing was run.", file=sys.stderr)
        return stopped_status(received[0])
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    return entry()


def jax_environment_problem() -> str | None:
    """Imports JAX; what is wrong if it refuses its environment, else None. JAX reads every
    JAX_* variable while it is imported, and one it cannot parse raises a ValueError there."""
    try:
        importlib.import_module("jax")
    except ValueError as err:
        named = sorted(v for v in os.environ if v.startswith("JAX_"))
        if not named:
            raise
        return (
            f"JAX cannot start with this environment ({err}): fix or unset the variable it "
            f"names (set now: {', '.join(named)})."
        )
    return None


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    # The package's import lock (the package is always imported before this module): JAX's
    # imports are not safe from several threads at once.
    with sys.modules["policy_gnn_jax"]._IMPORTING:
        command = importlib.import_module("policy_gnn_jax.cli.command")
    return getattr(command, name)
