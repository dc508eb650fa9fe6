"""The decoupled backbone's options for heterophilous graphs, and how the heterophily study
chooses among them on validation (`experiments/heterophily.py options`, docs/heterophily.md).

Each option is a set of `Config` fields. `ego_head` and `layer_norm` are the backbone's switches
(`backbones/decoupled.py`). The propagation's teleport is its residual connection: every step adds
`alpha * Z_0` back, the MLP's own output (APPNP's personalised PageRank, GCNII's initial residual),
with alpha = 0.1 unless an option says otherwise; "ego+res" makes that residual five times as
strong beside the ego head.
"""

from __future__ import annotations

import functools
import math

from policy_gnn_jax.config import ConfigError
from policy_gnn_jax.runtime import records

OPTIONS = {
    "plain": dict(ego_head=False, layer_norm=False),
    "ego": dict(ego_head=True, layer_norm=False),
    "norm": dict(ego_head=False, layer_norm=True),
    "ego+norm": dict(ego_head=True, layer_norm=True),
    "ego+res": dict(ego_head=True, layer_norm=False, teleport=0.5),
}


def kept_scores(
    entry,
    *,
    rerun,
    seeds: int,
    max_depth: int,
    num_splits: int,
    where: str,
    said=None,
    strict: bool = True,
) -> dict:
    """The validation scores an options file's `entry` for one dataset holds that this run does
    not make again (`rerun`) and that were made as it makes its own: the same seeds, depths
    0..max_depth, number of splits and fields of the combination. A new combination is chosen
    against them without training them again. One that is not a score is a `ConfigError` if
    `strict` (without --overwrite), else not kept.
    `where`: "texas in options.json", for messages; `said`: a list to which each reason a score
    is not kept is added (as a "warning:" line)."""
    say = functools.partial(_say, where, [] if said is None else said)
    if not isinstance(entry, dict) or "scores" not in entry:
        return {}
    if not isinstance(entry["scores"], dict):
        if strict:
            raise ConfigError(f"{where}: its scores are not a dict of validation scores; {FIX}")
        say(["every combination"], "is not in a dict of validation scores")
        return {}
    scores = {o: s for o, s in entry["scores"].items() if o not in rerun}
    # Entries written before `num_splits` was recorded say it by each score's per-split list.
    differ = _made_otherwise(entry, seeds, max_depth, num_splits, may_lack=("num_splits",))
    if differ:
        if scores:
            say(scores, f"were made with {differ}")
        return {}
    kept = {}
    for option, score in scores.items():
        if option not in OPTIONS:
            say([option], "names a combination this version does not have")
        elif not _is_score(score, option, where, strict):
            say([option], "is not a validation score")
        elif len(score["val"]["per_split"]) != num_splits:
            say([option], f"was not made over {num_splits} splits")
        elif score.get("options", OPTIONS[option]) != OPTIONS[option]:
            say([option], f"was made with {score['options']}, not {OPTIONS[option]}")
        elif (made := _made_under(score)) != (now := f"XLA_FLAGS={records.xla_flags()!r}"):
            say([option], f"was made under {made}, not {now}")  # the flags change the bits
        else:
            kept[option] = score
    return kept


def _made_under(score: dict) -> str:
    """The XLA flags a score was made under, as "XLA_FLAGS=..." (normalised), or a phrase
    where it does not say."""
    if "xla_flags" not in score:
        return "XLA flags it does not record"
    return f"XLA_FLAGS={records.xla_flags(score['xla_flags'])!r}"


# How a file with a score that is not one can be used again.
FIX = "fix or remove it in the file, or pass --overwrite to replace the entry without it."


def _is_score(score, option: str, where: str, strict: bool) -> bool:
    """Whether `score` is a validation score: a mean in [0, 1] that is the mean of its per-split
    values. Where not, a `ConfigError` if `strict`, else False."""
    val = score.get("val") if isinstance(score, dict) else None
    mean = val.get("mean") if isinstance(val, dict) else None
    per_split = val.get("per_split") if isinstance(val, dict) else None
    ok = _in_unit(mean) and isinstance(per_split, list) and all(map(_in_unit, per_split))
    if ok and per_split and not math.isclose(mean, sum(per_split) / len(per_split), abs_tol=1e-9):
        ok = False  # a hand-edited mean: not what its splits say
    if not ok and strict:
        raise ConfigError(f"{where}: the score of {option} is not a validation score (a mean in "
                          f"[0, 1] of its per-split values); {FIX}")  # fmt: skip
    return ok


def _in_unit(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and 0.0 <= x <= 1.0


def _say(where: str, said: list, options, why: str) -> None:
    said.append(f"warning: {where}: the score of {', '.join(options)} {why}: not a candidate "
                f"(a changed entry needs --overwrite, which drops it).")  # fmt: skip


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
