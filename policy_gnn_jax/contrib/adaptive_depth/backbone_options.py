"""The decoupled backbone's options for heterophilous graphs, and how the heterophily study
chooses among them on validation (`experiments/heterophily.py options`, docs/heterophily.md).

Each option is a set of `Config` fields. `ego_head` and `layer_norm` are the backbone's switches
(`backbones/decoupled.py`). The propagation's teleport is its residual connection: every step adds
`alpha * Z_0` back, the MLP's own output (APPNP's personalised PageRank, GCNII's initial residual),
with alpha = 0.1 unless an option says otherwise; "ego+res" makes that residual five times as
strong beside the ego head.
"""

from __future__ import annotations

from policy_gnn_jax.runtime import records

OPTIONS = {
    "plain": dict(ego_head=False, layer_norm=False),
    "ego": dict(ego_head=True, layer_norm=False),
    "norm": dict(ego_head=False, layer_norm=True),
    "ego+norm": dict(ego_head=True, layer_norm=True),
    "ego+res": dict(ego_head=True, layer_norm=False, teleport=0.5),
}


def kept_scores(entry, *, rerun, seeds: int, max_depth: int, num_splits: int) -> dict:
    """The validation scores an options file's `entry` for one dataset holds that this run does
    not make again (`rerun`) and that were made as it makes its own: the same seeds, depths
    0..max_depth, number of splits, fields of the combination and XLA flags (they change the
    bits). A new combination is chosen against them without training them again. The file is
    read as the study wrote it: a value edited by hand is out of scope (docs/reliability.md)."""
    # Entries written before `num_splits` was recorded say it by each score's per-split list.
    if not isinstance(entry, dict) or _made_otherwise(
        entry, seeds, max_depth, num_splits, may_lack=("num_splits",)
    ):
        return {}
    now = records.xla_flags()
    return {
        option: score
        for option, score in entry.get("scores", {}).items()
        if option not in rerun
        and option in OPTIONS
        and score.get("options", OPTIONS[option]) == OPTIONS[option]
        and len(score["val"]["per_split"]) == num_splits
        and "xla_flags" in score
        and records.xla_flags(score["xla_flags"]) == now
    }


def choose(scores: dict) -> str:
    """The combination with the best mean validation score; a tie goes to the one listed first
    in OPTIONS (the simpler)."""
    ranked = sorted(scores, key=lambda o: (-scores[o]["val"]["mean"], list(OPTIONS).index(o)))
    return ranked[0]


def entry(scores: dict, seeds: int, max_depth: int, num_splits: int) -> dict:
    """A dataset's entry in the options file: the combination chosen over `scores`, and how."""
    best = choose(scores)
    return {"chosen_by_val": best, "options": OPTIONS[best], "scores": scores, "seeds": seeds,
            "max_depth": max_depth, "num_splits": num_splits}  # fmt: skip


def fields_error(entry: dict | None, option: str, where: str) -> str:
    """Why the study cannot run `option` as chosen in `entry` (its recorded fields are not the
    combination's in this version); "" where it can."""
    fields = entry.get("options") if isinstance(entry, dict) else None
    if fields is None or option not in OPTIONS or fields == OPTIONS[option]:
        return ""
    return (f"{where} chose {option} with the fields {fields}, but {option} is {OPTIONS[option]} "
            f"here: run `options` again, or pass --options to say which to run.")  # fmt: skip


def chosen_otherwise(entry: dict | None, seeds: int, max_depth: int, num_splits: int) -> str:
    """How the options in `entry` were chosen where the study runs otherwise (another depth
    range, seed count or number of splits), as "max_depth 1, seeds 5"; "" where not."""
    if not entry:
        return ""
    return _made_otherwise(entry, seeds, max_depth, num_splits, may_lack=_SETTINGS)


_SETTINGS = ("max_depth", "seeds", "num_splits")


def _made_otherwise(entry: dict, seeds, max_depth, num_splits, may_lack=()) -> str:
    """The settings `entry` records that differ from these, as "max_depth 1, seeds 5" ("" where
    none); a setting it lacks (or records as null) differs unless named in `may_lack`."""
    used = {"max_depth": max_depth, "seeds": seeds, "num_splits": num_splits}
    recorded = {k: v if k in may_lack and entry.get(k) is None else entry.get(k)
                for k, v in used.items()}  # fmt: skip
    return ", ".join(f"{k} {recorded[k]}" for k in _SETTINGS if recorded[k] != used[k])
