"""The `policy-gnn` command line: the flags most runs need, in groups, `--set FIELD=VALUE` for every
`Config` field, and how the parsed flags become a `Config`."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import textwrap

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import data, methods
from policy_gnn_jax.runtime import seed_axis


def _sections_text() -> str:
    return "".join(
        textwrap.fill(
            f"{section}: {', '.join(names)}", 100, initial_indent="  ", subsequent_indent="    "
        )
        + "\n"
        for section, names in _sections().items()
    )


def _sections() -> dict[str, tuple[str, ...]]:
    """`Config`'s fields by section, then each method's own config's fields under its name."""
    sections = dict(config_lib.SECTIONS)
    for name in methods.names():
        config_type = methods.get(name).config_type
        sections[f"{name} ({config_type.__name__})"] = _own_fields(config_type)
    return {section: names for section, names in sections.items() if names}


def _own_fields(config_type) -> tuple[str, ...]:
    """The fields a method's config type adds to `Config`."""
    shared = {f.name for f in dataclasses.fields(config_lib.Config)}
    return tuple(f.name for f in dataclasses.fields(config_type) if f.name not in shared)


def build_parser() -> argparse.ArgumentParser:
    """The command line: the flags most runs need, in groups, `--set` for every Config field, and
    hidden flags that set one field each (`--q-lr`, `--hidden`, ...), as `--set` does."""
    p = argparse.ArgumentParser(
        prog="policy-gnn",
        usage="%(prog)s [--dataset NAME] [--method NAME] [--set FIELD=VALUE ...] [options]",
        description="Train Policy-GNN, the random policy or a fixed-depth GCN over many seeds; "
        "write <out>/results.json and the fitted snapshots. Bad input: one `error:` line, exit 2.",
        epilog=EPILOG.format(sections=_sections_text()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run = p.add_argument_group("what to run")
    run.add_argument(
        "--dataset", default="cora", metavar="NAME", help=", ".join(data.DATASET_NAMES)
    )
    run.add_argument(
        "--method",
        default="policy-gnn",
        choices=methods.choices(),
        metavar="NAME",
        help=f"{', '.join(methods.names())} (gcn: one fixed depth; alias fixed-depth)",
    )
    run.add_argument(
        "--backbone",
        default=None,
        choices=config_lib.BACKBONES,
        help="gcn: the paper's shared GCN; decoupled: an MLP, then propagation (depths 0..K); "
        "gcn-readout: the legacy readout GCN",
    )
    run.add_argument("--seeds", type=int, default=10, help="how many seeds (10)")
    run.add_argument("--seed", type=int, default=0, help=f"base seed, 0..{seed_axis.MAX_SEED}")
    run.add_argument(
        "--split", type=int, default=None, help="which fixed split of a heterophilous benchmark (0)"
    )
    run.add_argument(
        "--splits",
        default=None,
        metavar="all|A-B|A,B",
        help="run several fixed splits (each saved in <out>/split-K) and report mean ± std over "
        "them",
    )
    run.add_argument(  # shown in the epilog: the groups keep to twenty flags
        "--split-map",
        default="map",
        choices=("map", "vmap", "apart"),
        action=_StoreGiven,
        help=argparse.SUPPRESS,
    )
    length = p.add_argument_group("depths and length")
    length.add_argument("--depths", default=None, help="depths a policy picks from (2-5)")
    length.add_argument("--depth", type=int, default=None, help="gcn: the fixed depth (2)")
    length.add_argument("--episodes", type=int, default=None, help="MDP episodes (1000)")
    length.add_argument("--epochs", type=int, default=None, help="gcn: training epochs (200)")
    where = p.add_argument_group("how it runs")
    where.add_argument(
        "--engine",
        default=None,
        choices=config_lib.ENGINES,
        help="MDP step on the whole graph, on padded neighbourhoods, or on neighbourhoods with "
        f"the graph left in host memory (auto: subgraph above {config_lib.AUTO_SUBGRAPH_NODES})",
    )
    where.add_argument(
        "--seed-mode",
        default=None,
        choices=seed_axis.SEED_MODES,
        help="seeds batched, or one after another (bit-identical on any seed or device count; "
        "the cheaper MDP step on a CPU) (default: map on a CPU, vmap on an accelerator)",
    )
    where.add_argument("--devices", type=int, default=None, help="use at most N devices (all)")
    _add_output_flags(p)
    _add_hidden_flags(p)
    return p


EPILOG = """\
Config fields by section (--show-config prints their values; docs/usage.md explains each):
{sections}
Generated graphs: --csbm-nodes, --csbm-homophily, --csbm-seed, --csbm-features, --csbm-degree.
Offline: --no-download never downloads a missing file.
Splits: --split-map map (default: --splits as one program, each split bit-identical to a run of
  its own), vmap (the splits batched, for accelerators) or apart (each compiled on its own).
Checkpoints: every --checkpoint-every N (5) chunks of --set episodes_per_call (10) episodes.
Several processes: --coordinator HOST:PORT --num-processes N --process-id I (docs/scale.md).
"""


def _add_output_flags(p: argparse.ArgumentParser) -> None:
    """Data, output, and the generic override groups."""
    io = p.add_argument_group("data and output")
    io.add_argument("--data-dir", default=None, help=f"raw files (else ${data.DATA_ENV})")
    io.add_argument("--no-download", action="store_true", help=argparse.SUPPRESS)
    io.add_argument("--out", default=None, help="output folder (a new one under results/)")
    io.add_argument(
        "--overwrite", action="store_true", help="replace the result files already in --out"
    )
    io.add_argument(
        "--checkpoint-dir", default=None, help="checkpoint there; the same command resumes"
    )
    io.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    io.add_argument(
        "--audit",
        action="store_true",
        help="also report the released code's test metric (never a headline)",
    )
    config = p.add_argument_group("any other setting")
    config.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="set a Config field, e.g. --set q_lr=1e-3 --set fanouts=10,10,5 (repeatable)",
    )
    config.add_argument(
        "--show-config", action="store_true", help="print the resolved config by section, exit"
    )


# The generated graphs' flags and their defaults (csbm reads all; planted its seed).
GENERATOR_DEFAULTS = {
    "csbm_nodes": 3000,
    "csbm_homophily": 0.8,
    "csbm_seed": 0,
    "csbm_features": 32,
    "csbm_degree": 5.0,
}
CHECKPOINT_EVERY = 5

# The hidden flags that set one Config field each (the field is the flag's name with "_").
_FIELD_FLAGS = {
    "steps-per-episode": dict(type=int),
    "buffer-size": dict(type=int),
    "gcn-lr": dict(type=float),
    "q-lr": dict(type=float),
    "hidden": dict(type=int),
    "dropout": dict(type=float),
    "input-dropout": dict(type=float),
    "weight-decay": dict(type=float),
    "teleport": dict(type=float),
    "subgraph-nodes": dict(type=int),
    "subgraph-edges": dict(type=int),
    "episodes-per-call": dict(type=int),
    "transition": dict(choices=config_lib.TRANSITIONS),
    "fanouts": dict(),
    # Policy-GNN+'s (its PlusConfig checks the values); other methods do not read them.
    "plus-train-depths": dict(),
    "plus-signals": dict(),
    "plus-reward": dict(),
}


class _StoreGiven(argparse.Action):
    """`store`, and the flag's field noted in `args.given`: a flag given at its default value
    is still given, and is warned about where it is not used."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given = frozenset(getattr(namespace, "given", frozenset()) | {self.dest})


def was_given(args, field: str) -> bool:
    return field in getattr(args, "given", frozenset())


def _add_hidden_flags(p: argparse.ArgumentParser) -> None:
    """Flags kept working but not shown: one Config field each (`--set` does the same), the
    generated graphs' parameters and the checkpoint period."""
    hidden = argparse.SUPPRESS
    for flag, options in _FIELD_FLAGS.items():
        p.add_argument(f"--{flag}", default=None, help=hidden, **options)
    p.set_defaults(given=frozenset())
    for field, default in GENERATOR_DEFAULTS.items():
        p.add_argument("--" + field.replace("_", "-"), type=type(default), default=default,
                       action=_StoreGiven, help=hidden)  # fmt: skip
    p.add_argument("--checkpoint-every", type=int, default=CHECKPOINT_EVERY, action=_StoreGiven,
                   help=hidden)  # fmt: skip
    # Several processes (docs/scale.md): all three, or none under a cluster launcher.
    p.add_argument("--coordinator", default=None, metavar="HOST:PORT", help=hidden)
    p.add_argument("--num-processes", type=int, default=None, help=hidden)
    p.add_argument("--process-id", type=int, default=None, help=hidden)


def config_from_args(args) -> config_lib.Config:
    """The backbone's preset (`Config.paper`, or `Config.decoupled`), then every flag given,
    then every `--set FIELD=VALUE` (last, so it wins; `flag_fields` names each it replaced)."""
    entry = methods.get(args.method)
    ignored = unread_fields(entry)  # warned about, and neither parsed nor applied
    overrides = config_lib.parse_overrides(own_items(args.set, ignored), entry.config_type)
    # --set backbone= picks the preset too
    backbone = overrides.get("backbone", args.backbone or config_lib.Config.backbone)
    if backbone == "decoupled":  # with the regularisation tuned for this dataset, if any
        preset = functools.partial(entry.config_type.decoupled, dataset=args.dataset)
    else:
        preset = entry.config_type
    values = dict(backbone=backbone)
    values.update({field: value for _, field, value in flag_fields(args) if field not in ignored})
    values.update(overrides)
    return preset(**values)


def own_items(items: list[str] | None, unread: frozenset[str]) -> list[str]:
    """The `--set` items of fields the method reads: the others (`unread_fields`) are left out,
    unparsed, and warned about, as a flag the method does not read is."""
    return [item for item in items or [] if item.partition("=")[0].strip() not in unread]


def unread_fields(entry: methods.Method) -> frozenset[str]:
    """The fields a method never reads: its `ignores`, and the fields of other methods' own
    configs that its config lacks."""
    known = {f.name for f in dataclasses.fields(entry.config_type)}
    others = {f for name in methods.names() for f in _own_fields(methods.get(name).config_type)}
    return entry.ignores | (others - known)


def flag_fields(args) -> list[tuple[str, str, object]]:
    """Every Config field a flag on this command line set: (flag, field, value), shown ones
    first. A flag left at its default is not listed."""
    given = []
    if args.backbone is not None:
        given.append(("--backbone", "backbone", args.backbone))
    if args.episodes is not None:
        given.append(("--episodes", "num_episodes", args.episodes))
    if args.depths is not None:
        low, high = config_lib.parse_depths(args.depths)
        given += [("--depths", "min_depth", low), ("--depths", "max_depth", high)]
    if args.engine is not None:
        given.append(("--engine", "engine", args.engine))
    if args.audit:
        given.append(("--audit", "audit", True))
    for flag in ("depth", "epochs", *_FIELD_FLAGS):
        value = getattr(args, flag.replace("-", "_"))
        if value is not None:
            field = flag.replace("-", "_")
            value = parse_fanouts(value) if field == "fanouts" else value
            given.append((f"--{flag}", field, value))
    return given


def show_config(config: config_lib.Config) -> str:
    """The config's values by section, one `field = value` a line."""
    lines = []
    for section, names in config_lib.SECTIONS.items():
        lines.append(f"[{section}]")
        lines += [f"  {name} = {getattr(config, name)!r}" for name in names]
    own = _own_fields(type(config))
    if own:
        lines.append(f"[{type(config).__name__}]")
        lines += [f"  {name} = {getattr(config, name)!r}" for name in own]
    return "\n".join(lines)


def parse_fanouts(text: str) -> tuple[int, ...]:
    """ "10,10,5" -> (10, 10, 5); anything else is a ConfigError."""
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise config_lib.ConfigError(
            f"--fanouts must be whole numbers separated by commas, e.g. 10,10,5; got {text!r}."
        ) from None
