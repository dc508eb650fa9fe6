"""Regenerate the paper's Table 3 (with the audit), the ablations, Figures 1, 3 and 4, the
planted-depth benchmark and the headroom analysis.

  python experiments/reproduce.py table    # runs what is missing, writes table3.md / table3.json
  python experiments/reproduce.py ablations --datasets cora citeseer
  python experiments/reproduce.py figures  # fig3_depths.png, fig4_val_curves.png from those runs
  python experiments/reproduce.py fig1 --dataset cora --seeds 100
  python experiments/reproduce.py planted --seeds 5 --episodes 200
  python experiments/reproduce.py headroom --datasets cora citeseer

Every run is one seed sweep (`--seed-mode`: batched or one seed after another) saved as
<out>/<dataset>/<run>/results.json; a run whose saved config, seed count and seed mode match is
reused, so an interrupted command resumes. Model selection
is by validation only: the "best fixed depth" row picks the depth with the best mean validation
accuracy, never by test accuracy.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import data
from policy_gnn_jax.cli import exit_status, finish
from policy_gnn_jax.contrib.reproduction import analyses, figures, runs, tables
from policy_gnn_jax.contrib.study_shapes import HEADROOM_FILE, headroom_shape
from policy_gnn_jax.runtime import locks, outputs, seed_axis, study_files


def check_args(args) -> None:
    """Refuses bad input before any run: unknown dataset names (a typo is an error, never a
    "skipped" dataset), a --data-dir that does not exist, an output folder (or a headroom JSON) that
    cannot be written, out-of-range seeds."""
    for name in [*args.datasets, args.dataset]:
        data.check_name(name)
    twice = [
        n for i, n in enumerate(args.datasets) if n.lower() in map(str.lower, args.datasets[:i])
    ]
    if twice:  # it would be run and tabulated twice
        raise config_lib.ConfigError(f"--datasets: {twice[0]} is named twice; name it once.")
    folders = [runs.dataset_folder_name(n) for n in args.datasets]
    shared = [n for i, n in enumerate(args.datasets) if folders[i] in folders[:i]]
    if shared:  # one's runs would be taken for the other's
        raise config_lib.ConfigError(
            f"--datasets: {shared[0]} would share its run folder with another dataset of the "
            f"name {runs.dataset_folder_name(shared[0])}: give each file its own name."
        )
    if args.data_dir is not None and not pathlib.Path(args.data_dir).is_dir():
        raise data.DataError(f"--data-dir {args.data_dir} does not exist or is not a folder.")
    if args.seeds < 1:
        raise config_lib.ConfigError(f"--seeds must be >= 1, got {args.seeds}.")
    outputs.check_writable_dir(args.out)
    if args.what == "headroom":
        out = pathlib.Path(args.out)
        own = {outputs.real_path(out / n) for n in ("headroom.json", "headroom.md")}
        if outputs.real_path(args.headroom_json) in own:  # written with this run's only
            raise outputs.CheckpointError(
                f"--headroom-json {args.headroom_json} is this run's own "
                f"{pathlib.Path(args.headroom_json).name} in --out "
                f"{args.out}, which holds this run's analyses only: name another file for the "
                f"merged one, e.g. docs/results/headroom.json."
            )
        outputs.check_writable_file(args.headroom_json)
        study_files.check(args.headroom_json, HEADROOM_FILE, headroom_shape(config_lib.BACKBONES))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("what", choices=["table", "ablations", "figures", "fig1", "planted", "headroom"])
    p.add_argument("--dataset", default=DEFAULTS["--dataset"], help="fig1: the dataset")
    p.add_argument(
        "--datasets",
        nargs="+",
        default=DEFAULTS["--datasets"],
        help="default: cora citeseer pubmed",
    )
    p.add_argument("--seeds", type=int, default=10, help="seeds per run (default: 10)")
    p.add_argument("--episodes", type=int, default=None, help="default: the preset's (1000)")
    p.add_argument(
        "--preset", choices=["paper", "tiny"], default="paper", help="tiny: a smoke run only"
    )
    p.add_argument(
        "--no-audit",
        dest="audit",
        action="store_false",
        help="skip the released-code metric (docs/algorithm.md section 6) in policy runs",
    )
    p.add_argument(
        "--backbone",
        default="gcn",
        choices=config_lib.BACKBONES,
        help="gcn: the paper's shared GCN; gcn-readout: the legacy readout structure (hidden "
        "propagations, then a linear readout: the tables published first); decoupled: MLP then "
        "propagation",
    )
    p.add_argument(
        "--seed-mode",
        default=None,
        choices=seed_axis.SEED_MODES,
        help="vmap: seeds batched; map: one after another (other bits) (default: map on a CPU, "
        "where it is the faster, vmap on an accelerator). A saved run is reused only in the "
        "mode it was made in",
    )
    p.add_argument("--data-dir", default=None)
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a saved run under --out that differs from this command's (else refused)",
    )
    p.add_argument(
        "--headroom-json",
        default="docs/results/headroom.json",
        help="headroom: the file its numbers are merged into, under the backbone's name",
    )
    p.add_argument(
        "--out", default=None, help="default results/reproduce (gcn), else results/reproduce-NAME"
    )
    args = p.parse_args(argv)
    if args.out is None:
        suffix = "" if args.backbone == "gcn" else f"-{args.backbone}"
        args.out = f"results/reproduce{suffix}"
    return exit_status(run, args)


def run(args) -> None:
    """Refuses bad input before any sweep, then runs the command."""
    check_args(args)
    _warn_unread_dataset_flags(args)
    args.seed_mode = seed_axis.seed_mode_for(args.seed_mode)
    with locks.FolderLock(args.out, "output folder"):  # one command at a time per --out
        COMMANDS[args.what](args)


COMMANDS = {
    "table": tables.table,
    "ablations": tables.ablations,
    "figures": figures.figures,
    "fig1": figures.fig1,
    "planted": analyses.planted,
    "headroom": analyses.headroom,
}
# Which dataset flag each command reads (figures draws the runs under --out; planted its own).
READS = {"table": "--datasets", "ablations": "--datasets", "headroom": "--datasets",
         "fig1": "--dataset"}  # fmt: skip
DEFAULTS = {"--dataset": "cora", "--datasets": ["cora", "citeseer", "pubmed"]}


def _warn_unread_dataset_flags(args) -> None:
    """A dataset flag the command does not read is said, never silently dropped; so are the
    run flags of `figures`, which draws the runs already under --out."""
    given = {"--dataset": args.dataset, "--datasets": args.datasets}
    for flag, value in given.items():
        if value != DEFAULTS[flag] and READS.get(args.what) != flag:
            reads = READS.get(args.what)
            instead = f" (it reads {reads})" if reads else ""
            print(f"warning: {flag} is not used by {args.what}{instead}.", file=sys.stderr)
    runs = {"--seeds": args.seeds != 10, "--episodes": args.episodes is not None,
            "--seed-mode": args.seed_mode is not None}  # fmt: skip
    for flag in (f for f, said in runs.items() if said and args.what == "figures"):
        print(f"warning: {flag} is not used by figures (it draws the runs under --out).",
              file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    finish(main())
