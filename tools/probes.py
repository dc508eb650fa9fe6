"""Bad inputs and faults, as an adversarial user would try them: the project's probe table.

Each probe is a command line (`@cli` = the policy-gnn command, `@reproduce` = reproduce.py,
`@NAME` = experiments/ or benchmarks/NAME.py) or a Python snippet against the API; `{name}` in an
argument is a file `prepare` made. Every probe must end in one clear error: a non-zero exit whose
last stderr line starts with `error:` (or names the exception and the problem, for the API), and
no traceback. `tests/test_probes.py` runs each in process; `tools/probe_bad_inputs.py` runs each
in a fresh process and writes the table. The API's probes are in `api_probes.py`.
"""

from __future__ import annotations

import gzip
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

from api_probes import API_CATCH, API_PRELUDE, API_PROBES  # tools/, beside this file

ROOT = pathlib.Path(__file__).resolve().parents[1]
# A tiny generated graph for probes that need a run to start.
CSBM = ["--dataset", "csbm", "--csbm-nodes", "1600", "--seeds", "1"]
QUICK = ["--episodes", "1", "--steps-per-episode", "2", "--buffer-size", "16"]
OUT = ["--out", "{tmp}/out"]
ARXIV = ["--dataset", "ogbn-arxiv", "--no-download", "--data-dir"]
# experiments/heterophily.py with every file it writes below {tmp}, never in docs/results.
HET = [
    "--datasets",
    "texas",
    "--out",
    "{tmp}/het",
    "--options-json",
    "{tmp}/het/o.json",
    "--results-json",
    "{tmp}/het/r.json",
    "--figure",
    "{tmp}/het/f.png",
    "--num-splits",
]

CLI_PROBES = [
    ("unknown dataset name", ["@cli", "--dataset", "coraa", *OUT]),
    ("unknown backbone", ["@cli", *CSBM, "--backbone", "gat", *OUT]),
    ("depth 0 on the gcn backbone", ["@cli", *CSBM, "--depths", "0-5", *OUT]),
    (
        "decoupled depths above 64",
        ["@cli", *CSBM, "--backbone", "decoupled", "--depths", "0-100", *OUT],
    ),
    ("teleport NaN", ["@cli", *CSBM, "--backbone", "decoupled", "--teleport", "nan", *OUT]),
    ("teleport 1", ["@cli", *CSBM, "--backbone", "decoupled", "--teleport", "1", *OUT]),
    ("hidden -1", ["@cli", *CSBM, "--hidden", "-1", *OUT]),
    ("dropout 1", ["@cli", *CSBM, "--dropout", "1", *OUT]),
    ("negative weight decay", ["@cli", *CSBM, "--weight-decay", "-1", *OUT]),
    (
        "fixed depth -1 (decoupled)",
        ["@cli", *CSBM, "--backbone", "decoupled", "--method", "gcn", "--depth", "-1", *OUT],
    ),
    (
        "Policy-GNN+ diverging (--gcn-lr 1e30)",
        ["@cli", *CSBM, "--method", "policy-gnn-plus", "--backbone", "decoupled"]
        + ["--epochs", "20", "--gcn-lr", "1e30", *OUT],
    ),
    (
        "Policy-GNN+ with 0 epochs",
        ["@cli", *CSBM, "--method", "policy-gnn-plus", "--epochs", "0", *OUT],
    ),
    ("empty dataset name", ["@cli", "--dataset", "", *OUT]),
    ("unknown method", ["@cli", "--method", "gat", *OUT]),
    ("unknown transition", ["@cli", "--transition", "teleport", *OUT]),
    ("--seeds 0", ["@cli", *CSBM[:-2], "--seeds", "0", *OUT]),
    ("--seeds -3", ["@cli", *CSBM[:-2], "--seeds", "-3", *OUT]),
    ("--seeds not a number", ["@cli", "--seeds", "ten", *OUT]),
    (
        "--seeds 1000000 on Cora (memory)",
        ["@cli", "--dataset", "cora", "--data-dir", "{data_dir}", "--seeds", "1000000", *OUT],
    ),
    ("--seed 2**64", ["@cli", *CSBM, "--seed", "18446744073709551616", *OUT]),
    ("--seed -1", ["@cli", *CSBM, "--seed", "-1", *OUT]),
    ("--depths 2-", ["@cli", *CSBM, "--depths", "2-", *OUT]),
    ("--depths 5-2", ["@cli", *CSBM, "--depths", "5-2", *OUT]),
    ("--depths 0-3", ["@cli", *CSBM, "--depths", "0-3", *OUT]),
    ("--depths 1-11", ["@cli", *CSBM, "--depths", "1-11", *OUT]),
    ("--depths abc", ["@cli", *CSBM, "--depths", "abc", *OUT]),
    ("--depth 0 (gcn)", ["@cli", *CSBM, "--method", "gcn", "--depth", "0", *OUT]),
    ("--epochs 0", ["@cli", *CSBM, "--method", "gcn", "--epochs", "0", *OUT]),
    ("--episodes 0", ["@cli", *CSBM, "--episodes", "0", *OUT]),
    ("--episodes -5", ["@cli", *CSBM, "--episodes", "-5", *OUT]),
    ("--steps-per-episode 0", ["@cli", *CSBM, "--steps-per-episode", "0", *OUT]),
    ("--buffer-size 0", ["@cli", *CSBM, "--buffer-size", "0", *OUT]),
    ("--episodes-per-call 0", ["@cli", *CSBM, "--episodes-per-call", "0", *OUT]),
    ("--gcn-lr 0", ["@cli", *CSBM, "--gcn-lr", "0", *OUT]),
    ("--gcn-lr -1", ["@cli", *CSBM, "--gcn-lr", "-1", *OUT]),
    ("--gcn-lr nan", ["@cli", *CSBM, "--gcn-lr", "nan", *OUT]),
    ("--q-lr inf", ["@cli", *CSBM, "--q-lr", "inf", *OUT]),
    (
        "--gcn-lr 1e30 on Cora (GCN diverges)",
        [
            "@cli",
            "--dataset",
            "cora",
            "--data-dir",
            "{data_dir}",
            "--seeds",
            "1",
            "--episodes",
            "2",
            "--gcn-lr",
            "1e30",
            *OUT,
        ],
    ),
    ("--gcn-lr 1e30, fixed depth", ["@cli", *CSBM, "--method", "gcn", "--gcn-lr", "1e30", *OUT]),
    (
        "--q-lr 1e30 (Q-network diverges)",
        ["@cli", *CSBM, "--episodes", "3", "--q-lr", "1e30", *OUT],
    ),
    (
        "--data-dir does not exist",
        ["@cli", "--dataset", "cora", "--data-dir", "/no/such/dir", *OUT],
    ),
    ("--data-dir is a file", ["@cli", "--dataset", "cora", "--data-dir", "{a_file}", *OUT]),
    (
        "--data-dir empty, --no-download",
        ["@cli", "--dataset", "cora", "--data-dir", "{empty}", "--no-download", *OUT],
    ),
    (
        "a raw file with one byte flipped",
        ["@cli", "--dataset", "cora", "--data-dir", "{corrupt}", *OUT],
    ),
    ("a truncated raw file", ["@cli", "--dataset", "cora", "--data-dir", "{truncated}", *OUT]),
    ("--out is an existing file", ["@cli", *CSBM, *QUICK, "--out", "{a_file}"]),
    ("--out below a file", ["@cli", *CSBM, *QUICK, "--out", "{a_file}/x"]),
    ("--out in /proc (unwritable)", ["@cli", *CSBM, *QUICK, "--out", "/proc/policy_gnn_out"]),
    (
        "--csbm-nodes 100 (splits cannot fit)",
        ["@cli", "--dataset", "csbm", "--csbm-nodes", "100", *OUT],
    ),
    ("--csbm-nodes 0", ["@cli", "--dataset", "csbm", "--csbm-nodes", "0", *OUT]),
    ("--csbm-homophily 1.5", ["@cli", *CSBM, "--csbm-homophily", "1.5", *OUT]),
    ("--csbm-homophily nan", ["@cli", *CSBM, "--csbm-homophily", "nan", *OUT]),
    (
        "--checkpoint-dir is a file",
        ["@cli", *CSBM, *QUICK, "--checkpoint-dir", "{a_file}", *OUT],
    ),
    ("--checkpoint-every 0", ["@cli", *CSBM, *QUICK, "--checkpoint-every", "0", *OUT]),
    (
        "--checkpoint-dir of another run",
        ["@cli", *CSBM, *QUICK, "--checkpoint-dir", "{ckpt_other}", "--seeds", "2", *OUT],
    ),
    ("--checkpoint-dir damaged", ["@cli", *CSBM, *QUICK, "--checkpoint-dir", "{damaged}", *OUT]),
    # Engines, sharding, ogbn-arxiv.
    ("--engine bogus", ["@cli", *CSBM, "--engine", "bogus", *OUT]),
    ("--fanouts a,b", ["@cli", *CSBM, "--fanouts", "a,b", *OUT]),
    ("--fanouts 5,-1", ["@cli", *CSBM, "--fanouts", "5,-1", *OUT]),
    (
        "--subgraph-nodes 1",
        ["@cli", *CSBM, "--engine", "subgraph", "--subgraph-nodes", "1", *OUT],
    ),
    (
        "--subgraph-edges below --subgraph-nodes",
        ["@cli", *CSBM, "--subgraph-nodes", "100", "--subgraph-edges", "50", *OUT],
    ),
    (
        "--subgraph-nodes below the training nodes",
        ["@cli", *CSBM, *QUICK, "--engine", "subgraph", "--subgraph-nodes", "10", *OUT],
    ),
    ("--devices 99", ["@cli", *CSBM, *QUICK, "--devices", "99", *OUT]),
    ("--devices 0", ["@cli", *CSBM, *QUICK, "--devices", "0", *OUT]),
    ("--seed-mode bogus", ["@cli", *CSBM, *QUICK, "--seed-mode", "bogus", *OUT]),
    ("--csbm-features 0", ["@cli", *CSBM, "--csbm-features", "0", *OUT]),
    ("--csbm-degree -1", ["@cli", *CSBM, "--csbm-degree", "-1", *OUT]),
    ("ogbn-arxiv: no zip, --no-download", ["@cli", *ARXIV, "{empty}", *OUT]),
    ("ogbn-arxiv: arxiv.zip is not a zip", ["@cli", *ARXIV, "{not_zip}", *OUT]),
    ("ogbn-arxiv: zip holding only the edges", ["@cli", *ARXIV, "{partial_zip}", *OUT]),
    # Results, checkpoints and inputs that could be lost or silently changed.
    ("--out already holds a result", ["@cli", *CSBM, *QUICK, "--out", "{has_result}"]),
    (
        "--checkpoint-dir is a folder of other files",
        ["@cli", *CSBM, *QUICK, "--checkpoint-dir", "{user_folder}", *OUT],
    ),
    (
        "--data-dir lacking one raw file",
        ["@cli", "--dataset", "cora", "--data-dir", "{partial}", *OUT],
    ),
    ("--buffer-size 10000000000", ["@cli", *CSBM, "--buffer-size", "10000000000", *OUT]),
    ("--set hidden=16.5", ["@cli", *CSBM, "--set", "hidden=16.5", *OUT]),
    ("--set no such field", ["@cli", *CSBM, "--set", "hiden=16", *OUT]),
    ("--set without a value", ["@cli", *CSBM, "--set", "hidden", *OUT]),
    ("--csbm-seed -1", ["@cli", *CSBM, "--csbm-seed", "-1", *OUT]),
    ("a folder of arrays without meta.json", ["@cli", "--dataset", "{no_meta}", *OUT]),
    ("--engine host with --audit", ["@cli", *CSBM, "--engine", "host", "--audit", *OUT]),
    (
        "--engine host with the walk",
        ["@cli", *CSBM, "--engine", "host", "--transition", "walk", *OUT],
    ),
    (
        "--csbm-nodes 1000000000 (host memory)",
        ["@cli", "--dataset", "csbm", "--csbm-nodes", "1000000000", *OUT],
    ),
]

SCRIPT_PROBES = [
    (
        "reproduce: unknown dataset",
        ["@reproduce", "table", "--datasets", "coraa", "--out", "{tmp}/rep"],
    ),
    (
        "reproduce: --data-dir does not exist",
        [
            "@reproduce",
            "table",
            "--datasets",
            "cora",
            "--data-dir",
            "/no/such/dir",
            "--out",
            "{tmp}/rep",
        ],
    ),
    (
        "reproduce: truncated results.json",
        [
            "@reproduce",
            "table",
            "--datasets",
            "cora",
            "--data-dir",
            "{data_dir}",
            "--preset",
            "tiny",
            "--seeds",
            "1",
            "--out",
            "{bad_results}",
        ],
    ),
    ("reproduce: figures with no runs", ["@reproduce", "figures", "--out", "{tmp}/none"]),
    (
        "reproduce: fig1 unknown dataset",
        ["@reproduce", "fig1", "--dataset", "x", "--out", "{tmp}/rep"],
    ),
    ("reproduce: --seeds 0", ["@reproduce", "table", "--seeds", "0", "--out", "{tmp}/rep"]),
    ("reproduce: --out is a file", ["@reproduce", "table", "--out", "{a_file}"]),
    (
        "reproduce: --headroom-json below a file",
        ["@reproduce", "headroom", "--headroom-json", "{a_file}/h.json", "--out", "{tmp}"],
    ),
    (
        "adaptive_depth: missing --ablation-json",
        ["@adaptive_depth", "results", "--ablation-json", "{tmp}/none.json"],
    ),
    (
        "adaptive_depth: --results-json below a file",
        ["@adaptive_depth", "results", "--results-json", "{a_file}/r.json"],
    ),
    ("bench: unknown dataset", ["@bench", "--datasets", "coraa"]),
    ("bench: --seeds 0", ["@bench", "--seeds", "0"]),
    ("bench_gcn: --hidden 0", ["@bench_gcn", "--hidden", "0"]),
    ("bench_scale: graph below its splits", ["@bench_scale", "--sizes", "100"]),
    ("decoupled_forms: --seeds 0", ["@decoupled_forms", "--seeds", "0"]),
    ("tune_decoupled: unknown dataset", ["@tune_decoupled", "--datasets", "x"]),
    ("heterophily: more splits than texas has", ["@heterophily", "study", *HET, "11"]),
    (
        "heterophily: --results-json not .json",
        ["@heterophily", "study", *HET, "1", "--results-json", "{tmp}/het/r.txt"],
    ),
    (
        "heterophily: options among one",
        ["@heterophily", "options", *HET, "1", "--options", "ego", "ego"],
    ),
    (
        "heterophily: --results-json not its own",
        ["@heterophily", "study", *HET, "1", "--results-json", "{not_ours_json}"],
    ),
    ("bench_scale: --degree nan", ["@bench_scale", "--sizes", "2000", "--degree", "nan"]),
]


# The arguments that name the real Cora files or copies of them: a probe holding one needs them.
CORA_PATHS = ("{data_dir}", "{corrupt}", "{truncated}", "{partial}")


def needs_cora(command: list[str]) -> bool:
    return any(part in CORA_PATHS for part in command)


def prepare(tmp: pathlib.Path, data_dir: str | None) -> dict[str, str]:
    """Makes the damaged files and folders the probes name; returns {name: path}. Without
    `data_dir` (the real Planetoid files) the copies of Cora are left empty: the probes that
    read them (`needs_cora`) cannot run."""
    corrupt, truncated, empty = tmp / "corrupt", tmp / "truncated", tmp / "empty"
    for folder in (corrupt, truncated, empty):
        folder.mkdir(exist_ok=True)
    cora = sorted(n for n in os.listdir(data_dir) if n.startswith("ind.cora.")) if data_dir else []
    for name in cora:
        shutil.copy(pathlib.Path(data_dir, name), corrupt / name)
        shutil.copy(pathlib.Path(data_dir, name), truncated / name)
    if cora:
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
    ckpt_other = tmp / "ckpt_other"
    damaged = tmp / "ckpt_damaged"
    _prepare_checkpoints(tmp)
    has_result, user_folder, partial = tmp / "has_result", tmp / "user_folder", tmp / "partial"
    for folder in (has_result, user_folder, partial):
        folder.mkdir(exist_ok=True)
    (has_result / "results.json").write_text('{"kept": true}')
    (user_folder / "notes.txt").write_text("mine")
    for name in cora:
        if not name.endswith(".graph"):
            shutil.copy(pathlib.Path(data_dir, name), partial / name)
    not_ours_json, no_meta = tmp / "not_ours.json", tmp / "no_meta"
    not_ours_json.write_text("[1, 2]")
    no_meta.mkdir(exist_ok=True)
    (no_meta / "labels.npy").write_bytes(b"")
    names = ("tmp", "corrupt", "truncated", "empty", "a_file", "bad_results", "not_zip",
             "partial_zip", "ckpt_other", "damaged", "has_result", "user_folder",
             "partial", "not_ours_json", "no_meta")  # fmt: skip
    where = locals()
    paths = {name: str(where[name]) for name in names}
    return {**paths, "data_dir": str(data_dir)}


def _prepare_checkpoints(tmp: pathlib.Path) -> None:
    """A finished checkpoint of another run (1 seed), and a damaged copy of it."""
    other, damaged = tmp / "ckpt_other", tmp / "ckpt_damaged"
    cli = [sys.executable, "-m", "policy_gnn_jax.cli", "--no-progress"]
    subprocess.run([*cli, *CSBM, *QUICK, "--checkpoint-dir", str(other), "--out",
                    str(tmp / "ckpt_out")], check=True, capture_output=True)  # fmt: skip
    shutil.copytree(other, damaged)
    for path in damaged.rglob("run.npz"):
        path.write_bytes(b"garbage")


def expand(command: list[str], paths: dict[str, str]) -> list[str]:
    """A probe's arguments with the prepared paths filled in."""
    return [part.format(**paths) for part in command]


def script_path(name: str) -> pathlib.Path:
    for folder in ("experiments", "benchmarks"):
        if (ROOT / folder / f"{name}.py").exists():
            return ROOT / folder / f"{name}.py"
    raise KeyError(name)


def all_commands(paths: dict[str, str]) -> list[tuple[str, list[str]]]:
    """Every probe as (name, argv of a fresh process)."""
    commands = []
    for name, command in CLI_PROBES + SCRIPT_PROBES:
        target, *args = expand(command, paths)
        if target == "@cli":
            head = [sys.executable, "-m", "policy_gnn_jax.cli", "--no-progress"]
        else:
            head = [sys.executable, str(script_path(target[1:]))]
        commands.append((name, head + args))
    for name, body in API_PROBES:
        commands.append((name, [sys.executable, "-c", API_PRELUDE + API_CATCH.format(body=body)]))
    return commands


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
