"""The one line an interrupted `policy-gnn` run ends with: whether its result is complete, and
where it can resume from."""

from __future__ import annotations

import pathlib


def result_stamp(args, out: pathlib.Path | None):
    """The identity of the result file in `out` (None: none): a changed one is this run's."""
    path = out / ("results.json" if args.splits is not None else "fit.json") if out else None
    try:
        info = path.stat() if path is not None else None
    except OSError:
        return None
    return None if info is None else (info.st_ino, info.st_mtime_ns)


def interrupted_line(args, out: pathlib.Path | None, before=None) -> str:
    """Where an interrupted run can resume from, in one sentence. `before`: `result_stamp` at
    the start (an --overwrite run's folder holds the previous result until the new one lands)."""
    stamp = result_stamp(args, out)
    if stamp is not None and stamp != before:  # the signal landed after this run's save
        return f"interrupted after the result was saved in {out}; it is complete."
    if args.splits is not None and out is not None:
        if any(out.glob("split-*/fit.json")):
            return (
                f"interrupted; the splits finished so far are saved in {out}/split-*: run the "
                f"same command to go on from them."
            )
        if not args.checkpoint_dir:
            return "interrupted before the first split finished; nothing was saved."
    if not args.checkpoint_dir:
        return "interrupted; nothing was saved (pass --checkpoint-dir DIR to make a run resumable)."
    folder = pathlib.Path(args.checkpoint_dir).absolute()
    if args.splits is not None:  # each split checkpoints in a folder of its own
        started = sorted(folder.glob("split-*"), key=lambda p: p.stat().st_mtime)
        folder = started[-1] if started else folder
    # A run over several processes checkpoints each in its own `process-I-of-N` inside.
    steps = [int(p.name) for p in [*folder.glob("*"), *folder.glob("process-*-of-*/*")]
             if p.name.isascii() and p.name.isdigit()]  # fmt: skip
    if not steps:
        return f"interrupted before the first checkpoint in {folder}; nothing to resume from."
    return (
        f"interrupted; the last checkpoint is in {folder} (chunk {max(steps)}): run the same "
        f"command to resume from it."
    )
