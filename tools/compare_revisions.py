"""Are two revisions of the project bit-identical? Runs the same commands in both and compares.

    python tools/compare_revisions.py --before 5607949            # against the working tree
    python tools/compare_revisions.py --before A --after B

Each command is `experiments/run.py ...` run in a clean `git worktree` of the revision (for the
"after" side with no --after, a copy of the working tree taken at the start, so edits made while it
runs change nothing), with that tree first on PYTHONPATH. The two
`results.json` are compared field by field (every field but the wall time and package versions;
the config compared on the fields both revisions have) and the two `snapshots.npz` array by array,
bit for bit; a field only the "after" side has is listed as added, not as a difference. "Before"
outputs are cached under --cache by revision and command, so a rerun after
more changes only trains the "after" side. Exit 0 when every command matches, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Per-seed records of Policy-GNN, the random policy and the fixed-depth GCN on Cora, and the
# other paths a restructure could disturb: decoupled backbone, subgraph engine, mapped seeds,
# audit, Policy-GNN+. Short runs: identity needs the same bits, not the paper's length. The
# seed mode is named: the default depends on the backend.
COMMANDS = {
    "cora-policy-gnn": "--dataset cora --seeds 10 --episodes 30 --seed-mode vmap",
    "cora-random": "--dataset cora --method random --seeds 10 --episodes 30 --seed-mode vmap",
    "cora-gcn-depth2": "--dataset cora --method gcn --depth 2 --seeds 10 --seed-mode vmap",
    "cora-decoupled-gcn": (
        "--dataset cora --backbone decoupled --method gcn --epochs 60 --seeds 4 --seed-mode vmap"
    ),
    "cora-map-audit": "--dataset cora --seeds 3 --episodes 10 --seed-mode map --audit",
    "csbm-subgraph": "--dataset csbm --engine subgraph --seeds 3 --episodes 6 --seed-mode vmap",
    "cora-plus": (
        "--dataset cora --backbone decoupled --method policy-gnn-plus --epochs 40 --seeds 3 "
        "--seed-mode vmap"
    ),
}
VOLATILE = {"wall_time_s", "versions"}


def worktree(rev: str, where: pathlib.Path) -> pathlib.Path:
    if not where.exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), rev],
            check=True,
            capture_output=True,
        )
    return where


def copy_of_work_tree(where: pathlib.Path) -> pathlib.Path:
    """The files git tracks or would track (not the ignored ones), copied as they are now."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"],
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = ROOT / name.decode()
        if source.is_file():
            target = where / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return where


def run(tree: pathlib.Path, args: str, out: pathlib.Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(tree))
    command = [sys.executable, "experiments/run.py", *args.split(), "--out", str(out)]
    command.append("--no-progress")
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(command)} failed:\n{done.stderr[-2000:]}")


# Record fields under other names in earlier revisions: compared under today's.
RENAMED = {
    "test_accuracy": "test_metric",
    "val_accuracy": "val_metric",
    "val_accuracy_curve": "val_metric_curve",
    "val_accuracy_note": "val_metric_note",
    "policy_half_accuracy_curve": "policy_half_metric_curve",
}


def differences(before: pathlib.Path, after: pathlib.Path) -> tuple[list[str], list[str]]:
    """(fields that differ, fields only the after side has). A field the after revision added
    is listed apart: it is new information, not a changed result."""
    a = json.loads((before / "results.json").read_text())
    b = json.loads((after / "results.json").read_text())
    a = {RENAMED.get(key, key): value for key, value in a.items()}
    found = []
    for key in sorted(set(a) | set(b)):
        if key in VOLATILE or key not in a:
            continue
        if key == "config":
            shared = set(a[key]) & set(b[key])
            found += [f"config.{k}" for k in sorted(shared) if a[key][k] != b[key][k]]
        elif a.get(key) != b.get(key):
            found.append(key)
    with np.load(before / "snapshots.npz") as x, np.load(after / "snapshots.npz") as y:
        if sorted(x.files) != sorted(y.files):
            found.append("snapshots.npz: other arrays")
        else:
            found += [
                f"snapshots.npz:{name}"
                for name in x.files
                if x[name].dtype != y[name].dtype or x[name].tobytes() != y[name].tobytes()
            ]
    return found, sorted(set(b) - set(a))


def _rev_parse(revision: str) -> str:
    """The commit `revision` names, or RevisionError saying why git cannot tell."""
    argv = ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{revision}^{{commit}}"]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise RevisionError(f"git does not know the revision {revision} in {ROOT} ({said}): name "
                            f"a commit, tag or branch of this checkout.")  # fmt: skip
    return done.stdout.strip()


class RevisionError(Exception):
    """A revision git cannot resolve, or no git checkout here."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="a git revision")
    parser.add_argument("--after", default=None, help="a git revision (default: the work tree)")
    parser.add_argument("--only", nargs="*", default=None, choices=sorted(COMMANDS))
    parser.add_argument("--cache", default=str(pathlib.Path(tempfile.gettempdir()) / "pgj-cmp"))
    args = parser.parse_args()
    cache = pathlib.Path(args.cache)
    try:
        before_rev = _rev_parse(args.before)
        before_tree = worktree(before_rev, cache / f"tree-{before_rev[:12]}")
        after_rev = None if args.after is None else _rev_parse(args.after)
    except RevisionError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as err:  # the worktree of a known revision
        said = (err.stderr or b"").decode(errors="replace").strip().splitlines() or [str(err)]
        print(f"error: git worktree add failed ({said[-1]}): remove {cache} or pass another "
              f"--cache.", file=sys.stderr)  # fmt: skip
        return 2
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="after-", dir=cache))
    if after_rev is None:
        after_tree = copy_of_work_tree(scratch / "tree")
    else:
        after_tree = worktree(after_rev, cache / f"tree-{after_rev[:12]}")
    failures = 0
    for name in args.only or COMMANDS:
        line = COMMANDS[name]
        tag = hashlib.sha256(line.encode()).hexdigest()[:8]
        before_out = cache / f"out-{before_rev[:12]}-{name}-{tag}"
        if not (before_out / "results.json").exists():
            shutil.rmtree(before_out, ignore_errors=True)
            run(before_tree, line, before_out)
        after_out = scratch / name
        run(after_tree, line, after_out)
        found, added = differences(before_out, after_out)
        failures += bool(found)
        record = json.loads((after_out / "results.json").read_text())
        test = record["test_metric"]
        verdict = "identical" if not found else "DIFFERENT: " + ", ".join(found[:8])
        if added:
            verdict += f" (fields added: {', '.join(added)})"
        print(
            f"{name:20s} {len(test['per_seed'])} seeds, test {test['mean']:.4f} ± "
            f"{test['std']:.4f}: {verdict}",
            flush=True,
        )
    print(f"{len(args.only or COMMANDS) - failures} identical, {failures} different")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
