"""Figures 1, 3 and 4 from cached runs, and the figure the heterophily study draws."""

from __future__ import annotations

import io
import pathlib
import re

import numpy as np

from policy_gnn_jax import data, fixed_depth
from policy_gnn_jax.contrib.reproduction import runs as run_cache
from policy_gnn_jax.runtime import outputs


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
