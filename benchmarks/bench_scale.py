"""Per-step time and memory of the full and subgraph engines as the graph grows.

    python benchmarks/bench_scale.py                       # csbm, 10^4, 10^5 and 10^6 nodes
    python benchmarks/bench_scale.py --sizes 10000 100000 --engines subgraph

Everything runs in this one process, one seed, the paper's MDP defaults (depths 2-5). For each
graph size and engine it compiles one chunk of `--episodes` episodes, runs it once to warm up and
once timed, and reports:
- per-step time (ms) and its ratio to the smallest graph's, per engine; compile time (s);
- memory per step: XLA's own account of the compiled chunk (arguments + temporaries) plus the
  host sampler's scratch arrays; and the graph itself on the device (features, sparse rows,
  edges: both engines hold it, and it grows with the graph whatever the engine). The process's
  peak RSS at the end.
The last line is `subgraph per-step time, largest / smallest graph = X.XXx` (target: <= 2x).
Results go to `--out` as JSON.
"""

from __future__ import annotations

import argparse
import functools
import json
import pathlib
import resource
import time

import jax
import numpy as np

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import data, graph
from policy_gnn_jax.cli import exit_status, finish, require_at_least_one, tune_malloc
from policy_gnn_jax.mdp import loop
from policy_gnn_jax.runtime import checkpoint, compilation, runner


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    p.add_argument(
        "--engines", nargs="+", default=["full", "subgraph"], choices=["full", "subgraph"]
    )
    p.add_argument("--features", type=int, default=64, help="csbm feature width")
    p.add_argument("--degree", type=float, default=8.0, help="csbm average degree")
    p.add_argument("--episodes", type=int, default=3, help="episodes (of 10 steps) timed")
    p.add_argument("--full-episodes", type=int, default=1, help="episodes timed, full engine")
    p.add_argument("--subgraph-nodes", type=int, default=None)
    p.add_argument("--subgraph-edges", type=int, default=None)
    p.add_argument(
        "--seed-mode",
        default="vmap",
        choices=["vmap", "map"],
        help="map: the seed runs unbatched, so steps with no full buffer skip the backbone step",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--out", default="results/bench_scale.json")
    return p.parse_args(argv)


def make_graph(num_nodes: int, args):
    start = time.perf_counter()
    ds = data.make_csbm(
        num_nodes=num_nodes,
        num_classes=4,
        num_features=args.features,
        avg_degree=args.degree,
        seed=0,
    )
    g = graph.from_dataset(ds)
    return ds, g, time.perf_counter() - start


def time_engine(ds, g, engine: str, episodes: int, args) -> dict:
    budgets = {
        k: v
        for k, v in (
            ("subgraph_nodes", args.subgraph_nodes),
            ("subgraph_edges", args.subgraph_edges),
        )
        if v is not None
    }
    config = config_lib.Config.paper(engine=engine, num_episodes=episodes, **budgets)
    trainer = loop.make_trainer(config, g, graph.train_hop_distances(ds, config.max_depth))
    keys = jax.random.split(jax.random.key(0), 1)
    seeds = functools.partial(runner.over_seeds, mode=args.seed_mode, sharding=None)
    start = time.perf_counter()
    options = compilation.compiler_options(True, compilation.float_scatter_adds(g.kernels, engine))
    programs = runner.build_programs(trainer, keys, seeds, None, [episodes], options)
    chunk, compiled = programs["chunks"][episodes].compile(programs["state_like"])
    compile_s = time.perf_counter() - start
    memory = compiled.memory_analysis()
    state, _ = chunk(programs["init"](keys))  # warm-up: the timed call below reuses every buffer
    jax.block_until_ready(state)
    start = time.perf_counter()
    state, metrics = chunk(state)
    jax.block_until_ready(state)
    steps = episodes * config.steps_per_episode
    sampler_bytes = 10 * g.num_nodes if engine == "subgraph" else 0  # int16 + int64 scratch
    return {
        "step_ms": 1000 * (time.perf_counter() - start) / steps,
        "compile_s": compile_s,
        "steps_timed": steps,
        "xla_bytes": int(memory.argument_size_in_bytes + memory.temp_size_in_bytes),
        "sampler_bytes": sampler_bytes,
        "graph_bytes": int(sum(x.nbytes for x in jax.tree.leaves(g))),
        "gcn_updates_per_step": float(np.asarray(metrics["gcn_trained"]).mean()),
        "budgets": [config.subgraph_nodes, config.subgraph_edges],
    }


def main(argv=None) -> int:
    tune_malloc()
    return exit_status(run, parse_args(argv), saves=False)


def run(args) -> None:
    require_at_least_one(
        sizes=min(args.sizes),
        features=args.features,
        episodes=args.episodes,
        full_episodes=args.full_episodes,
    )
    out = pathlib.Path(args.out)
    # A folder, an unwritable place or (without --overwrite) an earlier result: refused now.
    checkpoint.check_writable_file(out, overwrite=args.overwrite)
    rows = []
    for n in sorted(args.sizes):
        ds, g, build_s = make_graph(n, args)
        print(f"{ds.summary()} (built in {build_s:.1f} s)", flush=True)
        for engine in args.engines:
            episodes = args.full_episodes if engine == "full" else args.episodes
            row = {"nodes": n, "engine": engine, **time_engine(ds, g, engine, episodes, args)}
            rows.append(row)
            print(
                f"  {engine:9s} {row['step_ms']:9.1f} ms/step  compile {row['compile_s']:5.1f} s"
                f"  XLA {row['xla_bytes'] / 2**20:8.1f}"
                f" MiB  sampler {row['sampler_bytes'] / 2**20:6.1f} MiB  graph "
                f"{row['graph_bytes'] / 2**20:8.1f} MiB",
                flush=True,
            )
        del ds, g
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    smallest = min(args.sizes)
    print(f"\nratios to the smallest graph ({smallest} nodes), same process:")
    print(
        f"{'nodes':>10s} " + " ".join(f"{e + ' time':>15s} {e + ' mem':>14s}" for e in args.engines)
    )
    ratios = {}
    for n in sorted(args.sizes):
        cells = []
        for engine in args.engines:
            row = _row(rows, n, engine)
            base = _row(rows, smallest, engine)
            t = row["step_ms"] / base["step_ms"]
            m = (row["xla_bytes"] + row["sampler_bytes"]) / (
                base["xla_bytes"] + base["sampler_bytes"]
            )
            ratios[f"{engine}/{n}"] = {"time": t, "memory": m}
            cells.append(f"{t:14.2f}x {m:13.2f}x")
        print(f"{n:10d} " + " ".join(cells))
    result = {
        "rows": rows,
        "ratios_to_smallest": ratios,
        "peak_rss_bytes": peak_rss,
        "features": args.features,
        "avg_degree": args.degree,
        "device": jax.devices()[0].device_kind,
        "backend": jax.default_backend(),
        "seed_mode": args.seed_mode,
    }
    checkpoint.atomic_write_text(out, json.dumps(result, indent=2))
    print(f"process peak RSS {peak_rss / 2**30:.2f} GiB; results: {out}")
    if "subgraph" in args.engines and len(args.sizes) > 1:
        largest = max(args.sizes)
        r = _row(rows, largest, "subgraph")["step_ms"] / _row(rows, smallest, "subgraph")["step_ms"]
        print(f"subgraph per-step time, largest / smallest graph = {r:.2f}x")


def _row(rows, n, engine):
    return next(r for r in rows if r["nodes"] == n and r["engine"] == engine)


if __name__ == "__main__":
    finish(main())
