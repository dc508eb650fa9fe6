"""The `policy-gnn` command (also `python experiments/run.py`): train over many seeds in one go.

policy-gnn --dataset cora                          # Policy-GNN, paper defaults, 10 seeds
policy-gnn --dataset cora --method gcn --depth 2
policy-gnn --dataset csbm --method random --episodes 50
policy-gnn --dataset cora --checkpoint-dir ckpt    # resumable: run the same command again

Writes <out>/results.json and the fitted snapshots (policy_gnn_jax.load(<out>) reads them back).
Bad input of any kind ends with one line `error: ...` and exit status 2.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import functools
import pathlib
import sys

from policy_gnn_jax import api, data, methods
from policy_gnn_jax import config as config_lib
from policy_gnn_jax.runtime import checkpoint, runner

# Everything that is the user's input going wrong (all exit 2 with one `error:` line).
INPUT_ERRORS = (data.DataError, ValueError, FloatingPointError)


def require_at_least_one(**counts: int) -> None:
    """Each named command-line count must be >= 1: `--seeds 0` is an error naming `--seeds`."""
    for name, value in counts.items():
        if value < 1:
            raise config_lib.ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {value}.")


def exit_status(command, *args) -> int:
    """Runs `command(*args)` for a script's `main`: 0, or 2 after one `error:` line when the
    input is bad (the policy-gnn command's convention)."""
    try:
        command(*args)
    except INPUT_ERRORS as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


def tune_malloc() -> None:
    """glibc returns XLA's large scratch buffers to the OS after every call, which doubled the
    time of large programs here (PERFORMANCE-NOTES.md): raise both thresholds before JAX
    allocates anything."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 30)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    except OSError:  # not glibc: nothing to tune
        pass


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="policy-gnn", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--dataset", default="cora", help=f"one of {data.DATASET_NAMES}")
    p.add_argument("--method", default="policy-gnn", choices=methods.choices())
    p.add_argument("--seeds", type=int, default=10, help="number of seeds, run as one vmap")
    p.add_argument("--seed", type=int, default=0, help=f"base seed, 0..{runner.MAX_SEED}")
    p.add_argument(
        "--devices",
        type=int,
        default=None,
        help="split the seeds over at most this many local devices (default: all)",
    )
    p.add_argument(
        "--seed-mode",
        default="vmap",
        choices=runner.SEED_MODES,
        help="vmap: seeds batched; map: one after another, so a seed's result is bit-identical "
        "on any number of seeds and devices",
    )
    p.add_argument(
        "--backbone",
        default="gcn",
        choices=config_lib.BACKBONES,
        help="gcn: the paper's shared GCN; gcn-readout: the structure used until 2026-11; "
        "decoupled: an MLP, then parameter-free propagation (depths 0..K)",
    )
    p.add_argument(
        "--depth", type=int, default=None, help="gcn: the fixed depth (default 2; decoupled 10)"
    )
    p.add_argument("--epochs", type=int, default=None, help="gcn: training epochs (default 200)")
    p.add_argument(
        "--depths",
        default=None,
        help="policy methods: allowed depths, e.g. 2-5, 1-5 (default 2-5; decoupled 0-16)",
    )
    p.add_argument("--episodes", type=int, default=1000)
    p.add_argument("--steps-per-episode", type=int, default=10)
    p.add_argument("--transition", default="labelled", choices=config_lib.TRANSITIONS)
    p.add_argument("--buffer-size", type=int, default=128)
    p.add_argument("--gcn-lr", type=float, default=None, help="the backbone's Adam rate (0.01)")
    p.add_argument("--hidden", type=int, default=None, help="backbone width (16; decoupled 64)")
    p.add_argument("--dropout", type=float, default=None, help="hidden dropout (0.5)")
    p.add_argument("--input-dropout", type=float, default=None, help="feature dropout (0.5)")
    p.add_argument(
        "--weight-decay",
        type=float,
        default=None,
        help="L2 on the first layer (5e-4; decoupled 5e-3)",
    )
    p.add_argument(
        "--teleport", type=float, default=None, help="decoupled: PageRank teleport alpha (0.1)"
    )
    p.add_argument(
        "--plus-train-depths",
        default=None,
        choices=config_lib.PLUS_TRAIN_DEPTHS,
        help="policy-gnn-plus: the depths the backbone trains at (random)",
    )
    p.add_argument(
        "--plus-signals",
        default=None,
        choices=config_lib.PLUS_SIGNALS,
        help="policy-gnn-plus: the bandit's state (depth)",
    )
    p.add_argument(
        "--plus-reward",
        default=None,
        choices=config_lib.PLUS_REWARDS,
        help="policy-gnn-plus: the per-node reward (correct)",
    )
    p.add_argument(
        "--engine",
        default="auto",
        choices=config_lib.ENGINES,
        help="policy methods: each MDP step on the whole graph (full) or on padded "
        f"neighbourhoods (subgraph); auto: subgraph above {config_lib.AUTO_SUBGRAPH_NODES} nodes",
    )
    p.add_argument(
        "--subgraph-nodes", type=int, default=None, help="subgraph engine: node budget (16384)"
    )
    p.add_argument(
        "--subgraph-edges", type=int, default=None, help="subgraph engine: edge budget (131072)"
    )
    p.add_argument(
        "--fanouts",
        default=None,
        help="subgraph engine: neighbours kept per node at hops 1, 2, ... when over a budget, "
        "e.g. 10,10,5 (the last repeats; 0 = all)",
    )
    p.add_argument("--q-lr", type=float, default=5e-4)
    p.add_argument(
        "--data-dir",
        default=None,
        help=f"folder with the raw ind.* files (else ${data.DATA_ENV}, else the cache)",
    )
    p.add_argument("--no-download", action="store_true", help="never download missing files")
    p.add_argument("--csbm-nodes", type=int, default=3000, help="csbm: number of nodes")
    p.add_argument("--csbm-homophily", type=float, default=0.8, help="csbm: homophily")
    p.add_argument("--csbm-seed", type=int, default=0, help="csbm / planted: graph seed")
    p.add_argument("--csbm-features", type=int, default=32, help="csbm: feature width")
    p.add_argument("--csbm-degree", type=float, default=5.0, help="csbm: average degree")
    p.add_argument("--out", default=None, help="output folder (default: a new one under results/)")
    p.add_argument(
        "--checkpoint-dir",
        default=None,
        help="save the whole state there every few chunks; the same command resumes from it",
    )
    p.add_argument("--checkpoint-every", type=int, default=5, help="chunks between checkpoints")
    p.add_argument(
        "--episodes-per-call",
        type=int,
        default=10,
        help="episodes per compiled call (a chunk: the progress and checkpoint granularity)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument(
        "--audit",
        action="store_true",
        help="also report the released code's macro / best-of-run test metric "
        "(ALGORITHM.md section 6; never the headline)",
    )
    return p


def config_from_args(args) -> config_lib.Config:
    """The backbone's preset (`Config.paper`, or `Config.decoupled`), then every flag given."""
    if args.backbone == "decoupled":  # with the regularisation tuned for this dataset, if any
        preset = functools.partial(config_lib.Config.decoupled, dataset=args.dataset)
    else:
        preset = config_lib.Config
    values = dict(
        backbone=args.backbone,
        num_episodes=args.episodes,
        steps_per_episode=args.steps_per_episode,
        transition=args.transition,
        buffer_size=args.buffer_size,
        q_lr=args.q_lr,
        audit=args.audit,
        episodes_per_call=args.episodes_per_call,
        engine=args.engine,
    )
    if args.depths is not None:
        values["min_depth"], values["max_depth"] = config_lib.parse_depths(args.depths)
    optional = dict(
        depth=args.depth,
        epochs=args.epochs,
        gcn_lr=args.gcn_lr,
        hidden=args.hidden,
        dropout=args.dropout,
        input_dropout=args.input_dropout,
        weight_decay=args.weight_decay,
        teleport=args.teleport,
        plus_train_depths=args.plus_train_depths,
        plus_signals=args.plus_signals,
        plus_reward=args.plus_reward,
        subgraph_nodes=args.subgraph_nodes,
        subgraph_edges=args.subgraph_edges,
        fanouts=None if args.fanouts is None else parse_fanouts(args.fanouts),
    )
    values.update({k: v for k, v in optional.items() if v is not None})
    return preset(**values)


def parse_fanouts(text: str) -> tuple[int, ...]:
    """ "10,10,5" -> (10, 10, 5); anything else is a ConfigError."""
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise config_lib.ConfigError(
            f"--fanouts must be whole numbers separated by commas, e.g. 10,10,5; got {text!r}."
        ) from None


def _check_args(args) -> None:
    """Everything that can be refused before loading data or training."""
    if not 0 <= args.seed <= runner.MAX_SEED:
        raise runner.ResourceError(f"--seed must be in 0..{runner.MAX_SEED}, got {args.seed}.")
    if args.seeds < 1:
        raise runner.ResourceError(f"--seeds must be >= 1, got {args.seeds}.")
    if args.checkpoint_every < 1:
        raise config_lib.ConfigError(
            f"--checkpoint-every must be >= 1, got {args.checkpoint_every}."
        )
    data.check_name(args.dataset)


def main(argv=None) -> int:
    tune_malloc()
    args = build_parser().parse_args(argv)
    out = None
    try:
        _check_args(args)
        config = config_from_args(args)
        out = pathlib.Path(args.out or _default_out(args, config))
        made_out = not out.exists()
        checkpoint.check_writable_dir(out)
        ds = data.load_dataset(
            args.dataset,
            data_dir=args.data_dir,
            download=not args.no_download,
            **_generator_args(args),
        )
        print(ds.summary(), flush=True)
        fitted = api.fit(
            ds,
            config,
            method=args.method,
            seeds=args.seeds,
            seed=args.seed,
            progress=not args.no_progress,
            checkpoint_dir=args.checkpoint_dir,
            checkpoint_every=args.checkpoint_every,
            devices=args.devices,
            seed_mode=args.seed_mode,
        )
        fitted.save(out)
    except INPUT_ERRORS as err:
        if out is not None and made_out:
            _remove_if_empty(out)  # a failed run leaves no empty timestamped folder behind
        print(f"error: {err}", file=sys.stderr)
        return 2
    record = fitted.record
    print(f"results: {out / 'results.json'}")
    if "audit" in record:
        a = record["audit"]
        print(
            f"audit (reference protocol, NOT a headline): macro accuracy best-of-run "
            f"{a['macro_accuracy_best_of_run']['mean']:.4f} ± "
            f"{a['macro_accuracy_best_of_run']['std']:.4f}; macro accuracy of the selected "
            f"snapshot {a['macro_accuracy_of_selected_snapshot']['mean']:.4f}\n{a['explanation']}"
        )
    print(methods.summary_line(record))
    return 0


def _generator_args(args) -> dict:
    if args.dataset.lower() == "csbm":
        return {
            "num_nodes": args.csbm_nodes,
            "homophily": args.csbm_homophily,
            "seed": args.csbm_seed,
            "num_features": args.csbm_features,
            "avg_degree": args.csbm_degree,
        }
    if args.dataset.lower() == "planted":
        return {"seed": args.csbm_seed}
    return {}


def _remove_if_empty(folder: pathlib.Path) -> None:
    try:
        folder.rmdir()  # refuses (OSError) when anything was written there
    except OSError:
        pass


def _default_out(args, config) -> pathlib.Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    tag = methods.get(args.method).describe(config).replace(" depth ", "-d")
    if args.backbone != "gcn":
        tag = f"{args.backbone}-{tag}"
    return pathlib.Path("results") / f"{args.dataset.lower()}-{tag}-{stamp}"


if __name__ == "__main__":
    sys.exit(main())
