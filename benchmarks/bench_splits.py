"""A sweep over a benchmark's fixed splits three ways, in one process: each split compiled and
run on its own ("apart"), the splits as one program run one after another inside it ("map"),
and batched ("vmap"). Prints the wall time of each (compile included: on small graphs that is
most of a sweep) and its ratio to "apart", and checks that "map" gives every split the numbers
"apart" gives it.

python benchmarks/bench_splits.py --dataset texas --method gcn --seeds 3
python benchmarks/bench_splits.py --dataset actor --method policy-gnn --episodes 20 --out r.json
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import policy_gnn_jax as pg
from policy_gnn_jax import data, split_sweep
from policy_gnn_jax.cli import exit_status, finish, require_at_least_one
from policy_gnn_jax.runtime import locks, outputs, records

MAPS = ("apart", "map", "vmap")


def run(args) -> None:
    require_at_least_one(seeds=args.seeds, splits=args.splits, episodes=args.episodes)
    fixed = data.heterophily.HETEROPHILY_FILES
    available = 0
    if data.heterophily.is_npz_path(args.dataset) or args.dataset.lower() in fixed:
        available = data.heterophily.num_splits(args.dataset)
    if not available:
        raise pg.ConfigError(
            f"--dataset {args.dataset} has no fixed splits to sweep: pass a heterophilous "
            f"benchmark (texas, actor, ...) or its .npz file."
        )
    if args.splits > available:
        raise pg.ConfigError(
            f"--splits {args.splits}: {args.dataset} has {available} splits; pass at most that."
        )
    if args.out is not None:  # an empty path is refused, not taken for none
        locks.claim_output_file(args.out, overwrite=args.overwrite)
    datasets = [data.load_dataset(args.dataset, data_dir=args.data_dir, split=k)
                for k in range(args.splits)]  # fmt: skip
    cfg = pg.Config.decoupled(min_depth=0, max_depth=4, ego_head=True, depth=1,
                              num_episodes=args.episodes)  # fmt: skip
    timings, tests = {}, {}
    for split_map in MAPS:
        start = time.perf_counter()
        fits = split_sweep.fit_splits(datasets, cfg, method=args.method, seeds=args.seeds,
                                      progress=False, split_map=split_map)  # fmt: skip
        timings[split_map] = time.perf_counter() - start
        tests[split_map] = [f.record["test_metric"]["per_seed"] for f in fits]
        speed = timings["apart"] / timings[split_map]
        line = f"{split_map:5s}: {timings[split_map]:7.1f} s, {speed:.2f}x apart's speed"
        print(line, flush=True)
    same = tests["map"] == tests["apart"]
    print(f"map's test scores equal apart's on every split and seed: {same}")
    result = {
        "dataset": args.dataset, "method": args.method, "splits": args.splits,
        "seeds": args.seeds, "episodes": args.episodes, "wall_time_s": timings,
        "speedup_over_apart": {m: timings["apart"] / t for m, t in timings.items()},
        "map_equals_apart": same, "versions": records.package_versions(),
    }  # fmt: skip
    if args.out is not None:
        outputs.atomic_write_text(pathlib.Path(args.out), json.dumps(result, indent=2))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="texas")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--method", default="gcn", choices=pg.methods.names())
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--splits", type=int, default=10, help="the first N splits")
    p.add_argument("--episodes", type=int, default=20, help="the MDP methods' episodes")
    p.add_argument("--out", default=None, help="write the timings there as JSON")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    args = p.parse_args(argv)
    return exit_status(run, args, saves=False)


if __name__ == "__main__":
    finish(main())
