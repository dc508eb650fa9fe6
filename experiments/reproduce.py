"""Regenerate the paper's Table 3 (with the audit), the ablations, Figures 1, 3 and 4, and the
planted-depth benchmark.

  python experiments/reproduce.py table    # runs what is missing, writes table3.md / table3.json
  python experiments/reproduce.py ablations --datasets cora citeseer
  python experiments/reproduce.py figures  # fig3_depths.png, fig4_val_curves.png from those runs
  python experiments/reproduce.py fig1 --dataset cora --seeds 100
  python experiments/reproduce.py planted --seeds 5 --episodes 200

Every run is one seed sweep (vmapped; `--seed-mode map`: one seed after another) saved as
<out>/<dataset>/<run>/results.json; a run whose saved config, seed count and seed mode match is
reused, so an interrupted command resumes. Model selection
is by validation only: the "best fixed depth" row picks the depth with the best mean validation
accuracy, never by test accuracy.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import pathlib
import sys

import numpy as np

import policy_gnn_jax as pg
from policy_gnn_jax import config as config_lib
from policy_gnn_jax import data
from policy_gnn_jax.cli import exit_status
from policy_gnn_jax.contrib.adaptive_depth import headroom as pg_headroom
from policy_gnn_jax.runtime import checkpoint, records, runner

# ALGORITHM.md section 8 (paper Table 3): mean, std (None where the paper gives none).
PAPER = {
    "gcn-d2": {"cora": (0.815, None), "citeseer": (0.703, None), "pubmed": (0.790, None)},
    "random": {"cora": (0.770, 0.021), "citeseer": (0.656, 0.024), "pubmed": (0.788, 0.011)},
    "policy-gnn": {"cora": (0.919, 0.014), "citeseer": (0.897, 0.021), "pubmed": (0.921, 0.022)},
}
# The audit rows sit beside the paper's numbers they may explain.
PAPER["random-audit"] = PAPER["random"]
PAPER["policy-gnn-audit"] = PAPER["policy-gnn"]
ROWS = [
    ("gcn-d2", "GCN (depth 2)"),
    ("best-fixed", "Best fixed depth (chosen on val)"),
    ("random", "Random policy"),
    ("policy-gnn", "Policy-GNN"),
    ("random-audit", "*audit*: random policy, released-code metric (macro, best of run)"),
    ("policy-gnn-audit", "*audit*: Policy-GNN, released-code metric (macro, best of run)"),
]


def _as_json(cfg: config_lib.Config) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def configs_match(saved: dict, cfg: config_lib.Config, method: str | None = None) -> bool:
    """Whether a saved run's config is `cfg`. A field the saved config lacks was added to
    `Config` after the run; it matches at its default value, because a new field's default keeps
    the code's earlier behaviour (each such change was checked bit-identical), so adding a field
    does not invalidate every saved run. For a `method` other than policy-gnn-plus, the `plus_*`
    fields are not compared: only policy-gnn-plus reads them (plus.py)."""
    current, defaults = _as_json(cfg), _as_json(config_lib.Config())
    if not set(saved) <= set(current):
        return False
    if method is not None and method != "policy-gnn-plus":
        current = {k: v for k, v in current.items() if not k.startswith("plus_")}
    return all(saved[k] == v if k in saved else v == defaults[k] for k, v in current.items())


def run_or_load(out: pathlib.Path, ds, cfg, method, seeds, seed_mode="vmap", seed=0) -> dict:
    """Runs one sweep unless a matching results.json is already saved there (same config, seeds,
    method and seed mode; records from before the mode was recorded were all vmapped)."""
    path = out / "results.json"
    if path.exists():
        record = checkpoint.read_json(path)  # a truncated file is named, with what to do
        if (
            configs_match(record["config"], cfg, method)
            and record["seeds"] == seeds
            and record["method"] == method
            and record.get("seed_mode", "vmap") == seed_mode
        ):
            print(f"reusing {path}: {records.summary_line(record)}")
            return record
    record = pg.fit(ds, cfg, method=method, seeds=seeds, seed=seed, seed_mode=seed_mode).record
    records.save(record, out)
    print(records.summary_line(record))
    return record


def base_config(args, dataset: str | None = None, **overrides) -> config_lib.Config:
    """The preset (paper defaults, or `tiny` for smoke runs) with the command's overrides; for
    the decoupled backbone, its defaults and the regularisation tuned for `dataset`."""
    preset = config_lib.Config.tiny if args.preset == "tiny" else config_lib.Config.paper
    if args.backbone == "decoupled":
        backbone_values = dict(config_lib.DECOUPLED_DEFAULTS)
        backbone_values.update(config_lib.DECOUPLED_TUNED.get(dataset or "", {}))
        if args.preset == "tiny":  # keep the tiny depths
            for name in ("min_depth", "max_depth", "depth", "epochs"):
                backbone_values.pop(name)
        overrides = {**backbone_values, **overrides}
    else:
        overrides.setdefault("backbone", args.backbone)
    if args.episodes is not None:
        overrides.setdefault("num_episodes", args.episodes)
    return preset(**overrides)


def policy_config(args, method, dataset=None, **overrides) -> config_lib.Config:
    """Policy-GNN or the random policy; with the audit on unless --no-audit (the audit has its
    own key and feeds nothing back, so the honest numbers are the same either way)."""
    return base_config(
        args, dataset, random_policy=(method == "random"), audit=args.audit, **overrides
    )


def dataset_runs(name, args, out_root) -> dict:
    ds = data.load_dataset(name, data_dir=args.data_dir)
    base = base_config(args, name)
    runs = {}
    lowest = 0 if base.backbone == "decoupled" else 1
    for depth in range(lowest, base.max_depth + 1):
        cfg = dataclasses.replace(base, depth=depth)
        runs[f"gcn-d{depth}"] = run_or_load(
            out_root / name / f"gcn-d{depth}", ds, cfg, "gcn", args.seeds, args.seed_mode
        )
    for method in ("random", "policy-gnn"):
        cfg = policy_config(args, method, name)
        runs[method] = run_or_load(
            out_root / name / method, ds, cfg, method, args.seeds, args.seed_mode
        )
    return runs


def _fmt(acc: dict | None) -> str:
    return "—" if acc is None else f"{acc['mean']:.3f} ± {acc['std']:.3f}"


def _paper(row, name) -> str:
    mean, std = PAPER.get(row, {}).get(name, (None, None))
    if mean is None:
        return ""
    return f" (paper {mean:.3f}" + (f" ± {std:.3f})" if std is not None else ")")


def best_fixed_depth(runs: dict) -> str:
    """The fixed-depth run with the best mean VALIDATION accuracy (test is never looked at)."""
    depths = [k for k in runs if k.startswith("gcn-d")]
    return max(depths, key=lambda k: runs[k]["val_accuracy"]["mean"])


def table_rows(results: dict) -> dict:
    """{row key: {dataset: accuracy dict}}, the audit rows included where the runs have them."""
    rows = {}
    for name, runs in results.items():
        best = best_fixed_depth(runs)
        rows.setdefault("best-fixed", {})[name] = dict(
            runs[best]["test_accuracy"], depth=int(best[5:])
        )
        for key in ("gcn-d2", "random", "policy-gnn"):
            rows.setdefault(key, {})[name] = runs[key]["test_accuracy"]
            if "audit" in runs[key]:
                audit = runs[key]["audit"]
                rows.setdefault(f"{key}-audit", {})[name] = audit["macro_accuracy_best_of_run"]
    return rows


def markdown_table(rows: dict, names: list, skipped: dict) -> list[str]:
    lines = ["| Method | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for key, label in ROWS:
        if key not in rows and key.endswith("-audit"):
            continue
        cells = []
        for name in names:
            if name in skipped:
                cells.append("skipped")
                continue
            acc = rows.get(key, {}).get(name)
            extra = f" (depth {acc['depth']})" if key == "best-fixed" and acc else ""
            cells.append(_fmt(acc) + extra + _paper(key, name))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def audit_breakdown(name: str, runs: dict) -> str:
    """What each of the released code's two changes adds, on one dataset's runs."""
    parts = []
    for key in ("policy-gnn", "random"):
        audit = runs[key].get("audit")
        if audit:
            parts.append(
                f"{key}: honest {audit['honest_test_accuracy']['mean']:.3f}, macro accuracy of "
                f"the same validation-selected snapshot "
                f"{audit['macro_accuracy_of_selected_snapshot']['mean']:.3f}, macro accuracy "
                f"best of run {audit['macro_accuracy_best_of_run']['mean']:.3f}"
            )
    return f"- {name}: " + "; ".join(parts) + "."


def table(args) -> None:
    out = pathlib.Path(args.out)
    results, skipped = {}, {}
    for name in args.datasets:
        try:
            results[name] = dataset_runs(name, args, out)
        except data.MissingDataError as err:  # files not here: skip, saying why
            skipped[name] = str(err)
            print(f"skipped {name}: {err}")
    rows = table_rows(results)
    names = list(args.datasets)
    seeds = {r["seeds"] for runs in results.values() for r in runs.values()}
    episodes = {
        r["config"]["num_episodes"]
        for runs in results.values()
        for r in runs.values()
        if r["method"] != "gcn"
    }
    # Where the runs ran (a reused run may come from another machine than this process).
    backends = {
        f"{r['versions']['jax_backend']} (jax {r['versions']['jax']}, seeds "
        f"{r.get('seed_mode', 'vmap')}ped)"
        for runs in results.values()
        for r in runs.values()
    }
    notes = [
        f"\nTest accuracy, mean ± std over {'/'.join(map(str, sorted(seeds)))} seeds, honest "
        f"protocol (ALGORITHM.md §5): every model selected on validation, test labels read once; "
        f"policy runs of {'/'.join(map(str, sorted(episodes)))} episodes; "
        f"preset `{args.preset}`, backbone `{args.backbone}`; runs made on JAX backend "
        f"{', '.join(sorted(backends))}."
    ]
    if any(key.endswith("-audit") for key in rows):
        notes.append(
            "\nThe rows marked *audit* are NOT results: they are the released code's metric "
            "(ALGORITHM.md §6) measured on the same runs, the macro accuracy over depth groups, "
            "best of run. " + records.AUDIT_EXPLANATION
        )
        notes += [audit_breakdown(name, runs) for name, runs in results.items()]
    notes += [f"- {name} skipped: {reason}" for name, reason in skipped.items()]
    walls = [
        f"{name}/{key} {r['wall_time_s']:.0f} s"
        for name, runs in results.items()
        for key, r in runs.items()
    ]
    notes.append("\nWall time per run: " + ", ".join(walls) + ".")
    text = "\n".join(markdown_table(rows, names, skipped) + notes) + "\n"
    checkpoint.atomic_write_text(out / "table3.md", text)
    checkpoint.atomic_write_text(
        out / "table3.json",
        json.dumps(
            {
                "rows": rows,
                "best_fixed_depth_by_val": {n: best_fixed_depth(r) for n, r in results.items()},
                "skipped": skipped,
                "paper": PAPER,
                "wall_time_s": {
                    n: {k: r["wall_time_s"] for k, r in runs.items()} for n, runs in results.items()
                },
                "versions": records.package_versions(),
            },
            indent=2,
        ),
    )
    print(text)


# (run name, what changes, the change); None: the random policy instead of the DQN.
ABLATIONS = [
    ("policy-gnn", "none: Policy-GNN as in the table", {}),
    ("ablation-walk", "transition `walk` instead of `labelled`", {"transition": "walk"}),
    ("ablation-depths-from-1", "depth 1 allowed too (min depth 1)", {"min_depth": 1}),
    ("random", "random policy instead of the DQN", None),
]


def ablations(args) -> None:
    """Policy-GNN against one change at a time; the first and last rows are the table's runs."""
    out = pathlib.Path(args.out)
    lines = [
        "| Variant | " + " | ".join(args.datasets) + " |",
        "|---|" + "---|" * len(args.datasets),
    ]
    record, backends = {}, set()
    for name in args.datasets:
        ds = data.load_dataset(name, data_dir=args.data_dir)
        for key, _, change in ABLATIONS:
            method = "random" if change is None else "policy-gnn"
            cfg = policy_config(args, method, name, **(change or {}))
            r = run_or_load(out / name / key, ds, cfg, method, args.seeds, args.seed_mode)
            backends.add(f"{r['versions']['jax_backend']} (jax {r['versions']['jax']})")
            record.setdefault(key, {})[name] = {
                "test_accuracy": r["test_accuracy"],
                "val_accuracy": r["val_accuracy"],
                "test_depth_share": r["test_depth_distribution"]["mean"],
                "depths": r["depths"],
                "wall_time_s": r["wall_time_s"],
            }
    for key, label, _ in ABLATIONS:
        runs = [record[key][n] for n in args.datasets]
        cells = [f"{_fmt(r['test_accuracy'])} (val {r['val_accuracy']['mean']:.3f})" for r in runs]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + (
        f"\n\nTest accuracy, mean ± std over {args.seeds} seeds (validation mean in brackets), "
        "honest protocol; one change at a time from the paper's defaults; runs made on JAX "
        f"backend {', '.join(sorted(backends))}.\n"
    )
    checkpoint.atomic_write_text(out / "ablations.md", text)
    checkpoint.atomic_write_json(out / "ablations.json", record)
    print(text)


def figures(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = pathlib.Path(args.out)
    runs_by_name = {
        p.parent.parent.name: checkpoint.read_json(p)
        for p in sorted(out.glob("*/policy-gnn/results.json"))
    }
    if not runs_by_name:
        raise data.DataError(f"no Policy-GNN runs under {out}: run `reproduce.py table` first")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    width = 0.8 / len(runs_by_name)
    for i, (name, r) in enumerate(runs_by_name.items()):
        share = np.array(r["test_depth_distribution"]["per_seed"])  # [S, A]
        x = np.array(r["depths"]) + (i - (len(runs_by_name) - 1) / 2) * width
        ax.bar(x, share.mean(0), width, alpha=0.7, label=f"{name} (mean)")
        jitter = np.linspace(-0.25, 0.25, share.shape[0]) * width
        ax.scatter(
            (x[None, :] + jitter[:, None]).ravel(),
            share.ravel(),
            s=8,
            color="k",
            zorder=3,
            label="one seed" if i == 0 else None,
        )
    ax.set_ylim(0, 1)
    ax.set_xticks(next(iter(runs_by_name.values()))["depths"])
    _finish(
        fig,
        ax,
        "depth (number of GCN layers)",
        "share of test nodes",
        "Depth the selected policy assigns to test nodes",
        out / "fig3_depths.png",
    )
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, r in runs_by_name.items():
        curves = np.array(r["val_accuracy_curve"]["per_seed"])
        episodes = np.arange(1, curves.shape[1] + 1)
        mean, std = curves.mean(0), curves.std(0)
        ax.plot(episodes, mean, label=f"{name} (mean over seeds)")
        ax.fill_between(episodes, mean - std, mean + std, alpha=0.25, label=f"{name} ± std")
    _finish(
        fig,
        ax,
        "episode",
        "validation accuracy",
        "Policy-GNN validation accuracy per episode (mean of its steps)",
        out / "fig4_val_curves.png",
    )
    print(f"wrote {out / 'fig3_depths.png'} and {out / 'fig4_val_curves.png'}")


def _finish(fig, ax, xlabel: str, ylabel: str, title: str, path: pathlib.Path) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)


def save_figure(fig, path: pathlib.Path) -> None:
    """PNG written atomically: an interrupted run never leaves a half-written figure."""
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=120, format="png")
    checkpoint.atomic_write_bytes(path, buffer.getvalue())


def fixed_depth_probs(name, ds, args, out_root) -> tuple[np.ndarray, np.ndarray]:
    """[D, S, N, C] class probabilities of every node from each fixed-depth sweep, and the depths.

    Cached in <out>/<dataset>/headroom_probs.npz, reused while the config and seeds match."""
    base = base_config(args, name)
    depths = np.arange(0 if base.backbone == "decoupled" else 1, base.max_depth + 1)
    path = out_root / name / "headroom_probs.npz"
    tag = json.dumps([dataclasses.asdict(base), args.seeds, ds.fingerprint()], sort_keys=True)
    if path.exists():
        with np.load(path) as z:
            if str(z["tag"]) == tag:
                print(f"reusing {path}")
                return z["probs"], z["depths"]
    nodes = np.arange(ds.num_nodes)
    probs = []
    for depth in depths:
        cfg = dataclasses.replace(base, depth=int(depth))
        fitted = pg.fit(ds, cfg, method="gcn", seeds=args.seeds, progress=False)
        print(records.summary_line(fitted.record), flush=True)
        logits = fitted.predict_logits(nodes).astype(np.float64)
        logits -= logits.max(-1, keepdims=True)
        probs.append(np.exp(logits) / np.exp(logits).sum(-1, keepdims=True))
    probs = np.stack(probs).astype(np.float32)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, probs=probs, depths=depths, tag=np.array(tag))
    path.parent.mkdir(parents=True, exist_ok=True)
    checkpoint.atomic_write_bytes(path, buffer.getvalue())
    return probs, depths


HEADROOM_ROWS = [
    ("best_fixed_depth_by_val", "Best fixed depth (chosen on val)"),
    ("rule_most_confident_depth", "Label-free: most confident depth"),
    ("rule_smoothness_depth", "Label-free: NDLS-style smoothness depth (eps on val)"),
    ("probe_on_validation_nodes", "Probe fitted on validation nodes (label-free signals)"),
    ("upper_bound_most_often_right_depth", "*upper bound*: depth most often right (reads test)"),
    ("upper_bound_cross_seed", "*upper bound*: depth most often right in the other seeds"),
    ("upper_bound_any_depth_right", "*upper bound*: any depth right (reads test)"),
]


def headroom(args) -> None:
    """The headroom analysis per dataset for `--backbone`: fixed depths, two upper bounds,
    label-free rules and the validation-fitted probe. Writes <out>/headroom.{json,md} and merges
    the numbers into --headroom-json under the backbone's name."""
    out = pathlib.Path(args.out)
    analyses, skipped = {}, {}
    for name in args.datasets:
        try:
            ds = data.load_dataset(name, data_dir=args.data_dir)
        except data.MissingDataError as err:
            skipped[name] = str(err)
            print(f"skipped {name}: {err}")
            continue
        probs, depths = fixed_depth_probs(name, ds, args, out)
        analyses[name] = pg_headroom.analyse(ds, probs, depths, max_hops=int(depths.max()))
    names = list(analyses)
    lines = [
        f"| Rule ({args.backbone} backbone) | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for key, label in HEADROOM_ROWS:
        cells = []
        for name in names:
            row = analyses[name][key]
            cell = _fmt(row["test_accuracy"])
            if "val_accuracy" in row:
                cell += f" (val {row['val_accuracy']['mean']:.3f})"
            if key == "best_fixed_depth_by_val":
                cell += f", depth {row['depth']}"
            if "share_of_headroom" in row:
                cell += f", {100 * row['share_of_headroom']:.0f}% of headroom"
            cells.append(cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append(
        f"\nTest accuracy, mean ± std over {args.seeds} seeds; every choice made on validation; "
        f"the upper bounds read test labels and are not methods. Headroom = the first upper "
        f"bound minus the best fixed depth."
    )
    lines += [f"- {name} skipped: {reason}" for name, reason in skipped.items()]
    text = "\n".join(lines) + "\n"
    checkpoint.atomic_write_text(out / "headroom.md", text)
    checkpoint.atomic_write_text(out / "headroom.json", json.dumps(analyses, indent=2))
    merged_path = pathlib.Path(args.headroom_json)
    merged = checkpoint.read_json(merged_path) if merged_path.exists() else {}
    merged[args.backbone] = {**merged.get(args.backbone, {}), **analyses}
    checkpoint.atomic_write_text(merged_path, json.dumps(merged, indent=2))
    print(text)


def fig1(args) -> None:
    """Per test node, the fraction of seeds in which a fixed-depth GCN classifies it correctly."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from policy_gnn_jax import fixed_depth, graph
    from policy_gnn_jax.runtime import runner

    ds = data.load_dataset(args.dataset, data_dir=args.data_dir)
    g = graph.from_dataset(ds)
    picked = np.sort(np.random.default_rng(0).choice(len(ds.test_index), 20, replace=False))
    grid = []
    for depth in range(1, 6):
        b = fixed_depth.make_baseline(base_config(args, depth=depth), g)
        _, _, res = runner.run_trainer(
            b, runner.seed_keys(0, args.seeds), desc=f"fig1 depth {depth}"
        )
        grid.append(res["test_correct"][:, picked].mean(0))
        print(f"depth {depth}: mean test accuracy {res['test_accuracy'].mean():.3f}")
    grid = np.array(grid).T  # [20 nodes, 5 depths]
    out = pathlib.Path(args.out)
    fig, ax = plt.subplots(figsize=(4.2, 6))
    im = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(5), [str(d) for d in range(1, 6)])
    ax.set_yticks(range(20), [str(int(ds.test_index[i])) for i in picked])
    ax.set_xlabel("GCN depth")
    ax.set_ylabel("test node id")
    ax.set_title(
        f"{ds.name}: share of {args.seeds} seeds\nclassifying the node correctly", fontsize=10
    )
    fig.colorbar(im, ax=ax, fraction=0.05)
    fig.tight_layout()
    save_figure(fig, out / f"fig1_{ds.name}.png")
    checkpoint.atomic_write_json(
        out / f"fig1_{ds.name}.json",
        {
            "nodes": ds.test_index[picked].tolist(),
            "depths": list(range(1, 6)),
            "fraction_correct": grid.tolist(),
            "seeds": args.seeds,
        },
    )
    best = grid.argmax(1) + 1
    print(f"wrote {out / f'fig1_{ds.name}.png'}; best depth per node: {best.tolist()}")


def planted(args) -> None:
    """How often the learned policy picks the planted depth, and accuracy against baselines."""
    ds = data.make_planted_depth(seed=0)
    base = base_config(args, min_depth=1, max_depth=5, input_dropout=0.0)
    out = pathlib.Path(args.out) / "planted"
    summary = {}
    for depth in range(1, 6):
        r = run_or_load(
            out / f"gcn-d{depth}",
            ds,
            dataclasses.replace(base, depth=depth),
            "gcn",
            args.seeds,
            args.seed_mode,
        )
        summary[f"gcn depth {depth}"] = r["test_accuracy"]
    for method in ("random", "policy-gnn"):
        cfg = dataclasses.replace(base, random_policy=(method == "random"))
        r = run_or_load(out / method, ds, cfg, method, args.seeds, args.seed_mode)
        agree = data.planted_agreement(ds, np.array(r["test_depths"]))  # [S]
        summary[method] = dict(r["test_accuracy"], planted_agreement=records.mean_std(agree))
    lines = ["| run | test accuracy | picks the planted depth |", "|---|---|---|"]
    for name, acc in summary.items():
        agree = acc.get("planted_agreement")
        lines.append(f"| {name} | {_fmt(acc)} | {_fmt(agree) if agree else ''} |")
    text = "\n".join(lines) + (
        f"\n\n{args.seeds} seeds, {base.num_episodes} episodes, depths 1-5. "
        "Chance agreement (uniform depths) is 0.40.\n"
    )
    checkpoint.atomic_write_text(out / "planted.md", text)
    print(text)


def check_args(args) -> None:
    """Refuses bad input before any run: unknown dataset names (a typo is an error, never a
    "skipped" dataset), a --data-dir that does not exist, an output folder (or a headroom JSON) that
    cannot be written, out-of-range seeds."""
    for name in [*args.datasets, args.dataset]:
        data.check_name(name)
    if args.data_dir is not None and not pathlib.Path(args.data_dir).is_dir():
        raise data.DataError(f"--data-dir {args.data_dir} does not exist or is not a folder.")
    if args.seeds < 1:
        raise config_lib.ConfigError(f"--seeds must be >= 1, got {args.seeds}.")
    checkpoint.check_writable_dir(args.out)
    if args.what == "headroom":
        checkpoint.check_writable_file(args.headroom_json)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("what", choices=["table", "ablations", "figures", "fig1", "planted", "headroom"])
    p.add_argument("--dataset", default="cora", help="fig1: the dataset")
    p.add_argument("--datasets", nargs="+", default=["cora", "citeseer", "pubmed"])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--episodes", type=int, default=None, help="default: the preset's (1000)")
    p.add_argument(
        "--preset", choices=["paper", "tiny"], default="paper", help="tiny: a smoke run only"
    )
    p.add_argument(
        "--no-audit",
        dest="audit",
        action="store_false",
        help="skip the released-code metric (ALGORITHM.md section 6) in policy runs",
    )
    p.add_argument(
        "--backbone",
        default="gcn",
        choices=config_lib.BACKBONES,
        help="gcn: the paper's shared GCN; gcn-readout: the structure of the results published "
        "before 2026-11; decoupled: MLP then propagation",
    )
    p.add_argument(
        "--seed-mode",
        default="vmap",
        choices=runner.SEED_MODES,
        help="vmap: seeds batched (the published runs); map: one after another (faster per seed "
        "on a CPU; other bits). A saved run is reused only in the mode it was made in",
    )
    p.add_argument("--data-dir", default=None)
    p.add_argument(
        "--headroom-json",
        default="docs/results/headroom.json",
        help="headroom: the file its numbers are merged into, under the backbone's name",
    )
    p.add_argument(
        "--out", default=None, help="default results/reproduce (gcn), else results/reproduce-NAME"
    )
    args = p.parse_args(argv)
    if args.out is None:
        suffix = "" if args.backbone == "gcn" else f"-{args.backbone}"
        args.out = f"results/reproduce{suffix}"
    return exit_status(run, args)


def run(args) -> None:
    """Refuses bad input before any sweep, then runs the command."""
    check_args(args)
    commands = {
        "table": table,
        "ablations": ablations,
        "figures": figures,
        "fig1": fig1,
        "planted": planted,
        "headroom": headroom,
    }
    commands[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
