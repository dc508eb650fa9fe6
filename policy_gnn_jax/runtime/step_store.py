"""Where a `checkpoint.Checkpointer` keeps its numbered steps (each: the run's arrays and a
small JSON meta), the two newest kept.

- `OrbaxSteps`, for a run in one process: orbax's `CheckpointManager`.
- `FileSteps`, for each process of a run over several: one `.npz` and one JSON file per step.
  Every process checkpoints only its own seeds, in its own folder; orbax, once JAX runs over
  several processes, writes numpy arrays from process 0 alone and expects the others to take
  part in process 0's checkpoints, which is not this layout.

Both give the same four operations, so the checkpointer's logic (fingerprints, locks,
resume, fault injection) is one.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil

import jax
import numpy as np

KEEP = 2  # the newest steps kept: the last one may be cut short by a crash


class OrbaxSteps:
    def __init__(self, directory: pathlib.Path):
        import orbax.checkpoint as ocp  # heavy import: only when checkpoints are asked for

        self._ocp = ocp
        options = ocp.CheckpointManagerOptions(
            max_to_keep=KEEP, enable_async_checkpointing=False, create=True
        )
        self._manager = ocp.CheckpointManager(directory, options=options)

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def read_meta(self, step: int) -> dict:
        args = self._ocp.args.Composite(meta=self._ocp.args.JsonRestore())
        return self._manager.restore(step, args=args).meta

    def read_run(self, step: int, target):
        args = self._ocp.args.Composite(run=self._ocp.args.StandardRestore(target))
        return self._manager.restore(step, args=args).run

    def write(self, step: int, run, meta: dict) -> None:
        ocp = self._ocp
        args = ocp.args.Composite(run=ocp.args.StandardSave(run), meta=ocp.args.JsonSave(meta))
        self._manager.save(step, args=args, force=True)
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.close()


class FileSteps:
    """Step `K` is the folder `K` holding `run.npz` (the leaves in tree order) and `meta.json`.
    It is written as `K.partial-<pid>` and renamed when whole, so a folder named by a number
    is always complete."""

    def __init__(self, directory: pathlib.Path):
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def _steps(self) -> list[int]:
        return sorted(
            int(p.name)
            for p in self.directory.iterdir()
            if p.name.isdigit() and (p / "meta.json").is_file()
        )

    def latest_step(self) -> int | None:
        steps = self._steps()
        return steps[-1] if steps else None

    def read_meta(self, step: int) -> dict:
        return json.loads((self.directory / str(step) / "meta.json").read_text())

    def read_run(self, step: int, target):
        leaves, treedef = jax.tree.flatten(target)
        with np.load(self.directory / str(step) / "run.npz", allow_pickle=False) as stored:
            arrays = [stored[f"arr_{i}"] for i in range(len(stored.files))]
        want = [(tuple(x.shape), np.dtype(x.dtype)) for x in leaves]
        if [(a.shape, a.dtype) for a in arrays] != want:
            raise ValueError("Structure mismatch: the saved arrays are not this run's state")
        return jax.tree.unflatten(treedef, arrays)

    def write(self, step: int, run, meta: dict) -> None:
        partial = self.directory / f"{step}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        with open(partial / "run.npz", "wb") as f:
            np.savez(f, *[np.asarray(x) for x in jax.tree.leaves(run)])
            f.flush()
            os.fsync(f.fileno())
        (partial / "meta.json").write_text(json.dumps(meta))
        final = self.directory / str(step)
        if final.exists():  # the same step again (a rerun): replaced, as orbax's force=True
            shutil.rmtree(final)
        os.replace(partial, final)
        for old in self._steps()[:-KEEP]:
            shutil.rmtree(self.directory / str(old), ignore_errors=True)

    def close(self) -> None:
        pass
