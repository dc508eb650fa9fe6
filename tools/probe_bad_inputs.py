"""Feed the project bad inputs and faults, as an adversarial user would, and tabulate the outcome.

  python tools/probe_bad_inputs.py --data-dir PATH/TO/planetoid --out probes

The probes are `tools/probes.py`'s table (the tests run the same table in process). Here each
runs in a fresh process and is classified:
- `clear error`: non-zero exit, the last stderr line starts with `error:` (scripts) or names the
  exception type and the problem (API), and no traceback from inside JAX or the library;
- `TRACEBACK` / `EXIT 0 (wrong)` / `UNCLEAR`: a failure of the project.
Writes <out>/probes.md and <out>/probes.json, and exits 1 if any probe failed that way.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import tempfile

import probes  # tools/probes.py, beside this script

from policy_gnn_jax.cli import exit_status, finish
from policy_gnn_jax.config import ConfigError
from policy_gnn_jax.runtime import locks, outputs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data-dir", required=True, help="the Planetoid folder (Cora is used)")
    p.add_argument("--out", default="results/probes")
    p.add_argument(
        "--only",
        nargs="+",
        default=None,
        help="run only the probes whose name contains one of these",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an earlier table in --out")
    args = p.parse_args(argv)
    failed: list = []
    code = exit_status(run, args, failed, saves=False)
    return code or (1 if failed else 0)


def run(args, failed: list) -> None:
    """Every probe in a fresh process; the probes that failed the project go into `failed`."""
    if not pathlib.Path(args.data_dir).is_dir():
        raise outputs.CheckpointError(
            f"--data-dir {args.data_dir} is not a folder: point it at the Planetoid folder (the "
            f"one holding ind.cora.*)."
        )
    names = [name for name, _ in probes.CLI_PROBES + probes.SCRIPT_PROBES + probes.API_PROBES]
    if args.only and not any(part in name for name in names for part in args.only):
        raise ConfigError(
            f"--only {' '.join(args.only)} matches no probe's name: pass part of a name from "
            f"tools/probes.py."
        )
    out = outputs.check_writable_dir(args.out)
    for name in ("probes.md", "probes.json"):
        locks.claim_output_file(out / name, "the probe table", args.overwrite)
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = pathlib.Path(tmp_name)
        paths = probes.prepare(tmp, args.data_dir)
        env = {**os.environ, "POLICY_GNN_OFFLINE": "1", "XDG_CACHE_HOME": str(tmp / "cache")}
        env.pop("POLICY_GNN_DATA", None)
        for name, command in probes.all_commands(paths):
            if args.only and not any(part in name for part in args.only):
                continue
            result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
            outcome, message = probes.classify(result)
            rows.append({"probe": name, "exit": result.returncode, "outcome": outcome,
                         "message": message[:400]})  # fmt: skip
            print(f"[{outcome}] {name}: exit {result.returncode}: {message[:160]}", flush=True)
    failed += [r for r in rows if r["outcome"] != "clear error"]
    lines = ["| # | probe | exit | outcome | message |", "|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        message = r["message"].replace("|", "\\|")
        lines.append(f"| {i} | {r['probe']} | {r['exit']} | {r['outcome']} | {message} |")
    summary = f"\n{len(rows)} probes: {len(rows) - len(failed)} clear errors, {len(failed)} not.\n"
    outputs.atomic_write_text(out / "probes.md", "\n".join(lines) + summary)
    outputs.atomic_write_json(out / "probes.json", rows)
    print(summary)


if __name__ == "__main__":
    finish(main())
