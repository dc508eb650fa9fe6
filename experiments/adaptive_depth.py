"""Issue 9's adaptive-depth results: Policy-GNN+ ablated on validation, then the results table.

  python experiments/adaptive_depth.py ablate --datasets cora citeseer --seeds 5
  python experiments/adaptive_depth.py results --datasets cora citeseer --seeds 10

`ablate` changes one Policy-GNN+ switch at a time from the base (random training depths, all
signals, log-likelihood reward) on the decoupled backbone and keeps, per switch, the value with
the best mean VALIDATION accuracy (on the selection half); the chosen combination is written to
docs/results/plus_ablation.json. `results` runs the chosen combination with 10 seeds and gathers,
per dataset and backbone, every row the issue asks for into docs/results/adaptive_depth.json:
Policy-GNN and the random policy (from `reproduce.py table` runs where they exist), the best fixed
depth (chosen on validation), the label-free rule with the better validation accuracy (from
`reproduce.py headroom`), and Policy-GNN+. Test accuracy is never used to choose anything.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys

import policy_gnn_jax as pg
from policy_gnn_jax import checkpoint, data, records
from policy_gnn_jax.cli import INPUT_ERRORS

# One switch at a time; the first value of each is the base.
SWITCHES = {
    "plus_train_depths": ("random", "policy", "all"),
    "plus_signals": ("all", "graph", "depth"),
    "plus_reward": ("loglik", "correct"),
}


def plus_config(name: str, backbone: str, **overrides) -> pg.Config:
    if backbone == "decoupled":
        return pg.Config.decoupled(dataset=name, **overrides)
    return pg.Config.paper(backbone=backbone, **overrides)


def run_or_load(path: pathlib.Path, ds, cfg, method: str, seeds: int) -> dict:
    """One sweep, unless <path>/results.json holds the same config, method and seeds."""
    saved = path / "results.json"
    if saved.exists():
        record = checkpoint.read_json(saved)
        same_config = record["config"] == json.loads(json.dumps(dataclasses.asdict(cfg)))
        if same_config and record["seeds"] == seeds and record["method"] == method:
            print(f"reusing {saved}: {records.summary_line(record)}")
            return record
    record = pg.fit(ds, cfg, method=method, seeds=seeds, progress=False).record
    records.save(record, path)
    print(records.summary_line(record), flush=True)
    return record


def ablate(args) -> None:
    out = pathlib.Path(args.out)
    summary = {}
    for name in args.datasets:
        ds = data.load_dataset(name, data_dir=args.data_dir)
        base = {k: v[0] for k, v in SWITCHES.items()}
        rows, chosen = [], dict(base)
        for switch, values in SWITCHES.items():
            scores = {}
            for value in values:
                settings = {**base, switch: value}
                tag = "-".join(str(v) for v in settings.values())
                cfg = plus_config(name, args.backbone, **settings)
                record = run_or_load(
                    out / name / args.backbone / f"plus-{tag}", ds, cfg, "policy-gnn-plus",
                    args.seeds,
                )  # fmt: skip
                scores[value] = record["val_accuracy"]["mean"]
                rows.append(
                    {
                        **settings,
                        "val_accuracy": record["val_accuracy"],
                        "test_accuracy": record["test_accuracy"],
                    }
                )
            chosen[switch] = max(scores, key=scores.get)  # ties: the earlier (base) value
        summary[name] = {"backbone": args.backbone, "rows": rows, "chosen_by_val": chosen}
        print(f"{name}: chosen on validation {chosen}")
    path = pathlib.Path(args.ablation_json)
    merged = checkpoint.read_json(path) if path.exists() else {}
    merged.update({f"{n}/{args.backbone}": s for n, s in summary.items()})
    checkpoint.atomic_write_text(path, json.dumps(merged, indent=2))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("what", choices=["ablate"])
    p.add_argument("--datasets", nargs="+", default=["cora", "citeseer"])
    p.add_argument("--backbone", default="decoupled", choices=pg.config.BACKBONES)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default="results/adaptive_depth")
    p.add_argument("--ablation-json", default="docs/results/plus_ablation.json")
    args = p.parse_args(argv)
    try:
        for name in args.datasets:
            data.check_name(name)
        checkpoint.check_writable_dir(args.out)
        {"ablate": ablate}[args.what](args)
    except INPUT_ERRORS as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
