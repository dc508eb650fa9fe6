"""Table 3 (with the audit) and the ablations as Markdown and JSON, from cached runs. Model
selection is by validation only: the "best fixed depth" row picks the depth with the best mean
validation accuracy, never by test accuracy."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable

from policy_gnn_jax import data
from policy_gnn_jax.contrib.reproduction import runs as run_cache
from policy_gnn_jax.mdp import audit
from policy_gnn_jax.runtime import outputs, records

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


def fmt(acc: dict | None) -> str:
    return "—" if acc is None else f"{acc['mean']:.3f} ± {acc['std']:.3f}"


def _paper(row, name) -> str:
    mean, std = PAPER.get(row, {}).get(name, (None, None))
    if mean is None:
        return ""
    return f" (paper {mean:.3f}" + (f" ± {std:.3f})" if std is not None else ")")


def score_label(runs) -> str:
    """What a table's cells are: "Test accuracy", or the metrics of its datasets' runs."""
    names = sorted({records.METRIC_NAMES[r["metric"]] for r in runs})
    return "Test accuracy" if names == ["accuracy"] else f"Test {' or '.join(names)} per dataset"


def best_fixed_depth(runs: dict) -> str:
    """The fixed-depth run with the best mean VALIDATION accuracy (test is never looked at)."""
    depths = [k for k in runs if k.startswith("gcn-d")]
    return max(depths, key=lambda k: runs[k]["val_metric"]["mean"])


def table_rows(results: dict) -> dict:
    """{row key: {dataset: accuracy dict}}, the audit rows included where the runs have them."""
    rows = {}
    for name, runs in results.items():
        best = best_fixed_depth(runs)
        rows.setdefault("best-fixed", {})[name] = dict(
            runs[best]["test_metric"], depth=int(best[5:])
        )
        for key in ("gcn-d2", "random", "policy-gnn"):
            rows.setdefault(key, {})[name] = runs[key]["test_metric"]
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
            cells.append(fmt(acc) + extra + _paper(key, name))
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


def check_report_keeps(path: pathlib.Path, held: Callable[[dict], set], names, overwrite: bool
                       ) -> None:  # fmt: skip
    """A report is written whole from this run's datasets: one that holds others (`held`) is
    refused before any run unless --overwrite, so an earlier table is never cut down unasked.
    Its .md beside it is the same report as text: without the .json it cannot be checked."""
    table = path.with_suffix(".md")
    for written in (path, table):
        if written.exists() and not written.is_file():
            raise outputs.CheckpointError(
                f"{written}, where this run writes its report, is a folder or not a file: move "
                f"it away, or use another --out."
            )
    if overwrite:
        return
    if not path.exists():
        if table.exists():
            raise outputs.CheckpointError(
                f"{table} is there without {path.name}, which says what it holds, and this run "
                f"would replace it: pass --overwrite to replace it, or use another --out."
            )
        return
    try:
        dropped = sorted(held(json.loads(path.read_text())) - set(names))
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as err:
        raise outputs.CheckpointError(
            f"{path} could not be read ({type(err).__name__}), and this run would replace it: "
            f"pass --overwrite to replace it, or use another --out."
        ) from None
    if dropped:
        raise outputs.CheckpointError(
            f"{path} holds {', '.join(dropped)} too, which this run would drop from it: run "
            f"with every dataset (--datasets {' '.join([*dropped, *names])}), pass --overwrite "
            f"to replace it, or use another --out."
        )


def table(args) -> None:
    out = pathlib.Path(args.out)

    def held(t: dict) -> set:
        in_rows = {n for row in t.get("rows", {}).values() for n in row}
        return set(t["best_fixed_depth_by_val"]) | set(t.get("skipped", {})) | in_rows

    check_report_keeps(out / "table3.json", held, args.datasets, args.overwrite)
    results, skipped = {}, {}
    for name in args.datasets:
        try:
            results[name] = run_cache.dataset_runs(name, args, out)
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
        f"{r['seed_mode']}ped)"
        for runs in results.values()
        for r in runs.values()
    }
    notes = [
        f"\n{score_label(r for runs in results.values() for r in runs.values())}, mean ± std "
        f"over {'/'.join(map(str, sorted(seeds)))} seeds, honest "
        f"protocol (docs/algorithm.md section 5): every model selected on validation, test "
        f"labels read once; "
        f"policy runs of {'/'.join(map(str, sorted(episodes)))} episodes; "
        f"preset `{args.preset}`, backbone `{args.backbone}`; runs made on JAX backend "
        f"{', '.join(sorted(backends))}."
    ]
    if any(key.endswith("-audit") for key in rows):
        notes.append(
            "\nThe rows marked *audit* are NOT results: they are the released code's metric "
            "(docs/algorithm.md section 6) measured on the same runs, the macro accuracy over "
            "depth groups, "
            "best of run. " + audit.AUDIT_EXPLANATION
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
    outputs.atomic_write_text(out / "table3.md", text)
    outputs.atomic_write_text(
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
    check_report_keeps(out / "ablations.json",
                       lambda t: {n for row in t.values() for n in row},
                       args.datasets, args.overwrite)  # fmt: skip
    lines = [
        "| Variant | " + " | ".join(args.datasets) + " |",
        "|---|" + "---|" * len(args.datasets),
    ]
    record, backends, made = {}, set(), []
    for name in args.datasets:
        ds = data.load_dataset(name, data_dir=args.data_dir)
        folder = run_cache.dataset_folder(out, name)
        for key, _, change in ABLATIONS:
            method = "random" if change is None else "policy-gnn"
            cfg = run_cache.policy_config(args, method, name, **(change or {}))
            r = run_cache.run_or_load(
                folder / key, ds, cfg, method, args.seeds, args.seed_mode,
                replace=args.overwrite,
            )  # fmt: skip
            backends.add(f"{r['versions']['jax_backend']} (jax {r['versions']['jax']})")
            made.append(r)
            record.setdefault(key, {})[name] = {
                "test_metric": r["test_metric"],
                "val_metric": r["val_metric"],
                "test_depth_share": r["test_depth_distribution"]["mean"],
                "depths": r["depths"],
                "wall_time_s": r["wall_time_s"],
            }
    for key, label, _ in ABLATIONS:
        runs = [record[key][n] for n in args.datasets]
        cells = [f"{fmt(r['test_metric'])} (val {r['val_metric']['mean']:.3f})" for r in runs]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + (
        f"\n\n{score_label(made)}, mean ± std over {args.seeds} seeds (validation mean in "
        "brackets), "
        "honest protocol; one change at a time from the paper's defaults; runs made on JAX "
        f"backend {', '.join(sorted(backends))}.\n"
    )
    outputs.atomic_write_text(out / "ablations.md", text)
    outputs.atomic_write_json(out / "ablations.json", record)
    print(text)
