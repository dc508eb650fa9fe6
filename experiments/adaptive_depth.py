"""The adaptive-depth results: Policy-GNN+ ablated on validation, then the results table.

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
import pathlib
import sys

import policy_gnn_jax as pg
from policy_gnn_jax import data
from policy_gnn_jax.cli import exit_status, finish, use_every_core
from policy_gnn_jax.contrib.adaptive_depth.plus_config import PlusConfig
from policy_gnn_jax.contrib.reproduction.figures import save_figure
from policy_gnn_jax.contrib.reproduction.runs import (
    dataset_folder,
    dataset_folder_name,
    is_current_record,
    run_or_load,
)
from policy_gnn_jax.contrib.study_shapes import (
    ABLATION_FILE,
    ADAPTIVE_DEPTH_FILE,
    HEADROOM_FILE,
    ablation_shape,
    adaptive_depth_shape,
    headroom_shape,
)
from policy_gnn_jax.runtime import locks, outputs, records, seed_axis, study_files

# One switch at a time; the first value of each is the base.
SWITCHES = {
    "plus_train_depths": ("random", "policy", "all"),
    "plus_signals": ("all", "graph", "depth"),
    "plus_reward": ("loglik", "correct"),
}


def plus_config(name: str, backbone: str, **overrides) -> PlusConfig:
    if backbone == "decoupled":
        return PlusConfig.decoupled(dataset=name, **overrides)
    return PlusConfig.paper(backbone=backbone, **overrides)


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
                    dataset_folder(out, name) / args.backbone / f"plus-{tag}", ds, cfg,
                    "policy-gnn-plus", args.seeds, args.seed_mode, replace=args.overwrite,
                )  # fmt: skip
                scores[value] = record["val_metric"]["mean"]
                rows.append(
                    {
                        **settings,
                        "val_metric": record["val_metric"],
                        "test_metric": record["test_metric"],
                    }
                )
            chosen[switch] = max(scores, key=scores.get)  # ties: the earlier (base) value
        summary[name] = {"backbone": args.backbone, "rows": rows, "chosen_by_val": chosen}
        print(f"{name}: chosen on validation {chosen}")
    path = pathlib.Path(args.ablation_json)
    new = {f"{n}/{args.backbone}": s for n, s in summary.items()}

    def add(merged: dict) -> dict:  # under the file's lock: another run's entries are kept
        records.check_replaced_entries(merged, new, path, args.overwrite)
        return {**merged, **new}

    study_files.merge(path, ABLATION_FILE, ablation_shape, add)


def _entry(name, backbone, method, record_or_row, depth=None, score="metric") -> dict:
    """`score`: "accuracy" for a headroom row (on these accuracy-scored datasets, their metric)."""
    entry = {"dataset": name, "backbone": backbone, "method": method}
    if depth is not None:
        entry["depth"] = depth
    entry["test_metric"] = record_or_row[f"test_{score}"]
    entry["val_metric"] = record_or_row.get(f"val_{score}")
    if "wall_time_s" in record_or_row:  # a run, not a headroom row
        entry["seed_mode"] = record_or_row["seed_mode"]
    return entry


def merged_records(old: dict, entries: list, missing: list, path, args) -> dict:
    """The results file with this run's records for its datasets and backbones; the records of
    others are kept, and this run's pairs replace theirs only if the same or --overwrite."""
    ran = [f"{d}/{b}" for d in args.datasets for b in args.backbones]
    old_rows, new_rows = _by_pair(old.get("records", [])), _by_pair(entries)
    records.check_replaced_entries(
        {key: old_rows[key] for key in ran if key in old_rows},
        {key: new_rows.get(key, []) for key in ran},
        path,
        args.overwrite,
    )
    kept = [e for e in old.get("records", []) if _pair(e) not in ran]
    kept_missing = [m for m in old.get("missing", []) if not m.startswith(tuple(ran))]
    note = "switches chosen per dataset on validation, decoupled backbone (plus_ablation.json)"
    return {"records": kept + entries, "missing": kept_missing + missing, "plus_switches": note}


def _pair(record: dict) -> str:
    return f"{record.get('dataset')}/{record.get('backbone')}"


def _by_pair(rows: list) -> dict:
    grouped = {}
    for row in rows:
        grouped.setdefault(_pair(row), []).append(row)
    return grouped


def _mismatch(record, backbone: str, seeds: int, ds) -> str | None:
    """Why a cached record is not a row of this table (None: it is)."""
    if not is_current_record(record):
        return "was not made by this version of policy-gnn-jax: run it again with --overwrite"
    ran = record["config"]["backbone"]
    if ran != backbone:
        return f"ran the {ran} backbone, not {backbone}"
    if record["dataset_fingerprint"] != ds.fingerprint():  # another graph of that name
        return f"was run on other data than {ds.name} (its dataset fingerprint differs)"
    if record.get("seeds") != seeds:
        return f"has {record.get('seeds')} seeds, not {seeds}: run it again with --seeds {seeds}"
    return None


def results(args) -> None:
    """Policy-GNN+ (the validation-chosen switches) with --seeds seeds on each backbone, and the
    rows the issue asks for, into --results-json; a figure of the chosen depths."""
    out = pathlib.Path(args.out)
    ablation = _read_object(args.ablation_json, "the ablation", "adaptive_depth.py ablate")
    headroom = _read_object(args.headroom_json, "the headroom analysis",
                            "experiments/reproduce.py headroom")  # fmt: skip
    if not headroom_shape(pg.config.BACKBONES)(headroom):
        raise outputs.CheckpointError(
            f"{args.headroom_json} is not {HEADROOM_FILE} as this version writes it: make it "
            f"again with experiments/reproduce.py headroom."
        )
    entries, missing = [], []
    for name in args.datasets:
        ds = data.load_dataset(name, data_dir=args.data_dir)
        if ds.metric != "accuracy":  # the headroom rows beside the runs are accuracies
            raise data.DataError(
                f"{name} is scored by {ds.metric}, and this table sets runs beside headroom rows "
                f"in accuracy: compare on it with experiments/heterophily.py, which keeps them "
                f"apart."
            )
        chosen = ablation.get(f"{name}/decoupled", {}).get("chosen_by_val")
        if not isinstance(chosen, dict):
            raise outputs.CheckpointError(
                f"{args.ablation_json} has no switches chosen for {name} on the decoupled "
                f"backbone: run `python experiments/adaptive_depth.py ablate --datasets {name}` "
                f"first."
            )
        for backbone in args.backbones:
            folder = "reproduce" if backbone == "gcn" else f"reproduce-{backbone}"
            for method in ("policy-gnn", "random"):
                path = (
                    dataset_folder(pathlib.Path("results") / folder, name) / method / "results.json"
                )
                if not path.exists():
                    missing.append(f"{name}/{backbone}/{method}: no {path}")
                    continue
                record = outputs.read_json(path)
                mismatch = _mismatch(record, backbone, args.seeds, ds)
                if mismatch:  # another preset or seed count ran there last: not this table's
                    missing.append(f"{name}/{backbone}/{method}: {path} {mismatch}")
                else:
                    entries.append(_entry(name, backbone, method, record))
            analysis = headroom.get(backbone, {}).get(name)
            if analysis is None:
                missing.append(f"{name}/{backbone}: no headroom analysis")
            else:
                best = analysis["best_fixed_depth_by_val"]
                entries.append(_entry(name, backbone, "gcn", best, depth=best["depth"],
                                      score="accuracy"))  # fmt: skip
                rules = ("rule_most_confident_depth", "rule_smoothness_depth")
                rule = max(rules, key=lambda r: analysis[r]["val_accuracy"]["mean"])
                entries.append(_entry(name, backbone, f"label-free: {rule[5:]}", analysis[rule],
                                      score="accuracy"))  # fmt: skip
            cfg = plus_config(name, backbone, **chosen)
            tag = "-".join(str(v) for v in chosen.values())
            record = run_or_load(
                dataset_folder(out, name) / backbone / f"plus-final-{tag}", ds, cfg,
                "policy-gnn-plus", args.seeds, args.seed_mode, replace=args.overwrite,
            )  # fmt: skip
            entries.append(_entry(name, backbone, "policy-gnn-plus", record))
            if backbone == "decoupled":
                depth_figure(name, ds, record, out / f"{dataset_folder_name(name)}_plus_depths.png")
    path = pathlib.Path(args.results_json)
    study_files.merge(path, ADAPTIVE_DEPTH_FILE, adaptive_depth_shape,
                      lambda old: merged_records(old, entries, missing, path, args))  # fmt: skip
    for e in entries:
        t = e["test_metric"]
        depth = f" depth {e['depth']}" if "depth" in e else ""
        print(f"{e['dataset']:9s} {e['backbone']:10s} {e['method']}{depth}: "
              f"{t['mean']:.4f} ± {t['std']:.4f}")  # fmt: skip
    for line in missing:
        print(f"missing: {line}")


def _read_object(path, what: str, made_by: str) -> dict:
    """A JSON object this script reads (`made_by` writes it), named when it is not one."""
    value = outputs.read_json(pathlib.Path(path), made_by=made_by)
    if not isinstance(value, dict):
        raise outputs.CheckpointError(
            f"{path} is not {what}'s JSON (it holds {str(value)[:60]}): point the flag at the "
            f"file {made_by} wrote."
        )
    return value


def depth_figure(name, ds, record, path: pathlib.Path) -> None:
    """Mean chosen depth of the test nodes against degree and against the hop distance to the
    nearest training node (all seeds pooled)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from policy_gnn_jax.contrib.adaptive_depth import signals as pg_signals

    depths = np.asarray(record["test_depths"], np.float64)  # [S, T]
    signals = pg_signals.node_signals(ds, 16)[ds.test_index]
    degree, distance = np.expm1(signals[:, 0]).round(), signals[:, 1]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, x, label in ((axes[0], np.minimum(degree, 10), "degree (10 = 10 or more)"),
                         (axes[1], distance, "hops to the nearest training node")):  # fmt: skip
        values = np.unique(x)
        means = [depths[:, x == v].mean() for v in values]
        counts = [int((x == v).sum()) for v in values]
        ax.plot(values, means, "o-")
        for v, m, c in zip(values, means, counts):
            ax.annotate(str(c), (v, m), fontsize=7, textcoords="offset points", xytext=(0, 4))
        ax.set_xlabel(label)
        ax.set_ylabel("mean depth chosen (test nodes)")
    fig.suptitle(f"Policy-GNN+ on {name}, decoupled backbone (labels: number of test nodes)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path)
    plt.close(fig)
    print(f"figure: {path}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("what", choices=["ablate", "results"])
    p.add_argument(
        "--backbones",
        nargs="+",
        default=None,
        choices=pg.config.BACKBONES,
        help="results: the backbones to compare (gcn decoupled); ablate uses --backbone",
    )
    p.add_argument("--headroom-json", default=UNREAD["ablate"]["headroom_json"])
    p.add_argument("--results-json", default=UNREAD["ablate"]["results_json"])
    p.add_argument("--datasets", nargs="+", default=["cora", "citeseer"])
    p.add_argument("--backbone", default=UNREAD["results"]["backbone"], choices=pg.config.BACKBONES)
    p.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="default: 5 for ablate (a screen on validation), 10 for results (the protocol)",
    )
    p.add_argument("--seed-mode", default=None, choices=seed_axis.SEED_MODES,
                   help="default: map on a CPU, vmap on an accelerator (the committed CPU runs: "
                   "vmap, except the decoupled policy and random rows)")  # fmt: skip
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default="results/adaptive_depth")
    p.add_argument(
        "--overwrite", action="store_true", help="replace a saved run that differs (else refused)"
    )
    p.add_argument("--ablation-json", default="docs/results/plus_ablation.json")
    args = p.parse_args(argv)
    if args.seeds is None:
        args.seeds = 5 if args.what == "ablate" else 10
    return exit_status(run, args)


# The flags one command reads and the other does not, with their defaults.
UNREAD = {"results": {"backbone": "decoupled"},
          "ablate": {"results_json": "docs/results/adaptive_depth.json",
                     "headroom_json": "docs/results/headroom.json"}}  # fmt: skip


def _warn_unread_flags(args) -> None:
    """A flag the command does not read is said, never silently dropped."""
    for field, default in UNREAD[args.what].items():
        if getattr(args, field) != default:
            flag = "--" + field.replace("_", "-")
            print(f"warning: {flag} is not used by {args.what}.", file=sys.stderr)


def run(args) -> None:
    """Refuses bad names and unwritable outputs before any sweep, then runs the command."""
    if args.what == "ablate" and args.backbones is not None:  # it would be ignored
        raise ValueError("ablate runs one backbone: pass --backbone NAME (--backbones is results')")
    args.backbones = args.backbones or ["gcn", "decoupled"]
    for name in args.datasets:
        data.check_name(name)
    outputs.check_writable_dir(args.out)
    for flag in ("datasets", "backbones"):  # each would be run, and written, twice
        # A dataset given by path runs in a folder of its last part (`dataset_folder`).
        named = [dataset_folder_name(n).lower() for n in getattr(args, flag)]
        twice = next((n for i, n in enumerate(named) if n in named[:i]), None)
        if twice is not None:
            raise pg.ConfigError(f"--{flag}: {twice} is named twice; name it once.")
    written = args.ablation_json if args.what == "ablate" else args.results_json
    outputs.check_writable_file(written)
    if args.what == "ablate":  # merged into after the sweeps: checked before them
        study_files.check(written, ABLATION_FILE, ablation_shape)
    else:
        study_files.check(written, ADAPTIVE_DEPTH_FILE, adaptive_depth_shape)
    _warn_unread_flags(args)  # once the command is known to run: a refusal stays one line
    with locks.FolderLock(args.out, "output folder"):  # one command at a time per --out
        {"ablate": ablate, "results": results}[args.what](args)


if __name__ == "__main__":
    use_every_core()  # read when JAX starts its backend, which no import above does
    finish(main())
