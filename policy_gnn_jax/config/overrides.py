"""Config values from text: `--set FIELD=VALUE` and `--depths A-B`."""

from __future__ import annotations

import dataclasses
import difflib
import re

from policy_gnn_jax.config.checks import WANTED, ConfigError


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(text)


def _parse_ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


# A field's annotation (a string: `from __future__ import annotations`) -> parser, and how to
# say what it wants.
_PARSERS = {
    "int": int,
    "float": float,
    "str": str,
    "bool": _parse_bool,
    "tuple[int, ...]": _parse_ints,
}


def parse_overrides(items: list[str], config_type=None) -> dict:
    """`["q_lr=1e-3", "fanouts=10,10,5"]` -> {"q_lr": 0.001, "fanouts": (10, 10, 5)}, each value
    parsed as its field's type in `config_type` (default `Config`). A malformed item, an unknown
    field or a value of the wrong kind is a ConfigError naming it; ranges are checked when the
    config is built."""
    from policy_gnn_jax.config import Config  # the package imports this module at its end

    types = {f.name: f.type for f in dataclasses.fields(config_type or Config)}
    values = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(f"--set takes FIELD=VALUE, e.g. --set q_lr=1e-3; got {item!r}.")
        if name not in types:
            close = difflib.get_close_matches(name, types, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(
                f"--set {item}: Config has no field {name!r}.{hint} "
                f"`policy-gnn --help` lists every field."
            )
        parse, wanted = _PARSERS[types[name]], WANTED[types[name]]
        try:
            value = parse(text.strip())
        except ValueError:
            raise ConfigError(f"--set {item}: {name} takes {wanted}, got {text!r}.") from None
        if name in values and values[name] != value:  # which one was meant cannot be told
            raise ConfigError(
                f"--set {name} is given twice, as {values[name]} and as {value}: give it once."
            )
        values[name] = value
    return values


def parse_depths(text: str) -> tuple[int, int]:
    """Parses "2-5" (or "3") into (min_depth, max_depth); anything else is a ConfigError."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not match:
        raise ConfigError(f"--depths must look like 2-5 or 3 (whole numbers), got {text!r}.")
    lo = int(match.group(1))
    return lo, int(match.group(2)) if match.group(2) else lo
