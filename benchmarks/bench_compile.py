"""What the compile settings cost, in one process: the README run's chunk under each setting.

    python benchmarks/bench_compile.py --dataset cora --seeds 10
    python benchmarks/bench_compile.py --sizes 10000 100000 1000000   # compile time per size

Settings (`runtime/compilation.py`), each a fresh trainer, compiled, warmed up and timed:
- `default`: graph passed as an argument, XLA's autotuning off, matmul precision "highest"
  (what `Config` gives this run: its gather kernels have no float scatter-add);
- `fast`: XLA's autotuning and TF32 matmuls (`--set reproducible=false --set
  matmul_precision=default`): the opt-out;
- `fast-inlined`: `fast` with the graph closed over, so jit compiles it into the program as
  constants (what passing it as an argument avoids);
- `deterministic-ops`: the default plus XLA's deterministic scatter-adds (what the subgraph
  engine and the scatter kernels get);
- `reproducible-tf32`, `autotuned-highest`: one switch at a time.
It prints per-episode times and each setting's ratio to `default` (on a CPU the compile options
are not used, so only the precision and the inlining can differ). With `--sizes` it also
compiles one chunk of the full engine on csbm graphs of those sizes, lifted and inlined, and
prints compile seconds and the ratio to the smallest. Results go to `--out` as JSON.
"""

from __future__ import annotations

import argparse
import functools
import json
import time

import jax

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import data, graph
from policy_gnn_jax.cli import exit_status, finish, require_at_least_one
from policy_gnn_jax.mdp import policy_gnn
from policy_gnn_jax.runtime import compilation, locks, outputs, runner, seed_axis

# name -> (graph lifted into arguments, XLA options on a GPU, matmul precision)
SETTINGS = {
    "default": (True, compilation.AUTOTUNE_OFF, "highest"),
    "fast": (True, None, "default"),
    "fast-inlined": (False, None, "default"),
    "deterministic-ops": (True, {**compilation.AUTOTUNE_OFF, **compilation.DETERMINISTIC_SCATTER},
                          "highest"),
    "reproducible-tf32": (True, compilation.AUTOTUNE_OFF, "default"),
    "autotuned-highest": (True, None, "highest"),
}  # fmt: skip


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dataset", default="cora")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--episodes", type=int, default=20, help="episodes timed per setting")
    p.add_argument("--settings", nargs="*", default=list(SETTINGS), choices=list(SETTINGS),
                   help="none: only the compile times of --sizes")  # fmt: skip
    p.add_argument("--sizes", type=int, nargs="*", default=[], help="csbm sizes: compile time")
    p.add_argument("--inline-up-to", type=int, default=100_000,
                   help="also compile with the graph inlined up to this many nodes")  # fmt: skip
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--out", default="results/bench_compile.json")
    return p.parse_args(argv)


def with_graph(trainer, as_argument: bool):
    """The trainer as it is (the graph an argument of every program), or with its graph closed
    over, which jit compiles into the programs as constants."""
    if as_argument:
        return trainer
    data = trainer.data
    return trainer._replace(
        init=lambda _, key: trainer.init(data, key),
        train_chunk=lambda _, state, length: trainer.train_chunk(data, state, length),
        evaluate=lambda _, state: trainer.evaluate(data, state),
        data=(),
    )


def time_setting(ds, g, setting: str, seeds: int, episodes: int) -> dict:
    """Compile seconds of the main chunk and seconds per episode (one chunk of `episodes`,
    warmed up first) for the README run's config under `setting`."""
    lift, gpu_options, precision = SETTINGS[setting]
    options = gpu_options if jax.default_backend() in compilation.GPU_BACKENDS else None
    config = config_lib.Config.paper(num_episodes=episodes, episodes_per_call=episodes)
    trainer = policy_gnn.make_trainer(config, g, graph.train_hop_distances(ds, config.max_depth))
    trainer = with_graph(trainer, lift)
    keys = seed_axis.seed_keys(0, seeds)
    over = functools.partial(seed_axis.over_seeds, mode="vmap", sharding=None)
    start = time.perf_counter()
    programs = runner.build_programs(trainer, keys, over, None, [episodes], options, precision)
    chunk = programs["chunks"][episodes].compile(trainer.data, programs["state_like"])
    compile_s = time.perf_counter() - start
    state, _ = chunk(trainer.data, programs["init"](trainer.data, keys))  # warm-up
    jax.block_until_ready(state)
    start = time.perf_counter()
    state, _ = chunk(trainer.data, state)
    jax.block_until_ready(state)
    return {
        "setting": setting,
        "lift": lift,
        "matmul_precision": precision,
        "compiler_options": options,
        "compile_s": compile_s,
        "episode_ms": 1000 * (time.perf_counter() - start) / episodes,
        "constant_bytes_lifted": programs["resident_bytes"],
    }


def compile_time(num_nodes: int, lift: bool) -> float:
    """Seconds to trace and compile one 1-episode chunk of the full engine on a csbm graph."""
    ds = data.make_csbm(num_nodes=num_nodes, num_classes=4, num_features=64, avg_degree=8, seed=0)
    g = graph.from_dataset(ds)
    config = config_lib.Config.paper(engine="full", num_episodes=1, episodes_per_call=1)
    trainer = policy_gnn.make_trainer(config, g, graph.train_hop_distances(ds, config.max_depth))
    trainer = with_graph(trainer, lift)
    keys = seed_axis.seed_keys(0, 1)
    over = functools.partial(seed_axis.over_seeds, mode="vmap", sharding=None)
    start = time.perf_counter()
    options = compilation.compiler_options(True, compilation.float_scatter_adds(g.kernels, "full"))
    programs = runner.build_programs(trainer, keys, over, None, [1], options)
    programs["chunks"][1].compile(trainer.data, programs["state_like"])
    return time.perf_counter() - start


def main(argv=None) -> int:
    args = parse_args(argv)
    return exit_status(run, args, saves=False)


def _check_sizes(sizes) -> None:
    small = [n for n in sizes if n < data.generators.CSBM_MIN_NODES]
    if small:
        raise config_lib.ConfigError(
            f"--sizes {small[0]}: a csbm graph's splits need at least "
            f"{data.generators.CSBM_MIN_NODES} nodes; pass --sizes of at least that."
        )


def run(args) -> dict:
    require_at_least_one(seeds=args.seeds, episodes=args.episodes)
    if not args.settings and not args.sizes:
        raise config_lib.ConfigError("nothing to run: name --settings, or --sizes, or both.")
    _check_sizes(args.sizes)
    # As given: a path object would make "" the current folder and "out/" the file "out".
    out = locks.claim_output_file(args.out, overwrite=args.overwrite)
    device = jax.devices()[0].device_kind
    result = {"dataset": args.dataset, "seeds": args.seeds, "episodes": args.episodes,
              "device": device, "backend": jax.default_backend(), "settings": [],
              "compile_by_size": [], "complete": False}  # fmt: skip
    if args.settings:
        ds = data.load_dataset(args.dataset, data_dir=args.data_dir)
        g = graph.from_dataset(ds)
        print(f"{ds.summary()}; {args.seeds} seeds; device {device}", flush=True)
    rows = result["settings"]
    for setting in args.settings:
        rows.append(time_setting(ds, g, setting, args.seeds, args.episodes))
        r = rows[-1]
        print(f"  {setting:18s} compile {r['compile_s']:6.1f} s  {r['episode_ms']:8.2f} ms/episode",
              flush=True)  # fmt: skip
        outputs.atomic_write_text(out, json.dumps(result, indent=2))  # a timeout keeps rows
    if rows:
        base = next((r for r in rows if r["setting"] == "default"), rows[0])
        print(f"per-episode time / {base['setting']}'s (same process):")
        for r in rows:
            r["ratio_to_default"] = r["episode_ms"] / base["episode_ms"]
            r["ratio_base"] = base["setting"]  # "default" unless it was not among --settings
            print(f"  {r['setting']:18s} {r['ratio_to_default']:6.2f}x")
    sizes = result["compile_by_size"]
    for n in sorted(args.sizes):
        row = {"nodes": n}
        sizes.append(row)
        for lift in (True, False) if n <= args.inline_up_to else (True,):
            name = "lifted" if lift else "inlined"
            row[f"compile_s_{name}"] = compile_time(n, lift)
            print(f"  {n:>9d} nodes, graph {name}: compile {row[f'compile_s_{name}']:6.1f} s",
                  flush=True)  # fmt: skip
            outputs.atomic_write_text(out, json.dumps(result, indent=2))
    if len(sizes) > 1:
        ratio = sizes[-1]["compile_s_lifted"] / sizes[0]["compile_s_lifted"]
        result["compile_largest_over_smallest"] = ratio
        print(f"compile time, largest / smallest graph (lifted) = {ratio:.2f}x")
    result["complete"] = True  # the rows written before a stop or timeout say False
    outputs.atomic_write_text(out, json.dumps(result, indent=2))
    print(f"results: {out}")
    return result


if __name__ == "__main__":
    finish(main())
