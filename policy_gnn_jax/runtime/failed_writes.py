"""A checkpoint write that failed (a full disk, a quota): its reason in a few words, and quiet
while it fails. orbax and tensorstore print dozens of tracebacks from their threads and from
asyncio's log as such a write fails; the run reports one error instead."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import pathlib
import re
import sys
import tempfile
import time


def reason(err: Exception) -> str:
    """The reason a write failed, in a few words: the OS's ("No space left on device") where
    orbax's message of several thousand characters holds one."""
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    found = re.search(r"([A-Za-z][^:\[\]]*?)\s*\[os_error_code='?(\d+)", str(err))
    if found:
        return f"{found.group(1).strip()}, errno {found.group(2)}"
    return " ".join(str(err).split())[:200]


def close_quietly(manager, directory: pathlib.Path) -> None:
    """Closes a manager whose write failed, inside `_stderr_held`: its threads' last complaints,
    and asyncio's log of each write task whose failure nobody read (when the task is collected),
    land there; any later one about `directory` is filtered out of asyncio's log."""
    try:
        manager.close()
    except Exception:  # the write's own error is the one reported
        pass
    gc.collect()
    logging.getLogger("asyncio").addFilter(_NotAbout(str(directory)))


class _NotAbout(logging.Filter):
    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage() and "Event loop is closed" not in str(
            record.exc_info[1] if record.exc_info else ""
        )


class _HeldStream:
    def __init__(self, file):
        self.file, self.dropped = file, False

    def drop(self) -> None:
        self.dropped = True

    def wait_until_quiet(self, quiet_s: float = 0.3, at_most_s: float = 3.0) -> None:
        """Waits until nothing was written for `quiet_s` seconds (at most `at_most_s`)."""
        deadline, size, since = time.monotonic() + at_most_s, -1, time.monotonic()
        while time.monotonic() < deadline:
            now = os.fstat(self.file.fileno()).st_size
            if now != size:
                size, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return
            time.sleep(0.05)


@contextlib.contextmanager
def stderr_held():
    """Standard error (the file descriptor, so native threads' output too) goes to a temporary
    file while the block runs, and is written out after it unless `drop()` was called."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as file:
        held = _HeldStream(file)
        os.dup2(file.fileno(), 2)
        try:
            yield held
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if not held.dropped:
                file.seek(0)
                os.write(2, file.read())
