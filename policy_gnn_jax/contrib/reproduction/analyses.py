"""The headroom analysis and the planted-depth benchmark (`reproduce.py headroom`, `planted`):
tables from cached fixed-depth and policy runs."""

from __future__ import annotations

import dataclasses
import io
import json
import pathlib

import numpy as np

from policy_gnn_jax import api, data, methods
from policy_gnn_jax import config as config_lib
from policy_gnn_jax.contrib.adaptive_depth import headroom as pg_headroom
from policy_gnn_jax.contrib.reproduction import runs as run_cache
from policy_gnn_jax.contrib.reproduction import tables
from policy_gnn_jax.contrib.study_shapes import HEADROOM_FILE, headroom_shape
from policy_gnn_jax.runtime import outputs, records, study_files


def fixed_depth_probs(name, ds, args, out_root) -> tuple[np.ndarray, np.ndarray]:
    """[D, S, N, C] class probabilities of every node from each fixed-depth sweep, and the depths.

    Cached in <out>/<dataset>/headroom_probs.npz, reused while the config and seeds match."""
    base = run_cache.base_config(args, name)
    depths = np.arange(0 if base.backbone == "decoupled" else 1, base.max_depth + 1)
    path = run_cache.dataset_folder(out_root, name) / "headroom_probs.npz"
    tag = json.dumps([dataclasses.asdict(base), args.seeds, ds.fingerprint()], sort_keys=True)
    shape = (len(depths), args.seeds, ds.num_nodes, ds.num_classes)
    what = "the headroom analysis's fixed-depth runs"
    expected = {"probs": shape, "depths": depths}
    cached = study_files.read_cache(path, tag, expected, args.overwrite, what)
    if cached is not None:
        print(f"reusing {path}")
        return cached["probs"], cached["depths"]
    nodes = np.arange(ds.num_nodes)
    probs = []
    for depth in depths:
        cfg = dataclasses.replace(base, depth=int(depth))
        fitted = api.fit(ds, cfg, method="gcn", seeds=args.seeds, progress=False)
        print(methods.summary_line(fitted.record), flush=True)
        logits = fitted.predict_logits(nodes).astype(np.float64)
        logits -= logits.max(-1, keepdims=True)
        probs.append(np.exp(logits) / np.exp(logits).sum(-1, keepdims=True))
    probs = np.stack(probs).astype(np.float32)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, probs=probs, depths=depths, tag=np.array(tag))
    path.parent.mkdir(parents=True, exist_ok=True)
    outputs.atomic_write_bytes(path, buffer.getvalue())
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
            cell = tables.fmt(row["test_accuracy"])
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
    merged_path = pathlib.Path(args.headroom_json)

    def add_backbone(merged: dict) -> dict:  # refuses to change another run's entry
        records.check_replaced_entries(
            merged.get(args.backbone, {}), analyses, merged_path, args.overwrite
        )
        return {**merged, args.backbone: {**merged.get(args.backbone, {}), **analyses}}

    study_files.check(merged_path, HEADROOM_FILE, headroom_shape(config_lib.BACKBONES))
    study_files.merge(merged_path, HEADROOM_FILE, headroom_shape(config_lib.BACKBONES),
                      add_backbone)  # fmt: skip
    # Only once the merge is accepted: a refused run leaves this run's files as they were.
    outputs.atomic_write_text(out / "headroom.md", text)
    outputs.atomic_write_text(out / "headroom.json", json.dumps(analyses, indent=2))
    print(text)


def planted(args) -> None:
    """How often the learned policy picks the planted depth, and accuracy against baselines."""
    ds = data.make_planted_depth(seed=0)
    base = run_cache.base_config(args, min_depth=1, max_depth=5, input_dropout=0.0)
    out = pathlib.Path(args.out) / "planted"
    summary = {}
    for depth in range(1, 6):
        r = run_cache.run_or_load(
            out / f"gcn-d{depth}",
            ds,
            dataclasses.replace(base, depth=depth),
            "gcn",
            args.seeds,
            args.seed_mode,
            replace=args.overwrite,
        )
        summary[f"gcn depth {depth}"] = r["test_metric"]
    for method in ("random", "policy-gnn"):
        cfg = dataclasses.replace(base, random_policy=(method == "random"))
        r = run_cache.run_or_load(
            out / method, ds, cfg, method, args.seeds, args.seed_mode, replace=args.overwrite
        )
        agree = data.planted_agreement(ds, np.array(r["test_depths"]))  # [S]
        summary[method] = dict(r["test_metric"], planted_agreement=records.mean_std(agree))
    lines = ["| run | test accuracy | picks the planted depth |", "|---|---|---|"]
    for name, acc in summary.items():
        agree = acc.get("planted_agreement")
        lines.append(f"| {name} | {tables.fmt(acc)} | {tables.fmt(agree) if agree else ''} |")
    text = "\n".join(lines) + (
        f"\n\n{args.seeds} seeds, {base.num_episodes} episodes, depths 1-5. "
        "Chance agreement (uniform depths) is 0.40.\n"
    )
    outputs.atomic_write_text(out / "planted.md", text)
    print(text)
