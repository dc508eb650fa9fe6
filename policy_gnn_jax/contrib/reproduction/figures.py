"""Figures 1, 3 and 4, the headroom analysis and the planted-depth benchmark, from cached runs."""

from __future__ import annotations

import dataclasses
import io
import json
import pathlib
import re

import numpy as np

from policy_gnn_jax import api, data, fixed_depth, methods
from policy_gnn_jax import config as config_lib
from policy_gnn_jax.contrib.adaptive_depth import headroom as pg_headroom
from policy_gnn_jax.contrib.reproduction import runs as run_cache
from policy_gnn_jax.contrib.reproduction import tables
from policy_gnn_jax.contrib.study_shapes import (
    HEADROOM_FILE,
    headroom_shape,
)
from policy_gnn_jax.runtime import outputs, records, study_files


def figures(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = pathlib.Path(args.out)
    runs_by_name = {
        p.parent.parent.name: outputs.read_json(p)
        for p in sorted(out.glob("*/policy-gnn/results.json"))
    }
    if not runs_by_name:
        raise data.DataError(f"no Policy-GNN runs under {out}: run `reproduce.py table` first")
    other = [name for name, r in runs_by_name.items()
             if not run_cache.is_current_record(r) or "val_metric_curve" not in r]  # fmt: skip
    if other:
        raise data.DataError(
            f"the Policy-GNN runs of {', '.join(other)} under {out} were not made by this version "
            f"of policy-gnn-jax: run `reproduce.py table --overwrite` first"
        )
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
        curves = np.array(r["val_metric_curve"]["per_seed"])
        episodes = np.arange(1, curves.shape[1] + 1)
        mean, std = curves.mean(0), curves.std(0)
        ax.plot(episodes, mean, label=f"{name} (mean over seeds)")
        ax.fill_between(episodes, mean - std, mean + std, alpha=0.25, label=f"{name} ± std")
    _finish(
        fig,
        ax,
        "episode",
        "validation score (the dataset's metric)",
        "Policy-GNN validation score per episode (mean of its steps)",
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
    outputs.atomic_write_bytes(path, buffer.getvalue())


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


def _check_fig1_is_this_commands(path: pathlib.Path, ds, args) -> None:
    """fig1's files are named by the dataset's name, which two graphs can share: another
    graph's, another command's (seeds, seed mode, preset) or an unrecorded one's are refused
    before any run unless --overwrite."""
    if args.overwrite:
        return
    png = path.with_suffix(".png")
    if not path.exists() and png.exists():
        raise outputs.CheckpointError(
            f"{png} exists, and no {path.name} beside it says fig1 drew it: nothing was "
            f"replaced. Pass --overwrite to replace it, or use another --out."
        )
    if not path.exists():
        return
    saved = outputs.read_json(path)
    ours = {"seeds": args.seeds, "seed_mode": args.seed_mode, "preset": args.preset}
    same = isinstance(saved, dict) and saved.get("dataset_fingerprint") == ds.fingerprint()
    if not same or any(saved.get(k) != v for k, v in ours.items()):
        raise outputs.CheckpointError(
            f"{path} (and its figure) were drawn by another command (another graph named "
            f"{ds.name}, other seeds, seed mode or preset, or one not recorded): nothing was "
            f"replaced. Pass --overwrite to replace them, or use another --out."
        )


def fig1(args) -> None:
    """Per test node, the fraction of seeds in which a fixed-depth GCN classifies it correctly."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from policy_gnn_jax import graph
    from policy_gnn_jax.runtime import compilation, runner, seed_axis

    ds = data.load_dataset(args.dataset, data_dir=args.data_dir)
    out = pathlib.Path(args.out)
    stem = "fig1_" + re.sub(r"[^\w.-]+", "_", ds.name)  # a name is free text: "sub/graph"
    _check_fig1_is_this_commands(out / f"{stem}.json", ds, args)
    g = graph.from_dataset(ds)
    shown = min(20, len(ds.test_index))
    picked = np.sort(np.random.default_rng(0).choice(len(ds.test_index), shown, replace=False))
    grid = []
    for depth in range(1, 6):
        b = fixed_depth.make_baseline(run_cache.base_config(args, depth=depth), g)
        _, _, res = runner.run_trainer(
            b,
            seed_axis.seed_keys(0, args.seeds),
            desc=f"fig1 depth {depth}",
            seed_mode=args.seed_mode,
            compiler_options=compilation.compiler_options(True, g.kernels != "gather"),
        )
        grid.append(res["test_correct"][:, picked].mean(0))
        print(f"depth {depth}: mean test score {res['test_metric'].mean():.3f}")
    grid = np.array(grid).T  # [nodes shown, 5 depths]
    fig, ax = plt.subplots(figsize=(4.2, 6))
    im = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(5), [str(d) for d in range(1, 6)])
    ax.set_yticks(range(shown), [str(int(ds.test_index[i])) for i in picked])
    ax.set_xlabel("GCN depth")
    ax.set_ylabel("test node id")
    ax.set_title(
        f"{ds.name}: share of {args.seeds} seeds\nclassifying the node correctly", fontsize=10
    )
    fig.colorbar(im, ax=ax, fraction=0.05)
    fig.tight_layout()
    save_figure(fig, out / f"{stem}.png")
    outputs.atomic_write_json(
        out / f"{stem}.json",
        {
            "nodes": ds.test_index[picked].tolist(),
            "depths": list(range(1, 6)),
            "fraction_correct": grid.tolist(),
            "seeds": args.seeds,
            "seed_mode": args.seed_mode,
            "preset": args.preset,
            "dataset_fingerprint": ds.fingerprint(),
        },
    )
    best = grid.argmax(1) + 1
    print(f"wrote {out / f'{stem}.png'}; best depth per node: {best.tolist()}")


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


def depths_by_structure(points: dict, path: pathlib.Path) -> None:
    """Per dataset: the depth a policy chose for each node against its degree and its
    estimated local homophily (`points[name]`: [nodes, 3] degree, homophily, depth), as dots
    and the mean per sextile."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = {n: p for n, p in points.items() if len(p)}
    if not shown:
        return
    fig, axes = plt.subplots(2, len(shown), figsize=(3.2 * len(shown), 6), squeeze=False)
    for col, (name, p) in enumerate(shown.items()):
        for row, (x, label) in enumerate(((np.log1p(p[:, 0]), "log(1 + degree)"),
                                          (p[:, 1], "estimated local homophily"))):  # fmt: skip
            bins = np.quantile(x, np.linspace(0, 1, 7))
            which = np.clip(np.searchsorted(bins, x, side="right") - 1, 0, 5)
            mids = [x[which == b].mean() for b in range(6) if (which == b).any()]
            means = [p[which == b, 2].mean() for b in range(6) if (which == b).any()]
            ax = axes[row, col]
            ax.scatter(x, p[:, 2] + np.random.default_rng(0).normal(0, 0.08, len(x)), s=2,
                       alpha=0.15)  # fmt: skip
            ax.plot(mids, means, "o-", color="k")
            ax.set_xlabel(label)
            ax.set_ylabel("depth chosen by Policy-GNN")
            ax.set_title(name)
    fig.tight_layout()
    save_figure(fig, path)
