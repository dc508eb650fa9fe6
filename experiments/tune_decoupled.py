"""Tunes the decoupled backbone's regularisation on VALIDATION accuracy only.

  python experiments/tune_decoupled.py --datasets cora citeseer --seeds 10

For each dataset, every combination of the grid below is trained at the fixed depth
`Config.decoupled().depth` (10 seeds, best-validation epoch) and the one with the best mean
validation accuracy is named. Test accuracy is recorded for the record only; nothing is chosen on
it. Writes docs/results/decoupled_tuning.json (or --out).
"""

from __future__ import annotations

import argparse
import itertools
import json

import policy_gnn_jax as pg
from policy_gnn_jax import data
from policy_gnn_jax.cli import exit_status, finish, use_every_core
from policy_gnn_jax.runtime import locks, outputs

GRID = {
    "dropout": (0.5, 0.8),
    "weight_decay": (5e-3, 2e-2),
    "epochs": (200, 500),
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--datasets", nargs="+", default=["cora", "citeseer"])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default="docs/results/decoupled_tuning.json")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    args = p.parse_args(argv)
    return exit_status(run, args, saves=False)


def run(args) -> None:
    """Fits every grid point on every dataset; the choice reads validation accuracy only."""
    # a folder, an unwritable place or an existing result: refused now
    locks.claim_output_file(args.out, overwrite=args.overwrite)
    named = [n.lower() for n in args.datasets]
    twice = next((n for i, n in enumerate(named) if n in named[:i]), None)
    if twice is not None:  # it would be tuned twice, the second over the first
        raise pg.ConfigError(f"--datasets: {twice} is named twice; name it once.")
    results = {}
    for name in args.datasets:
        ds = data.load_dataset(name, data_dir=args.data_dir)
        rows = []
        for values in itertools.product(*GRID.values()):
            overrides = dict(zip(GRID, values))
            cfg = pg.Config.decoupled(input_dropout=overrides["dropout"], **overrides)
            record = pg.fit(ds, cfg, method="gcn", seeds=args.seeds, progress=False).record
            rows.append(
                {
                    **overrides,
                    "input_dropout": overrides["dropout"],
                    "val_metric": record["val_metric"],
                    "test_metric": record["test_metric"],
                }
            )
            print(f"{name} {overrides}: val {record['val_metric']['mean']:.4f}", flush=True)
        best = max(rows, key=lambda r: r["val_metric"]["mean"])
        results[name] = {"grid": rows, "chosen_by_val": {k: best[k] for k in GRID}}
        print(f"{name}: chosen on validation {results[name]['chosen_by_val']}")
    outputs.atomic_write_text(args.out, json.dumps(results, indent=2))


if __name__ == "__main__":
    use_every_core()  # read when JAX starts its backend, which no import above does
    finish(main())
