"""The heterophily study's Markdown table: each dataset's rows (fixed depths, headroom, the
policies) beside the published results on the same splits."""

from __future__ import annotations

import io
import pathlib

import jax
import numpy as np

from policy_gnn_jax.config import ConfigError
from policy_gnn_jax.contrib.study_shapes import (
    HETEROPHILY_FILE,
    OPTIONS_FILE,
    heterophily_shape,
    options_shape,
)
from policy_gnn_jax.runtime import outputs, records, study_files

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
    outputs.atomic_write_text(path, "\n".join(lines) + "\n")


def dataset_entry(option: str, metric: str, seeds: int, max_depth: int, episodes: int,
                  rows: dict) -> dict:  # fmt: skip
    """A dataset's entry in the results file: what made its rows (the XLA flags too: they change
    the bits, and the backend: a GPU's differ from a CPU's) and each row (name -> one dict per
    split) over the splits."""
    return {"backbone_options": option, "metric": metric, "seeds": seeds, "max_depth": max_depth,
            "episodes": episodes, "xla_flags": records.xla_flags(),
            "backend": jax.default_backend(),
            "rows": {key: over_splits(per_split) for key, per_split in rows.items()}}  # fmt: skip


def over_splits(per_split: list[dict]) -> dict:
    """Each split's mean over seeds, then mean ± std over splits (the literature's protocol)."""
    row = {}
    for part in ("val", "test"):
        values = [np.mean(r[part]) for r in per_split if r[part] is not None]
        if values:
            row[part] = records.mean_std(values, per="per_split")
    if "depth" in per_split[0]:
        row["depth_per_split"] = [r["depth"] for r in per_split]
    return row


# What a policy's row depends on besides its own training: an entry's rows made with other
# settings would be mislabelled by this run's.
ROW_SETTINGS = (
    "backbone_options",
    "metric",
    "seeds",
    "max_depth",
    "episodes",
    "xla_flags",
    "backend",
)


def keep_skipped_rows(old: dict | None, new: dict, skipped, policies, name: str, path,
                      said: list) -> dict:  # fmt: skip
    """`new` (this run's entry for a dataset) with the rows of the policies it skipped taken
    from `old` (the file's entry for it) when `old` says it made them with the same settings on
    as many splits: adding one policy to a finished dataset does not train the others again. A
    line in `said` says which were kept; rows made otherwise, or whose settings the file does not
    record, are not kept, and the line says why (the entry that would drop them is then refused
    unless --overwrite, as any other). The file is read as the study wrote it (its shape checked
    by `study_shapes`): a value edited by hand is out of scope (docs/reliability.md)."""
    rows = (old or {}).get("rows") or {}
    found = [p for p in policies if p in skipped and p in rows]
    if not found:
        return new
    splits = len(next(iter(new["rows"].values()))["test"]["per_split"])
    made = dict(old)
    if "xla_flags" in made:  # spacing changes nothing
        made["xla_flags"] = records.xla_flags(made["xla_flags"])
    why = [f"{k} not recorded" if k not in made else f"made with {k} {made[k]}, not {new.get(k)}"
           for k in ROW_SETTINGS if k not in made or made[k] != new.get(k)]  # fmt: skip
    lengths = {len(rows[p]["test"]["per_split"]) for p in found}
    why += [f"made on {n} splits, not {splits}" for n in sorted(lengths) if n != splits]
    if why:
        said.append(f"warning: {name}'s {' and '.join(found)} rows in {path} are not kept: "
                    f"{'; '.join(why)}.")  # fmt: skip
        return new
    said.append(f"{name}: {' and '.join(found)} kept from {path} (skipped; made with the same "
                f"settings).")  # fmt: skip
    merged = {**new["rows"], **{p: rows[p] for p in found}}
    order = [k for k in merged if k not in policies] + [p for p in policies if p in merged]
    return {**new, "rows": {k: merged[k] for k in order}}


def check_files(options: pathlib.Path, results: pathlib.Path, choices) -> None:
    """The two JSON files the study merges into hold what the study wrote (`study_files`;
    `choices`: the backbone options an options file may name). The table (`<results>.md`), the
    figure's points (`<results>.depths.npz`) and the figure are made from the results file, and
    drawn again at every merge."""
    study_files.check(options, OPTIONS_FILE, options_shape(choices))
    study_files.check(results, HETEROPHILY_FILE, heterophily_shape)


def merge_points(results: pathlib.Path, points: dict) -> dict:
    """Each dataset's (degree, homophily, depth) points for the figure, kept beside the results
    file so that a run over some datasets redraws the others too."""
    path = results.with_suffix(".depths.npz")
    kept = dict(np.load(path)) if path.exists() else {}
    for name, drawn in points.items():  # this run's entry replaced the dataset's: so do these
        if len(drawn):
            kept[name] = drawn
        else:
            kept.pop(name, None)
    buffer = io.BytesIO()
    np.savez(buffer, **kept)
    outputs.atomic_write_bytes(path, buffer.getvalue())
    return kept


FIGURE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


def check_distinct_outputs(options_json, results_json, figure) -> None:
    """Every file the study writes is its own: one written over another would lose it. The
    table (.md) and the figure's points (.depths.npz) differ from the JSON files by suffix."""
    if pathlib.Path(figure).suffix.lower() not in FIGURE_SUFFIXES:
        raise ConfigError(
            f"--figure must name an image ({', '.join(FIGURE_SUFFIXES)}), got {figure}."
        )
    if outputs.real_path(options_json) == outputs.real_path(results_json):
        raise ConfigError(
            f"--options-json and --results-json are one file ({results_json}): give each "
            f"its own, or one would be written over the other."
        )
