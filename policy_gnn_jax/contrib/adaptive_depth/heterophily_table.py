"""The heterophily study's Markdown table: each dataset's rows (fixed depths, headroom, the
policies) beside the published results on the same splits."""

from __future__ import annotations

import pathlib

from policy_gnn_jax.runtime import checkpoint, records

# Published test results on these splits (mean ± std over the ten splits, in %): the GloGNN
# repository's results table, the ACM-GNN paper's appendix (fixed 48/32/20 splits), and the
# heterophilous-graphs repository's notebook for minesweeper (ROC AUC).
PUBLISHED = {
    "MLP": {"actor": (36.53, 0.70), "texas": (80.81, 4.75), "wisconsin": (85.29, 3.31),
            "minesweeper": (50.89, 1.39)},
    "GCN": {"actor": (27.32, 1.10), "texas": (55.14, 5.16), "wisconsin": (51.76, 3.06),
            "minesweeper": (89.75, 0.52)},
    "GPRGNN": {"actor": (34.63, 1.22), "texas": (78.38, 4.36), "wisconsin": (82.94, 4.21)},
    "GCNII": {"actor": (37.44, 1.30), "texas": (77.57, 3.83), "wisconsin": (80.39, 3.40)},
    "H2GCN": {"actor": (35.70, 1.00), "texas": (84.86, 7.23), "wisconsin": (87.65, 4.98)},
    "GloGNN++": {"actor": (37.70, 1.40), "texas": (84.05, 4.90), "wisconsin": (88.04, 3.22)},
    "ACMII-GCN++": {"actor": (37.09, 1.32), "texas": (88.38, 3.43), "wisconsin": (88.43, 3.66)},
    "O(d)-NSD": {"actor": (37.81, 1.15), "texas": (85.95, 5.51), "wisconsin": (89.41, 4.74)},
    "SAGE": {"minesweeper": (93.51, 0.57)},
    "GAT-sep": {"minesweeper": (93.91, 0.35)},
}  # fmt: skip


def write(path: pathlib.Path, summary: dict, policies: tuple) -> None:
    """The study's table (Markdown) beside the published rows, every dataset in `summary`."""
    names = list(summary)
    keys = list(dict.fromkeys(k for s in summary.values() for k in s["rows"]))
    lines = ["| row | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for key in keys:
        cells = []
        for name in names:
            row = summary[name]["rows"].get(key)
            cell = "—" if row is None else f"{100 * row['test']['mean']:.2f} ± " \
                f"{100 * row['test']['std']:.2f}"  # fmt: skip
            if row and "val" in row:
                cell += f" (val {100 * row['val']['mean']:.2f})"
            if row and "depth_per_split" in row:
                cell += f", depths {row['depth_per_split']}"
            cells.append(cell)
        label = f"*{key}* (reads test labels)" if "upper_bound" in key else key
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for model, numbers in PUBLISHED.items():
        cells = [f"{numbers[n][0]:.2f} ± {numbers[n][1]:.2f}" if n in numbers else ""
                 for n in names]  # fmt: skip
        lines.append(f"| published: {model} | " + " | ".join(cells) + " |")
    metrics = ", ".join(f"{n}: {records.METRIC_NAMES[summary[n]['metric']]}" for n in names)
    seeds = ", ".join(f"{n}: {summary[n].get('seeds', '?')}" for n in names)
    episodes = ", ".join(f"{n}: {summary[n].get('episodes', '?')}" for n in names
                         if any(k in summary[n]["rows"] for k in policies))  # fmt: skip
    lines.append(
        f"\nTest score in %, mean ± std over the splits of each split's mean over the seeds "
        f"({seeds}) ({metrics}; headroom rows in accuracy). MDP episodes of the policies: "
        f"{episodes or 'none run'}. Backbone options per dataset: "
        + ", ".join(f"{n}: {summary[n]['backbone_options']}" for n in names)
        + ". Every choice on validation; upper bounds read test labels and are not methods."
    )
    checkpoint.atomic_write_text(path, "\n".join(lines) + "\n")
