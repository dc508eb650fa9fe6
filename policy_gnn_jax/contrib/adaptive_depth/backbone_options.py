"""The decoupled backbone's options for heterophilous graphs, and how the heterophily study
chooses among them on validation (`experiments/heterophily.py options`, docs/heterophily.md).

Each option is a set of `Config` fields. `ego_head` and `layer_norm` are the backbone's switches
(`backbones/decoupled.py`). The propagation's teleport is its residual connection: every step adds
`alpha * Z_0` back, the MLP's own output (APPNP's personalised PageRank, GCNII's initial residual),
with alpha = 0.1 unless an option says otherwise; "ego+res" makes that residual five times as
strong beside the ego head.
"""

from __future__ import annotations

OPTIONS = {
    "plain": dict(ego_head=False, layer_norm=False),
    "ego": dict(ego_head=True, layer_norm=False),
    "norm": dict(ego_head=False, layer_norm=True),
    "ego+norm": dict(ego_head=True, layer_norm=True),
    "ego+res": dict(ego_head=True, layer_norm=False, teleport=0.5),
}


def earlier_scores(entry: dict | None, seeds: int, max_depth: int, num_splits: int) -> dict:
    """The validation scores an options file's `entry` for a dataset holds that were made as this
    run makes its own (the same seeds, depths 0..max_depth and number of splits), so that a new
    combination is chosen against them without training them again; {} where none were."""
    if not isinstance(entry, dict) or not isinstance(entry.get("scores"), dict):
        return {}
    made = (entry.get("seeds"), entry.get("max_depth"), entry.get("num_splits", num_splits))
    if made != (seeds, max_depth, num_splits):
        return {}
    # Entries written before `num_splits` was recorded say it by each score's per-split list.
    return {
        option: score
        for option, score in entry["scores"].items()
        if option in OPTIONS and len(score.get("val", {}).get("per_split", ())) == num_splits
    }


def choose(scores: dict) -> str:
    """The combination with the best mean validation score; a tie goes to the one listed first
    in OPTIONS (the simpler)."""
    ranked = sorted(scores, key=lambda o: (-scores[o]["val"]["mean"], list(OPTIONS).index(o)))
    return ranked[0]


def chosen_otherwise(entry: dict | None, seeds: int, max_depth: int, num_splits: int) -> str:
    """How the options in `entry` were chosen where the study runs otherwise (another depth
    range, seed count or number of splits), as "max_depth 1, seeds 5"; "" where not."""
    if not entry:
        return ""
    used = {"max_depth": max_depth, "seeds": seeds, "num_splits": num_splits}
    differ = {k: entry.get(k) for k, v in used.items() if entry.get(k) not in (None, v)}
    return ", ".join(f"{k} {v}" for k, v in differ.items())
