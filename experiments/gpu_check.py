"""The GPU check: is a run exact and fast on this machine's accelerator? One command, at most
about 8 minutes on an H100; on a CPU it runs too and reports what a CPU can.

    python experiments/gpu_check.py          # writes docs/results/gpu_check_<device>.json
    python experiments/gpu_check.py --out gpu_check.json --budget-s 300

Each step runs in its own process under a time limit, the most important first:
1. `readme_twice`: the README command (`experiments/run.py --dataset cora`, `--episodes`
   episodes) in two processes with the default settings, results.json compared field by
   field (everything but the wall time must be equal);
2. `compile_by_size`: benchmarks/bench_compile.py's compile time of one chunk per graph size
   (`--sizes`; the graph also compiled in as constants at the smallest size);
3. `settings`: the same benchmark's per-episode and compile time of the README run's chunk
   under the default, the `reproducible=false` opt-out, the opt-out with the graph compiled in,
   and XLA's deterministic ops, as ratios in one process;
4. `tests`: the tests that compare with NumPy references and check exactness;
5. `subgraph_twice`: step 1 with `--engine subgraph` (a fifth of the episodes);
6. `readme_tf32_twice`: step 1 with TF32 matmuls (`--set matmul_precision=default`);
7. `engines`: benchmarks/bench_scale.py: the full, subgraph and host engines' per-step time and
   memory by graph size (`--sizes`), and the size from which the subgraph engine is faster;
8. `step_epoch_seeds`: benchmarks/bench.py: MDP step / GCN epoch, seeds vmapped vs a loop.
Asked for by name (`--steps`), as a session's time allows:
9. `readme_full`: the README command with its defaults (1000 episodes), its wall time;
10. `seeds`: benchmarks/bench.py's seeds table at S = 1, 10, 100, 1000, batched;
11. `suite`: the whole test suite with the GPU as JAX's backend.
The compilation cache is off in every step, but each process of a step run twice (and
`readme_full`) gets a cold one of its own. A step that would start after `--budget-s` is skipped
and says so. Every step's output goes to `--out` as JSON; an existing file needs `--overwrite`.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The comparisons with NumPy references first: on an H100 a TF32 kernel test failed, and the
# exactness tests (whole runs in two processes) are the slowest to compile.
TESTS = ["tests/test_kernels.py", "tests/test_gcn.py", "tests/test_exactness.py"]
STEPS = ("readme_twice", "compile_by_size", "settings", "tests", "subgraph_twice",
         "readme_tf32_twice", "engines", "step_epoch_seeds", "readme_full", "seeds",
         "suite")  # fmt: skip
# The steps run unless --steps names others: those of a session of about 8 minutes.
DEFAULT_STEPS = STEPS[:8]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default=None, help="default: docs/results/gpu_check_<device>.json")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--steps", nargs="+", default=list(DEFAULT_STEPS), choices=STEPS)
    p.add_argument("--dataset", default="cora")
    p.add_argument("--data-dir", default=None,
                   help="the folder the dataset's files are read from (default: where run.py "
                        "looks, $POLICY_GNN_DATA or its cache)")  # fmt: skip
    p.add_argument("--episodes", type=int, default=60, help="episodes of each README run")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000],
                   help="graph sizes for compile time and the engines")  # fmt: skip
    p.add_argument("--budget-s", type=float, default=460, help="stop starting steps after this")
    return p.parse_args(argv)


class StartError(Exception):
    """JAX cannot start here: the message names why and the variables to look at."""


def device_name() -> tuple[str, str]:
    """(backend, device kind), read in a child process so this one never starts a backend."""
    code = "import jax; print(jax.default_backend()); print(jax.devices()[0].device_kind)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        said = (out.stderr.strip().splitlines() or ["no message"])[-1][:300]
        named = sorted(v for v in os.environ if v.startswith(("JAX_", "XLA_")))
        raise StartError(
            f"JAX cannot start in this environment ({said}): fix or unset the variable it "
            f"names (set now: {', '.join(named) or 'none of JAX_* or XLA_*'})."
        )
    backend, kind = out.stdout.strip().splitlines()[-2:]
    return backend, kind


def slug(kind: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", kind.lower()).strip("_")


def run_step(argv: list[str], timeout: float, cache: str = "off") -> dict:
    """`argv` in a child process (Python, from the repository root) with a time limit. `cache`:
    its compilation cache (`POLICY_GNN_COMPILATION_CACHE`), off by default: a warm one would
    hide compile times, and what two processes compiled apart."""
    start = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["POLICY_GNN_COMPILATION_CACHE"] = cache
    try:
        done = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True,
                              timeout=max(timeout, 1), env=env)  # fmt: skip
        rc, out = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as err:
        rc = "timeout"
        out = (err.stdout or b"").decode(errors="replace") + (err.stderr or b"").decode(
            errors="replace"
        )
    return {"argv": argv, "rc": rc, "seconds": time.perf_counter() - start, "tail": out[-3000:]}


def differing_fields(a, b, path: str = "") -> list[str]:
    """Paths of the leaves where two results.json records differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for k in sorted(set(a) | set(b))
                for p in differing_fields(a.get(k), b.get(k), f"{path}{k}.")]  # fmt: skip
    return [] if a == b else [path.rstrip(".")]


def twice(args, extra: list[str], timeout: float, work: pathlib.Path, name: str) -> dict:
    """The README command twice in fresh processes, each with a cold compilation cache of its
    own; every field but the wall time and the cache's folder compared."""
    runs, records = [], []
    for copy in ("a", "b"):
        out = work / f"{name}_{copy}"
        argv = ["experiments/run.py", "--dataset", args.dataset, *_data_dir(args), "--seeds",
                str(args.seeds), "--no-progress", "--out", str(out), *extra]  # fmt: skip
        runs.append(run_step(argv, timeout / 2, cache=str(work / f"cache_{name}_{copy}")))
        path = out / "results.json"
        # Only a run that succeeded: never a file an earlier run left there.
        records.append(json.loads(path.read_text()) if runs[-1]["rc"] == 0 else None)
    result = {"runs": runs}
    if None in records:
        return {**result, "identical": None, "note": "a run did not finish"}
    a, b = records
    diff = [p for p in differing_fields(a, b) if p not in ("wall_time_s", "compilation_cache")]
    return {
        **result,
        "identical": not diff,
        "differing_fields": len(diff),
        "first_differences": diff[:10],
        "claimed_bit_identical": a.get("bit_identical_across_processes"),
        "wall_time_s": [a["wall_time_s"], b["wall_time_s"]],
        "compilation_caches": [a.get("compilation_cache"), b.get("compilation_cache")],
        "test_metric": [a["test_metric"]["mean"], a["test_metric"]["std"]],
        "config": {
            k: a["config"][k]
            for k in ("num_episodes", "reproducible", "matmul_precision", "engine")
        },  # fmt: skip
        "engine": a.get("engine"),
        "kernels": a.get("kernels"),
        "compiler_options": a.get("compiler_options"),
    }


def plan(args, work: pathlib.Path) -> dict:
    """Each step: (seconds it may take at most, what it runs)."""
    episodes = ["--episodes", str(args.episodes)]
    few = ["--episodes", str(max(1, args.episodes // 5))]
    sizes = [str(n) for n in args.sizes]
    return {
        "readme_twice": (90, lambda t: twice(args, episodes, t, work, "readme")),
        "readme_tf32_twice": (80, lambda t: twice(
            args, [*episodes, "--set", "matmul_precision=default"], t, work, "tf32")),
        "subgraph_twice": (60, lambda t: twice(
            args, [*few, "--engine", "subgraph"], t, work, "subgraph")),
        "settings": (110, lambda t: json_step(
            ["benchmarks/bench_compile.py", "--dataset", args.dataset, *_data_dir(args), "--seeds",
             str(args.seeds), "--settings", "default", "fast", "fast-inlined",
             "deterministic-ops"], t, work / "settings.json")),
        "compile_by_size": (100, lambda t: json_step(
            ["benchmarks/bench_compile.py", "--settings", "--sizes", *sizes,
             "--inline-up-to", sizes[0]], t, work / "sizes.json")),
        # One process, not the suite's two workers: both would share the one GPU.
        "tests": (120, lambda t: run_step(["-m", "pytest", "-o", "addopts=", "-p", "no:xdist",
                                           "-q", "-x", "-p", "no:cacheprovider", *TESTS], t)),
        "engines": (150, lambda t: crossover(json_step(
            ["benchmarks/bench_scale.py", "--sizes", *sizes, "--episodes", "2", "--engines",
             "full", "subgraph", "host", "--data-dir", str(work / "graphs")], t,
            work / "engines.json"))),
        "step_epoch_seeds": (80, lambda t: run_step(
            ["benchmarks/bench.py", "--datasets", args.dataset, *_data_dir(args), "--seeds", "4",
             "--repeats", "3", "--skip-backbones", "--skip-kernels"], t)),
        # The README's main command as a user runs it (1000 episodes), cold cache, wall time.
        "readme_full": (200, lambda t: readme_full(args, t, work)),
        "seeds": (240, lambda t: json_step(
            ["benchmarks/bench.py", "--datasets", args.dataset, *_data_dir(args), "--seeds",
             "10", "100", "1000", "--seed-modes", "vmap", "--repeats", "3", "--skip-backbones",
             "--skip-kernels"], t, work / "seeds.json")),
        # The whole test suite with the GPU as JAX's backend, one process (see "tests").
        "suite": (600, lambda t: run_step(["-m", "pytest", "-o", "addopts=", "-p", "no:xdist",
                                           "-q", "-p", "no:cacheprovider", "tests"], t)),
    }  # fmt: skip


def readme_full(args, timeout: float, work: pathlib.Path) -> dict:
    """`experiments/run.py --dataset <dataset>` with its defaults, once, with a cold cache."""
    out = work / "readme_full"
    argv = ["experiments/run.py", "--dataset", args.dataset, *_data_dir(args), "--no-progress",
            "--out", str(out)]  # fmt: skip
    result = run_step(argv, timeout, cache=str(work / "cache_readme_full"))
    if result["rc"] == 0:  # wall_time_s: the whole process, compile included
        record, test = json.loads((out / "results.json").read_text()), "test_metric"
        result.update(wall_time_s=result["seconds"], loop_time_s=record["wall_time_s"],
                      test_metric=[record[test]["mean"], record[test]["std"]])  # fmt: skip
    return result


def crossover(result: dict) -> dict:
    """The engines' rows, and the smallest graph on which the subgraph engine's step is faster
    than the full engine's: the size `--engine auto` should switch at on this device."""
    rows = result.get("json", {}).get("rows", [])
    ms = {(r.get("engine"), r.get("nodes")): r.get("step_ms") for r in rows}
    sizes = sorted({n for _, n in ms if n is not None})
    faster = [n for n in sizes if ms.get(("subgraph", n)) and ms.get(("full", n))
              and ms[("subgraph", n)] < ms[("full", n)]]  # fmt: skip
    result["subgraph_faster_from_nodes"] = faster[0] if faster else None
    return result


def _data_dir(args) -> list[str]:
    return ["--data-dir", args.data_dir] if args.data_dir is not None else []


def json_step(argv: list[str], timeout: float, out: pathlib.Path) -> dict:
    """A benchmark that writes JSON to `--out`: its output and its JSON."""
    result = run_step([*argv, "--out", str(out)], timeout)
    if out.is_file():
        result["json"] = json.loads(out.read_text())
    return result


class Stopped(KeyboardInterrupt):
    """SIGTERM, raised like a Ctrl-C so that the running step's process is killed too."""


def _stop(signum, frame):
    raise Stopped()


def main(argv=None) -> int:
    signal.signal(signal.SIGTERM, _stop)
    try:
        return _main(argv)
    except KeyboardInterrupt as stop:  # subprocess.run has killed the step's process
        print("error: interrupted; the steps that had finished, if any, are in the report.",
              file=sys.stderr)  # fmt: skip
        return 143 if isinstance(stop, Stopped) else 130


def _main(argv=None) -> int:
    args = parse_args(argv)
    if args.episodes < 1 or args.seeds < 1:
        print("error: --episodes and --seeds must be >= 1.", file=sys.stderr)
        return 2
    if len(set(args.steps)) != len(args.steps):
        print("error: --steps names a step twice: name each once.", file=sys.stderr)
        return 2
    if not (math.isfinite(args.budget_s) and args.budget_s > 0):
        print(f"error: --budget-s must be a number of seconds > 0, got {args.budget_s}.",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.out is not None and not args.out.strip():
        print("error: --out is empty: name the report's file.", file=sys.stderr)
        return 2
    if os.path.exists(args.dataset):  # the steps run from the repository's root, not here
        args.dataset = os.path.abspath(args.dataset)
    if args.data_dir is not None:
        args.data_dir = os.path.abspath(args.data_dir)
    try:
        backend, kind = device_name()
    except StartError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    named = args.out or str(ROOT / "docs" / "results" / f"gpu_check_{slug(kind)}.json")
    problem, out = _unwritable(named, args.overwrite), pathlib.Path(named)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    lock = _lock_report(out)
    if isinstance(lock, str):
        print(f"error: {lock}", file=sys.stderr)
        return 2
    try:
        return _check(args, backend, kind, out)
    finally:
        lock.unlink(missing_ok=True)  # before the file is closed: no one can hold it meanwhile


def _check(args, backend: str, kind: str, out: pathlib.Path) -> int:
    """The steps, once `out` is this process's to write."""
    problem = _unwritable(out, args.overwrite)  # a check that ended meanwhile may have written
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    print(f"gpu check on {kind} ({backend}); budget {args.budget_s:.0f} s", flush=True)
    report = {"backend": backend, "device": kind, "args": vars(args), "steps": {}}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        steps = plan(args, pathlib.Path(tmp))
        for name in args.steps:
            limit, step = steps[name]
            left = args.budget_s - (time.perf_counter() - start)
            if left < 20:
                report["steps"][name] = {"skipped": f"budget spent ({args.budget_s:.0f} s)"}
                continue
            report["steps"][name] = step(min(limit, left))
            print(summary_line(name, report["steps"][name]), flush=True)
            out = write(out, report)
            refused = _refused_input(report["steps"][name])
            if refused:  # the same input would be refused by every later step
                print(f"error: {refused}", file=sys.stderr)
                return 2
    report["seconds"] = time.perf_counter() - start
    out = write(out, report)
    print(f"report: {out}")
    return 0


def _refused_input(result: dict) -> str | None:
    """The `error:` line of a step's command that refused its input (exit 2), if one did."""
    for run in result.get("runs", [result]):
        if run.get("rc") == 2:
            lines = [x for x in run.get("tail", "").splitlines() if x.startswith("error: ")]
            return lines[-1].removeprefix("error: ") if lines else "a step refused its input"
    return None


def _lock_report(out: pathlib.Path) -> pathlib.Path | str:
    """`<out>.lock`, locked by this process for as long as it runs (the lock ends with it), or
    why it cannot be: another check writing the same report. The library's rule for a script's
    --out (`runtime/locks.hold_output_lock`): this script imports none of the library."""
    path = out.with_name(out.name + ".lock")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        return f"cannot make {path}, the report's lock ({err.strerror or err}): name another."
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        owner = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        return (f"another gpu_check (process {owner}) is writing {out}: wait for it, or "
                f"choose another --out.")  # fmt: skip
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    _LOCKS.append(fd)  # kept open, and so locked, until the process ends
    return path


_LOCKS: list[int] = []


def _unwritable(named, overwrite: bool) -> str | None:
    """Why the report cannot be written at `named` (None: it can), found before any step runs."""
    if str(named).endswith("/"):
        return f"--out {named} ends in '/', which names a folder: name a file."
    out = pathlib.Path(named)
    try:
        if out.is_dir():
            return f"--out {out} is a folder: name a file."
        if out.exists() and not overwrite:
            return f"{out} exists: pass --overwrite to replace it, or another --out."
        out.parent.mkdir(parents=True, exist_ok=True)
        probe = out.with_name(out.name + f".probe{os.getpid()}")
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        return f"cannot write {out} ({err.strerror or err}): choose a writable --out."
    return None


def summary_line(name: str, result: dict) -> str:
    if result.get("identical") is None and "note" in result:
        rcs = [run.get("rc") for run in result.get("runs", [])]
        return f"{name}: {result['note']} (exit statuses {rcs})"
    if "identical" in result:
        return (f"{name}: identical={result['identical']} "
                f"({result.get('differing_fields', '?')} fields differ), wall "
                f"{result.get('wall_time_s')}, test {result.get('test_metric')}")  # fmt: skip
    tail = result.get("tail", "").strip().splitlines()
    return f"{name}: rc={result.get('rc')} in {result.get('seconds', 0):.0f} s; " + " | ".join(
        tail[-4:]
    )


def write(out: pathlib.Path, report: dict) -> pathlib.Path:
    """The report at `out`, written atomically (a temporary file renamed over it)."""
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(report, indent=2))
    os.replace(tmp, out)
    return out


if __name__ == "__main__":
    sys.exit(main())
