"""Per-step time and memory of the MDP engines as the graph grows.

    python benchmarks/bench_scale.py                    # host engine: 10^4, 10^6, 10^7 nodes
    python benchmarks/bench_scale.py --sizes 10000 100000 --engines full subgraph host

Each graph is a csbm (`data.write_csbm`) written once to `--data-dir` as `.npy` files and then
opened memory-mapped (`data.load_arrays`), as a user's large graph would be. Each (size, engine)
row runs in a fresh child process, so its peak RSS is its own: the child loads the graph, builds
the engine's device graph, compiles one chunk of `--episodes` episodes (one seed, the paper's
MDP defaults: depths 2-5), runs it once to warm up and once timed. Reported per row:
- ms per MDP step, and its ratio to the smallest graph's (same engine; children of one run);
- device memory: XLA's own account of the compiled chunk (arguments, the graph among them, plus
  temporaries); for the host engine this is what must stay flat as the graph grows;
- the child's peak RSS, and its ratio to the graph's files on disk.
Results go to `--out` as JSON; `--overwrite` replaces an earlier one.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import resource
import subprocess
import sys
import time

from policy_gnn_jax import data
from policy_gnn_jax.cli import exit_status, finish, require_at_least_one, tune_malloc
from policy_gnn_jax.data.on_disk import ARRAY_FILES, META_FILE
from policy_gnn_jax.runtime import locks, outputs

ENGINES = ("full", "subgraph", "host")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000, 10_000_000])
    p.add_argument("--engines", nargs="+", default=["host"], choices=ENGINES)
    p.add_argument("--features", type=int, default=64, help="csbm feature width")
    p.add_argument("--degree", type=float, default=8.0, help="csbm average degree")
    p.add_argument("--episodes", type=int, default=3, help="episodes (of 10 steps) timed")
    p.add_argument("--data-dir", default="results/bench_scale_data", help="where graphs go")
    p.add_argument("--seed-mode", default="map", choices=["vmap", "map"])
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--out", default="results/bench_scale.json")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)  # one row, as JSON
    return p.parse_args(argv)


def graph_folder(n: int, args) -> pathlib.Path:
    """The csbm's files, written on first use (in a child: its memory is not the rows').
    A folder of the row's name holding another graph, or files this benchmark did not write,
    is refused: it would be measured under this row's name, or written over."""
    folder = pathlib.Path(args.data_dir) / f"csbm-{n}-f{args.features}-d{args.degree:g}"
    wanted = {"num_nodes": n, "num_features": args.features, "avg_degree": float(args.degree),
              "seed": 0}  # fmt: skip
    if (folder / META_FILE).exists():
        meta = outputs.read_json(folder / META_FILE)
        made = meta.get("arguments", {}) if isinstance(meta, dict) else {}
        if meta.get("generator") != "write_csbm" or any(
            made.get(k) != v for k, v in wanted.items()
        ):
            said = ", ".join(f"{k} {v}" for k, v in wanted.items())
            raise data.DataError(
                f"{folder} holds another graph than this row's ({said}): move it away, or pass "
                f"another --data-dir."
            )
        return folder
    # No meta.json: a write that stopped (write_csbm writes it last), or a folder not ours.
    names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    others = sorted(x for x in names if x not in ARRAY_FILES and not x.endswith(".partial"))
    if others:
        raise data.DataError(
            f"{folder} holds files this benchmark did not write ({', '.join(others[:3])}): move "
            f"them away, or pass another --data-dir."
        )
    code = (
        "from policy_gnn_jax import data; "
        f"data.write_csbm({str(folder)!r}, num_nodes={n}, num_features={args.features}, "
        f"avg_degree={args.degree}, seed=0, overwrite=True)"
    )
    _child([sys.executable, "-c", code])
    return folder


def _child(argv: list[str]) -> str:
    """A child's standard output; its error's last line as a ValueError if it failed (bad
    arguments end there as one `error:` line, not as the child's traceback)."""
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise ValueError(last.split(": ", 1)[-1])
    return done.stdout


def measure(folder: str, engine: str, episodes: int, seed_mode: str) -> dict:
    """One row, in this (child) process."""
    import functools

    import jax

    from policy_gnn_jax import config as config_lib
    from policy_gnn_jax import data, methods
    from policy_gnn_jax.runtime import compilation, runner, seed_axis

    start = time.perf_counter()
    ds = data.load_arrays(folder)
    config = config_lib.Config.paper(engine=engine, num_episodes=episodes)
    entry = methods.get("policy-gnn")
    g = entry.graph(config, ds)
    trainer = entry.make_trainer(config, ds, g, None, None)
    build_s = time.perf_counter() - start
    keys = jax.random.split(jax.random.key(0), 1)
    seeds = functools.partial(seed_axis.over_seeds, mode=seed_mode, sharding=None)
    start = time.perf_counter()
    kernels = compilation.float_scatter_adds(g.kernels, "full" if engine == "full" else "subgraph")
    options = compilation.compiler_options(True, kernels)
    programs = runner.build_programs(trainer, keys, seeds, None, [episodes], options)
    chunk = compiled = programs["chunks"][episodes].compile(trainer.data, programs["state_like"])
    compile_s = time.perf_counter() - start
    memory = compiled.memory_analysis()
    # Warm-up: the timed call reuses every buffer.
    state, _ = chunk(trainer.data, programs["init"](trainer.data, keys))
    jax.block_until_ready(state)
    start = time.perf_counter()
    state, _ = chunk(trainer.data, state)
    jax.block_until_ready(state)
    steps = episodes * config.steps_per_episode
    return {
        "nodes": ds.num_nodes,
        "engine": engine,
        "step_ms": 1000 * (time.perf_counter() - start) / steps,
        "steps_timed": steps,
        "build_s": build_s,
        "compile_s": compile_s,
        "device_bytes": int(memory.argument_size_in_bytes + memory.temp_size_in_bytes),
        "graph_device_bytes": int(sum(x.nbytes for x in jax.tree.leaves(g))),
        "peak_rss_bytes": peak_rss_bytes(),
        "file_bytes": sum(f.stat().st_size for f in pathlib.Path(folder).glob("*.npy")),
        "device": jax.devices()[0].device_kind,
    }


def peak_rss_bytes() -> int:
    """This process's peak resident memory since it started its program: Linux's VmHWM (the
    getrusage peak would carry over the parent's from before the exec)."""
    status = pathlib.Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_child(folder: pathlib.Path, engine: str, args) -> dict:
    request = json.dumps(dict(folder=str(folder), engine=engine, episodes=args.episodes,
                              seed_mode=args.seed_mode))  # fmt: skip
    return json.loads(
        _child([sys.executable, __file__, "--child", request]).strip().splitlines()[-1]
    )


def main(argv=None) -> int:
    tune_malloc()
    args = parse_args(argv)
    if args.child is not None:
        print(json.dumps(measure(**json.loads(args.child))))
        return 0
    return exit_status(run, args, saves=False)


def run(args) -> None:
    require_at_least_one(sizes=min(args.sizes), features=args.features, episodes=args.episodes)
    small = [n for n in args.sizes if n < data.generators.CSBM_MIN_NODES]
    if small:
        raise ValueError(
            f"--sizes {small[0]}: a csbm graph's splits need at least "
            f"{data.generators.CSBM_MIN_NODES} nodes; pass --sizes of at least that."
        )
    if not 0 < args.degree < float("inf"):  # also refuses nan
        raise ValueError(f"--degree must be a number > 0, got {args.degree}.")
    # A folder, an unwritable place or (without --overwrite) an earlier result: refused now, as
    # given (a path object would make "" the current folder and "out/" the file "out").
    out = locks.claim_output_file(args.out, overwrite=args.overwrite)
    try:
        pathlib.Path(args.data_dir).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(
            f"--data-dir {args.data_dir} cannot be a folder of graphs ({err.strerror or err}): "
            f"pass a folder you can write to."
        ) from None
    rows = []
    print(f"{'nodes':>10s} {'engine':>8s} {'ms/step':>9s} {'device MiB':>11s} "
          f"{'RSS GiB':>8s} {'RSS/file':>8s} {'compile s':>9s}")  # fmt: skip
    for n in sorted(args.sizes):
        folder = graph_folder(n, args)
        for engine in args.engines:
            row = run_child(folder, engine, args)
            rows.append(row)
            print(
                f"{n:10d} {engine:>8s} {row['step_ms']:9.1f} {row['device_bytes'] / 2**20:11.1f} "
                f"{row['peak_rss_bytes'] / 2**30:8.2f} "
                f"{row['peak_rss_bytes'] / row['file_bytes']:8.2f} {row['compile_s']:9.1f}",
                flush=True,
            )
    smallest = min(args.sizes)
    ratios = {}
    for row in rows:
        base = next(r for r in rows if r["nodes"] == smallest and r["engine"] == row["engine"])
        ratios[f"{row['engine']}/{row['nodes']}"] = {
            "time": row["step_ms"] / base["step_ms"],
            "device_memory": row["device_bytes"] / base["device_bytes"],
        }
    print(f"\nratios to the smallest graph ({smallest} nodes), children of this run:")
    for name, r in ratios.items():
        print(f"  {name:>20s}  time {r['time']:6.2f}x  device memory {r['device_memory']:6.2f}x")
    setup = dict(features=args.features, avg_degree=args.degree, episodes=args.episodes,
                 seed_mode=args.seed_mode)  # fmt: skip
    result = dict(rows=rows, ratios_to_smallest=ratios, **setup)
    outputs.atomic_write_text(out, json.dumps(result, indent=2))
    print(f"results: {out}")


if __name__ == "__main__":
    finish(main())
