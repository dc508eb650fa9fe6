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


# Written into every figure the studies draw (PNG metadata), with what drew it: a file at a
# figure's path without its mark is a user's, or another command's, which drawing the figure
# would replace.
FIGURE_MARK = "drawn by policy-gnn-jax: "


def is_our_figure(path, mark: str) -> bool:
    """Whether the file at `path` is the figure `mark` names (`figures.save_figure`): a PNG
    whose "Software" text is the mark."""
    with open(path, "rb") as f:
        return _png_texts(f.read()).get(b"Software") == f"{FIGURE_MARK}{mark}".encode()


def _png_texts(data: bytes) -> dict:
    """A PNG's tEXt entries (keyword: text); none for anything that is not a PNG."""
    texts, at = {}, 8
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return texts
    while at + 8 <= len(data):  # chunks: length, type, data, CRC
        size, kind = int.from_bytes(data[at : at + 4], "big"), data[at + 4 : at + 8]
        if kind == b"tEXt":
            key, _, text = data[at + 8 : at + 8 + size].partition(b"\x00")
            texts[key] = text
        if kind == b"IEND":
            break
        at += 12 + size
    return texts


def _dict_of_dicts(value) -> bool:
    return isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())


def headroom_shape(backbones) -> Callable[[object], bool]:
    """reproduce.py headroom: {backbone: {dataset: analysis}}."""
    return lambda v: (
        _dict_of_dicts(v)
        and set(v) <= set(backbones)
        and all(_dict_of_dicts(e) for e in v.values())
    )


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
    """heterophily.py study: {"datasets": {name: entry}} (files written before also hold
    "seeds" and "max_depth")."""
    datasets = value.get("datasets", {}) if isinstance(value, dict) else None
    return (
        isinstance(value, dict)
        and set(value) <= {"datasets", "seeds", "max_depth"}
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
