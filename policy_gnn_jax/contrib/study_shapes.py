"""The shapes of the JSON files the studies merge into (`runtime.study_files`): a file of
another shape is not merged into."""

from __future__ import annotations

from collections.abc import Callable

# What each file is, as its refusal names it.
HEADROOM_FILE = "a headroom file of reproduce.py headroom ({backbone: {dataset: analysis}})"
ADAPTIVE_DEPTH_FILE = 'a results file of adaptive_depth.py results ({"records": [...], ...})'
ABLATION_FILE = 'an ablation file of adaptive_depth.py ablate ({"dataset/backbone": ...})'
HETEROPHILY_FILE = 'a results file of heterophily.py study ({"datasets": {...}})'
OPTIONS_FILE = 'an options file of heterophily.py options ({dataset: {"chosen_by_val": ...}})'


def _dict_of_dicts(value) -> bool:
    return isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())


def headroom_shape(backbones) -> Callable[[object], bool]:
    """reproduce.py headroom: {backbone: {dataset: analysis}}, its rows in accuracy."""
    return lambda v: (
        _dict_of_dicts(v)
        and set(v) <= set(backbones)
        and all(_dict_of_dicts(e) and all(map(_is_analysis, e.values())) for e in v.values())
    )


def _is_analysis(analysis: dict) -> bool:
    best = analysis.get("best_fixed_depth_by_val")
    return isinstance(best, dict) and "test_accuracy" in best and "val_accuracy" in best


def adaptive_depth_shape(value) -> bool:
    """adaptive_depth.py results: {"records": [...], "missing": [...], "plus_switches": ...}."""
    return (
        isinstance(value, dict)
        and set(value) <= {"records", "missing", "plus_switches"}
        and isinstance(value.get("records", []), list)
        and all(isinstance(r, dict) for r in value.get("records", []))
        and isinstance(value.get("missing", []), list)
    )


def ablation_shape(value) -> bool:
    """adaptive_depth.py ablate: {"<dataset>/<backbone>": {"rows", "chosen_by_val", ...}}."""
    return _dict_of_dicts(value) and all(
        isinstance(k, str) and "/" in k and "chosen_by_val" in e for k, e in value.items()
    )


def heterophily_shape(value) -> bool:
    """heterophily.py study: {"datasets": {name: entry}}."""
    datasets = value.get("datasets", {}) if isinstance(value, dict) else None
    return (
        isinstance(value, dict)
        and set(value) <= {"datasets"}
        and _dict_of_dicts(datasets)
        and all(_is_heterophily_entry(e) for e in datasets.values())
    )


def _is_heterophily_entry(entry: dict) -> bool:
    """What the table is drawn from: the metric, the backbone, and rows of dicts."""
    return (
        isinstance(entry.get("metric"), str)
        and isinstance(entry.get("backbone_options"), str)
        and _dict_of_dicts(entry.get("rows"))
    )


def options_shape(choices) -> Callable[[object], bool]:
    """heterophily.py options: {dataset: {"chosen_by_val": one of `choices`, ...}}."""
    return lambda v: _dict_of_dicts(v) and all(e.get("chosen_by_val") in choices
                                               for e in v.values())  # fmt: skip
