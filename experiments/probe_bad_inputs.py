"""Feed the project bad inputs and faults, as an adversarial user would, and tabulate the outcome.

  python experiments/probe_bad_inputs.py --data-dir ../shared/data/planetoid --out probes

Each probe runs in a fresh process (the CLI, reproduce.py, or a Python snippet against the API)
and is classified:
- `clear error`: non-zero exit, the last stderr line starts with `error:` (scripts) or names the
  exception type and the problem (API), and no traceback from inside JAX or the library;
- `TRACEBACK` / `EXIT 0 (wrong)`: a failure of the project (a probe expected to fail exited 0,
  or failed with a traceback).
Writes <out>/probes.md and <out>/probes.json, and exits 1 if any probe failed that way.
"""

from __future__ import annotations

import argparse
import gzip
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

from policy_gnn_jax.runtime import checkpoint

CLI = [sys.executable, "-m", "policy_gnn_jax.cli", "--no-progress"]
HERE = pathlib.Path(__file__).resolve().parent
REPRODUCE = [sys.executable, str(HERE / "reproduce.py")]


def script(name: str) -> list[str]:
    return [sys.executable, str(HERE / f"{name}.py")]


# A tiny generated graph for probes that need a run to start.
CSBM = ["--dataset", "csbm", "--csbm-nodes", "1600", "--seeds", "1"]
QUICK = ["--episodes", "1", "--steps-per-episode", "2", "--buffer-size", "16"]

API_PRELUDE = """
import warnings, numpy as np, policy_gnn_jax as pg
warnings.simplefilter("ignore")
rng = np.random.default_rng(0)
n = 60
labels = np.arange(n) % 2
x = rng.normal(size=(n, 4))
e = np.stack([np.arange(n - 1), np.arange(1, n)])
tr, va, te = np.arange(0, 10), np.arange(10, 30), np.arange(30, 60)
"""
API_CATCH = """
try:
    {body}
except (ValueError, FloatingPointError, pg.DataError) as err:
    print(f"error: {{type(err).__name__}}: {{err}}", file=__import__("sys").stderr)
    raise SystemExit(2)
"""


def probes(tmp: pathlib.Path, data_dir: str) -> list[tuple[str, list[str]]]:
    """(description, command) pairs."""
    out = ["--out", str(tmp / "out")]
    corrupt, truncated, empty = tmp / "corrupt", tmp / "truncated", tmp / "empty"
    for folder in (corrupt, truncated, empty):
        folder.mkdir(exist_ok=True)
    for name in os.listdir(data_dir):
        if name.startswith("ind.cora."):
            shutil.copy(pathlib.Path(data_dir, name), corrupt / name)
            shutil.copy(pathlib.Path(data_dir, name), truncated / name)
    raw = bytearray((corrupt / "ind.cora.x").read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    (corrupt / "ind.cora.x").write_bytes(bytes(raw))
    graph = (truncated / "ind.cora.graph").read_bytes()
    (truncated / "ind.cora.graph").write_bytes(graph[: len(graph) // 2])
    a_file = tmp / "a_file"
    a_file.write_text("x")
    bad_results = tmp / "bad_results"
    (bad_results / "cora" / "gcn-d1").mkdir(parents=True, exist_ok=True)
    (bad_results / "cora" / "gcn-d1" / "results.json").write_text('{"dataset": "co')
    not_zip, partial_zip = tmp / "arxiv_not_zip", tmp / "arxiv_partial"
    for folder in (not_zip, partial_zip):
        folder.mkdir(exist_ok=True)
    (not_zip / "arxiv.zip").write_bytes(b"not a zip")
    with zipfile.ZipFile(partial_zip / "arxiv.zip", "w") as z:
        z.writestr("arxiv/raw/edge.csv.gz", gzip.compress(b"0,1\n"))
    arxiv = ["--dataset", "ogbn-arxiv", "--no-download", "--data-dir"]
    ckpt_other = tmp / "ckpt_other"
    damaged = tmp / "ckpt_damaged"
    cli = [
        ("unknown dataset name", [*CLI, "--dataset", "coraa", *out]),
        ("unknown backbone", [*CLI, *CSBM, "--backbone", "gat", *out]),
        ("depth 0 on the gcn backbone", [*CLI, *CSBM, "--depths", "0-5", *out]),
        (
            "decoupled depths above 64",
            [*CLI, *CSBM, "--backbone", "decoupled", "--depths", "0-100", *out],
        ),
        ("teleport NaN", [*CLI, *CSBM, "--backbone", "decoupled", "--teleport", "nan", *out]),
        ("teleport 1", [*CLI, *CSBM, "--backbone", "decoupled", "--teleport", "1", *out]),
        ("hidden -1", [*CLI, *CSBM, "--hidden", "-1", *out]),
        ("dropout 1", [*CLI, *CSBM, "--dropout", "1", *out]),
        ("negative weight decay", [*CLI, *CSBM, "--weight-decay", "-1", *out]),
        (
            "fixed depth -1 (decoupled)",
            [*CLI, *CSBM, "--backbone", "decoupled", "--method", "gcn", "--depth", "-1", *out],
        ),
        (
            "Policy-GNN+ diverging (--gcn-lr 1e30)",
            [*CLI, *CSBM, "--method", "policy-gnn-plus", "--backbone", "decoupled"]
            + ["--epochs", "20", "--gcn-lr", "1e30", *out],
        ),
        (
            "Policy-GNN+ with 0 epochs",
            [*CLI, *CSBM, "--method", "policy-gnn-plus", "--epochs", "0", *out],
        ),
        ("empty dataset name", [*CLI, "--dataset", "", *out]),
        ("unknown method", [*CLI, "--method", "gat", *out]),
        ("unknown transition", [*CLI, "--transition", "teleport", *out]),
        ("--seeds 0", [*CLI, *CSBM[:-2], "--seeds", "0", *out]),
        ("--seeds -3", [*CLI, *CSBM[:-2], "--seeds", "-3", *out]),
        ("--seeds not a number", [*CLI, "--seeds", "ten", *out]),
        (
            "--seeds 1000000 on Cora (memory)",
            [*CLI, "--dataset", "cora", "--data-dir", data_dir, "--seeds", "1000000", *out],
        ),
        ("--seed 2**64", [*CLI, *CSBM, "--seed", "18446744073709551616", *out]),
        ("--seed -1", [*CLI, *CSBM, "--seed", "-1", *out]),
        ("--depths 2-", [*CLI, *CSBM, "--depths", "2-", *out]),
        ("--depths 5-2", [*CLI, *CSBM, "--depths", "5-2", *out]),
        ("--depths 0-3", [*CLI, *CSBM, "--depths", "0-3", *out]),
        ("--depths 1-11", [*CLI, *CSBM, "--depths", "1-11", *out]),
        ("--depths abc", [*CLI, *CSBM, "--depths", "abc", *out]),
        ("--depth 0 (gcn)", [*CLI, *CSBM, "--method", "gcn", "--depth", "0", *out]),
        ("--epochs 0", [*CLI, *CSBM, "--method", "gcn", "--epochs", "0", *out]),
        ("--episodes 0", [*CLI, *CSBM, "--episodes", "0", *out]),
        ("--episodes -5", [*CLI, *CSBM, "--episodes", "-5", *out]),
        ("--steps-per-episode 0", [*CLI, *CSBM, "--steps-per-episode", "0", *out]),
        ("--buffer-size 0", [*CLI, *CSBM, "--buffer-size", "0", *out]),
        ("--episodes-per-call 0", [*CLI, *CSBM, "--episodes-per-call", "0", *out]),
        ("--gcn-lr 0", [*CLI, *CSBM, "--gcn-lr", "0", *out]),
        ("--gcn-lr -1", [*CLI, *CSBM, "--gcn-lr", "-1", *out]),
        ("--gcn-lr nan", [*CLI, *CSBM, "--gcn-lr", "nan", *out]),
        ("--q-lr inf", [*CLI, *CSBM, "--q-lr", "inf", *out]),
        (
            "--gcn-lr 1e30 on Cora (GCN diverges)",
            [
                *CLI,
                "--dataset",
                "cora",
                "--data-dir",
                data_dir,
                "--seeds",
                "1",
                "--episodes",
                "2",
                "--gcn-lr",
                "1e30",
                *out,
            ],
        ),
        ("--gcn-lr 1e30, fixed depth", [*CLI, *CSBM, "--method", "gcn", "--gcn-lr", "1e30", *out]),
        (
            "--q-lr 1e30 (Q-network diverges)",
            [*CLI, *CSBM, "--episodes", "3", "--q-lr", "1e30", *out],
        ),
        (
            "--data-dir does not exist",
            [*CLI, "--dataset", "cora", "--data-dir", "/no/such/dir", *out],
        ),
        ("--data-dir is a file", [*CLI, "--dataset", "cora", "--data-dir", str(a_file), *out]),
        (
            "--data-dir empty, --no-download",
            [*CLI, "--dataset", "cora", "--data-dir", str(empty), "--no-download", *out],
        ),
        (
            "a raw file with one byte flipped",
            [*CLI, "--dataset", "cora", "--data-dir", str(corrupt), *out],
        ),
        ("a truncated raw file", [*CLI, "--dataset", "cora", "--data-dir", str(truncated), *out]),
        ("--out is an existing file", [*CLI, *CSBM, *QUICK, "--out", str(a_file)]),
        ("--out below a file", [*CLI, *CSBM, *QUICK, "--out", str(a_file / "x")]),
        ("--out in /proc (unwritable)", [*CLI, *CSBM, *QUICK, "--out", "/proc/policy_gnn_out"]),
        (
            "--csbm-nodes 100 (splits cannot fit)",
            [*CLI, "--dataset", "csbm", "--csbm-nodes", "100", *out],
        ),
        ("--csbm-nodes 0", [*CLI, "--dataset", "csbm", "--csbm-nodes", "0", *out]),
        ("--csbm-homophily 1.5", [*CLI, *CSBM, "--csbm-homophily", "1.5", *out]),
        ("--csbm-homophily nan", [*CLI, *CSBM, "--csbm-homophily", "nan", *out]),
        (
            "--checkpoint-dir is a file",
            [*CLI, *CSBM, *QUICK, "--checkpoint-dir", str(a_file), *out],
        ),
        ("--checkpoint-every 0", [*CLI, *CSBM, *QUICK, "--checkpoint-every", "0", *out]),
        (
            "--checkpoint-dir of another run",
            [*CLI, *CSBM, *QUICK, "--checkpoint-dir", str(ckpt_other), "--seeds", "2", *out],
        ),
        ("--checkpoint-dir damaged", [*CLI, *CSBM, *QUICK, "--checkpoint-dir", str(damaged), *out]),
        # Engines, sharding, ogbn-arxiv.
        ("--engine bogus", [*CLI, *CSBM, "--engine", "bogus", *out]),
        ("--fanouts a,b", [*CLI, *CSBM, "--fanouts", "a,b", *out]),
        ("--fanouts 5,-1", [*CLI, *CSBM, "--fanouts", "5,-1", *out]),
        (
            "--subgraph-nodes 1",
            [*CLI, *CSBM, "--engine", "subgraph", "--subgraph-nodes", "1", *out],
        ),
        (
            "--subgraph-edges below --subgraph-nodes",
            [*CLI, *CSBM, "--subgraph-nodes", "100", "--subgraph-edges", "50", *out],
        ),
        (
            "--subgraph-nodes below the training nodes",
            [*CLI, *CSBM, *QUICK, "--engine", "subgraph", "--subgraph-nodes", "10", *out],
        ),
        ("--devices 99", [*CLI, *CSBM, *QUICK, "--devices", "99", *out]),
        ("--devices 0", [*CLI, *CSBM, *QUICK, "--devices", "0", *out]),
        ("--seed-mode bogus", [*CLI, *CSBM, *QUICK, "--seed-mode", "bogus", *out]),
        ("--csbm-features 0", [*CLI, *CSBM, "--csbm-features", "0", *out]),
        ("--csbm-degree -1", [*CLI, *CSBM, "--csbm-degree", "-1", *out]),
        ("ogbn-arxiv: no zip, --no-download", [*CLI, *arxiv, str(empty), *out]),
        ("ogbn-arxiv: arxiv.zip is not a zip", [*CLI, *arxiv, str(not_zip), *out]),
        ("ogbn-arxiv: zip holding only the edges", [*CLI, *arxiv, str(partial_zip), *out]),
    ]
    reproduce = [
        (
            "reproduce: unknown dataset",
            [*REPRODUCE, "table", "--datasets", "coraa", "--out", str(tmp / "rep")],
        ),
        (
            "reproduce: --data-dir does not exist",
            [
                *REPRODUCE,
                "table",
                "--datasets",
                "cora",
                "--data-dir",
                "/no/such/dir",
                "--out",
                str(tmp / "rep"),
            ],
        ),
        (
            "reproduce: truncated results.json",
            [
                *REPRODUCE,
                "table",
                "--datasets",
                "cora",
                "--data-dir",
                data_dir,
                "--preset",
                "tiny",
                "--seeds",
                "1",
                "--out",
                str(bad_results),
            ],
        ),
        ("reproduce: figures with no runs", [*REPRODUCE, "figures", "--out", str(tmp / "none")]),
        (
            "reproduce: fig1 unknown dataset",
            [*REPRODUCE, "fig1", "--dataset", "x", "--out", str(tmp / "rep")],
        ),
        ("reproduce: --seeds 0", [*REPRODUCE, "table", "--seeds", "0", "--out", str(tmp / "rep")]),
        ("reproduce: --out is a file", [*REPRODUCE, "table", "--out", str(a_file)]),
        (
            "reproduce: --headroom-json below a file",
            [*REPRODUCE, "headroom", "--headroom-json", str(a_file / "h.json"), "--out", str(tmp)],
        ),
        (
            "adaptive_depth: missing --ablation-json",
            [*script("adaptive_depth"), "results", "--ablation-json", str(tmp / "none.json")],
        ),
        (
            "adaptive_depth: --results-json below a file",
            [*script("adaptive_depth"), "results", "--results-json", str(a_file / "r.json")],
        ),
        ("bench: unknown dataset", [*script("bench"), "--datasets", "coraa"]),
        ("bench: --seeds 0", [*script("bench"), "--seeds", "0"]),
        ("bench_gcn: --hidden 0", [*script("bench_gcn"), "--hidden", "0"]),
        ("bench_scale: graph below its splits", [*script("bench_scale"), "--sizes", "100"]),
        ("decoupled_forms: --seeds 0", [*script("decoupled_forms"), "--seeds", "0"]),
        ("tune_decoupled: unknown dataset", [*script("tune_decoupled"), "--datasets", "x"]),
    ]
    api = [
        ("API: NaN feature", "x[3, 1] = np.nan; pg.from_arrays(x, e, labels, tr, va, te)"),
        (
            "API: directed, symmetrise=False",
            "pg.from_arrays(x, e, labels, tr, va, te, symmetrise=False)",
        ),
        (
            "API: hand-built Dataset with directed edges",
            "import scipy.sparse as sp; pg.Dataset('d', sp.csr_matrix(x, dtype=np.float32), "
            "labels.astype(np.int32), e.astype(np.int32), tr.astype(np.int32), "
            "va.astype(np.int32), te.astype(np.int32), 2)",
        ),
        ("API: edges as floats", "pg.from_arrays(x, e + 0.5, labels, tr, va, te)"),
        ("API: edge id out of range", "pg.from_arrays(x, e + 1, labels, tr, va, te)"),
        ("API: overlapping splits", "pg.from_arrays(x, e, labels, tr, tr, te)"),
        ("API: unlabelled test node", "labels[40] = -1; pg.from_arrays(x, e, labels, tr, va, te)"),
        ("API: boolean mask as split", "pg.from_arrays(x, e, labels, np.arange(n) < 10, va, te)"),
        ("API: labels of the wrong length", "pg.from_arrays(x, e, labels[:10], tr, va, te)"),
        (
            "API: unknown method",
            "ds = pg.from_arrays(x, e, labels, tr, va, te); "
            "pg.fit(ds, pg.Config.tiny(), method='gat')",
        ),
        (
            "API: seeds=0",
            "ds = pg.from_arrays(x, e, labels, tr, va, te); pg.fit(ds, pg.Config.tiny(), seeds=0)",
        ),
        ("API: load a folder with no fit", "pg.load('/tmp')"),
        (
            "API: two graphs in a GraphsTuple",
            "import jraph; g = pg.from_arrays(x, e, labels, tr, "
            "va, te).to_jraph(); pg.from_jraph(jraph.batch([g, g]), labels, tr, va, te)",
        ),
        ("API: Config(dropout=1.0)", "pg.Config(dropout=1.0)"),
        ("API: depth 0 on the GCN backbone", "pg.Config(min_depth=0)"),
        ("API: unknown backbone", "pg.Config(backbone='gat')"),
        ("API: Policy-GNN+ switch misspelt", "pg.Config(plus_train_depths='some')"),
        ("API: Policy-GNN+ policy half of 100%", "pg.Config(plus_policy_fraction=1.0)"),
        (
            "API: predict node out of range",
            "ds = pg.from_arrays(x, e, labels, tr, va, te); "
            "f = pg.fit(ds, pg.Config.tiny(num_episodes=1), seeds=1, progress=False); "
            "f.predict([0, 10**6])",
        ),
    ]
    commands = [*cli, *reproduce]
    for name, body in api:
        code = API_PRELUDE + API_CATCH.format(body=body)
        commands.append((name, [sys.executable, "-c", code]))
    return commands


def prepare_checkpoints(tmp: pathlib.Path) -> None:
    """A finished checkpoint of another run (1 seed), and a damaged copy of it."""
    other, damaged = tmp / "ckpt_other", tmp / "ckpt_damaged"
    subprocess.run([*CLI, *CSBM, *QUICK, "--checkpoint-dir", str(other), "--out",
                    str(tmp / "ckpt_out")], check=True, capture_output=True)  # fmt: skip
    shutil.copytree(other, damaged)
    for path in damaged.rglob("*"):
        if path.is_file() and "run" in path.parts:
            path.write_bytes(b"garbage")


def classify(result: subprocess.CompletedProcess) -> tuple[str, str]:
    err = result.stderr.strip()
    last = err.splitlines()[-1] if err else ""
    if result.returncode == 0:
        return "EXIT 0 (wrong)", result.stdout.strip().splitlines()[-1:][0] if result.stdout else ""
    if "Traceback" in err:
        return "TRACEBACK", last
    if last.startswith("error:") or last.startswith("policy-gnn: error:") or ": error:" in last:
        return "clear error", last
    return "UNCLEAR", last


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data-dir", required=True, help="the Planetoid folder (Cora is used)")
    p.add_argument("--out", default="results/probes")
    p.add_argument(
        "--only",
        nargs="+",
        default=None,
        help="run only the probes whose name contains one of these",
    )
    args = p.parse_args()
    out = checkpoint.check_writable_dir(args.out)
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = pathlib.Path(tmp_name)
        prepare_checkpoints(tmp)
        env = {**os.environ, "POLICY_GNN_OFFLINE": "1", "XDG_CACHE_HOME": str(tmp / "cache")}
        env.pop("POLICY_GNN_DATA", None)
        for name, command in probes(tmp, args.data_dir):
            if args.only and not any(part in name for part in args.only):
                continue
            result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
            outcome, message = classify(result)
            rows.append({"probe": name, "exit": result.returncode, "outcome": outcome,
                         "message": message[:400]})  # fmt: skip
            print(f"[{outcome}] {name}: exit {result.returncode}: {message[:160]}", flush=True)
    failures = [r for r in rows if r["outcome"] != "clear error"]
    lines = ["| # | probe | exit | outcome | message |", "|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        message = r["message"].replace("|", "\\|")
        lines.append(f"| {i} | {r['probe']} | {r['exit']} | {r['outcome']} | {message} |")
    summary = (
        f"\n{len(rows)} probes: {len(rows) - len(failures)} clear errors, {len(failures)} not.\n"
    )
    checkpoint.atomic_write_text(out / "probes.md", "\n".join(lines) + summary)
    checkpoint.atomic_write_json(out / "probes.json", rows)
    print(summary)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
