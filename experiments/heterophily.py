"""The heterophily study (docs/heterophily.md): does a per-node depth, depth 0 included, pay on
graphs whose neighbours mostly belong to other classes?

  python experiments/heterophily.py options --datasets texas wisconsin --seeds 3
  python experiments/heterophily.py study --datasets texas wisconsin cornell --seeds 5

Every number is over the benchmark's ten fixed splits (mean ± std over splits of each split's
mean over seeds). `options` picks, per dataset, the decoupled backbone's heterophily options
(`ego_head`, `layer_norm`, the residual's weight: `backbone_options`) by the mean VALIDATION
score of the best fixed depth (itself chosen on validation per split), among the combinations
it runs and those the file scored the same way before, and writes
docs/results/heterophily_options.json. `study` runs, per
dataset and split, on the chosen backbone: every fixed depth 0..K, the headroom analysis (upper
bounds that read test labels, labelled as such; label-free rules; the probe, with label-free
estimates of local homophily), Policy-GNN with depth 0 allowed, the random policy and
Policy-GNN+, and writes docs/results/heterophily.{json,md} and a figure of the depths Policy-GNN
chose against degree and estimated local homophily. Test labels are read only by each run's
final evaluation and the upper bounds; nothing is chosen by them. Runs are cached under --out and
reused while their config, seeds and data match, so a stopped study resumes.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys

import numpy as np

import policy_gnn_jax as pg
from policy_gnn_jax import data, methods, split_sweep
from policy_gnn_jax.cli import exit_status, finish, require_at_least_one, use_every_core
from policy_gnn_jax.contrib.adaptive_depth import (
    backbone_options,
    fixed_runs,
    headroom,
    heterophily_table,
)
from policy_gnn_jax.contrib.adaptive_depth import (
    signals as signals_lib,
)
from policy_gnn_jax.contrib.adaptive_depth.backbone_options import OPTIONS, chosen_otherwise
from policy_gnn_jax.contrib.reproduction import figures
from policy_gnn_jax.contrib.study_shapes import (
    HETEROPHILY_FILE,
    OPTIONS_FILE,
    heterophily_shape,
    options_shape,
)
from policy_gnn_jax.runtime import locks, outputs, records, reuse, study_files

POLICIES = ("policy-gnn", "random", "policy-gnn-plus")
EPISODES = 1000  # the paper's budget of MDP episodes
STUDY_FILES = {"--results-json": "docs/results/heterophily.json",
               "--figure": "docs/figures/heterophily_depths.png"}  # fmt: skip


def base_config(max_depth: int, option: str) -> pg.Config:
    """The decoupled backbone over depths 0..max_depth with one of OPTIONS."""
    return pg.Config.decoupled(min_depth=0, max_depth=max_depth, **OPTIONS[option])


def fit_or_load(
    folder: pathlib.Path, ds, cfg, method: str, seeds: int, overwrite: bool = False
) -> pg.Fit:
    """A saved fit of exactly this run (data, config, method, seeds) from `folder`, else a new
    one, saved there. Another run's fit in `folder` is refused before training unless
    `overwrite` (--overwrite), never replaced silently."""
    prepared = methods.get(method).run_config(cfg)  # the config as the method runs it
    if reuse.reusable_record(folder, ds, prepared, method, seeds, 0, None, overwrite):
        return pg.load(folder)
    outputs.check_no_result(folder, overwrite, "--overwrite")
    fitted = pg.fit(ds, cfg, method=method, seeds=seeds, progress=False)
    fitted.save(folder, overwrite=overwrite)
    return fitted


def best_fixed(fixed: dict) -> int:
    """The index of the depth with the best mean validation score (ties: the shallowest)."""
    return int(fixed["val"].mean(1).argmax())


def choose_options(args) -> None:
    out, made = pathlib.Path(args.out), {}
    for name in args.datasets:
        made[name] = {}
        for option in args.options or list(OPTIONS):
            cfg = base_config(args.max_depth, option)
            folders = {k: out / name / option / f"split-{k}" for k in _splits(args, name)}
            fixed = fixed_runs.fixed_depths_of_splits(
                _load_splits(args, name), cfg, args.seeds, folders, args.split_map, args.overwrite
            )
            per_split = [f["val"][best_fixed(f)].mean() for f in fixed.values()]
            val = records.mean_std(per_split, per="per_split")
            made[name][option] = {"val": val, "options": OPTIONS[option],  # flags: the bits
                                  "xla_flags": records.xla_flags()}  # fmt: skip
            print(f"{name} {option}: the best fixed depth's val {val['mean']:.4f} ± "
                  f"{val['std']:.4f} over {len(per_split)} splits", flush=True)  # fmt: skip

    def entries(known: dict) -> dict:  # under the file's lock: the scores it holds now compete
        return {name: backbone_options.entry({**_kept_scores(args, name, known), **scores},
                                             args.seeds, args.max_depth, len(_splits(args, name)))
                for name, scores in made.items()}  # fmt: skip

    written = _merge_json(pathlib.Path(args.options_json), entries, args.overwrite)
    for name in args.datasets:
        print(f"{name}: chosen on validation: {written[name]['chosen_by_val']}", flush=True)


def _kept_scores(args, name: str, known: dict) -> dict:
    """The scores `known` (the options file) holds for `name` that compete without a rerun."""
    return backbone_options.kept_scores(
        known.get(name), rerun=args.options or OPTIONS, seeds=args.seeds,
        max_depth=args.max_depth, num_splits=len(_splits(args, name)),
    )  # fmt: skip


def study(args) -> None:
    out = pathlib.Path(args.out)
    chosen = _read_json(pathlib.Path(args.options_json))
    summary, depth_points = {}, {}
    for name in args.datasets:
        option = chosen.get(name, {}).get("chosen_by_val", "plain")
        if args.options is not None:  # the user's one choice, over the chosen one
            option = args.options[0]
        elif name not in chosen:
            print(f"warning: {args.options_json} holds no options chosen for {name}: it runs "
                  f"plain (run `options` first, or pass --options).", file=sys.stderr)  # fmt: skip
        else:
            _warn_if_chosen_otherwise(name, chosen.get(name), args)
        cfg = base_config(args.max_depth, option)
        datasets = _load_splits(args, name)
        folders = {k: out / name / option / f"split-{k}" for k in datasets}
        fixed = fixed_runs.fixed_depths_of_splits(
            datasets, cfg, args.seeds, folders, args.split_map, args.overwrite
        )
        _fit_policies_together(args, datasets, cfg, out / name / option)
        rows, points = {}, []
        for k, ds in datasets.items():
            for key, row in _split_rows(ds, cfg, fixed[k], args, folders[k], points).items():
                rows.setdefault(key, []).append(row)
            print(f"{name} split {k}: done", flush=True)
        summary[name] = heterophily_table.dataset_entry(
            option, ds.metric, args.seeds, args.max_depth, args.episodes, rows
        )
        depth_points[name] = np.concatenate(points) if points else np.zeros((0, 3))
    write_results(args, summary, depth_points)


def write_results(args, summary: dict, depth_points: dict) -> None:
    """Merges this run's datasets into --results-json; the table, the figure's points and the
    figure, which show every dataset the files hold, are written under the same lock."""
    results = pathlib.Path(args.results_json)

    def entries(merged: dict) -> dict:  # under the file's lock: rows of skipped policies kept
        known, said = merged.get("datasets", {}), []
        made = {name: heterophily_table.keep_skipped_rows(known.get(name), new, args.skip,
                                                          POLICIES, name, results, said)
                for name, new in summary.items()}  # fmt: skip
        if said:
            print("\n".join(said), file=sys.stderr)
        return made

    def side_files(merged: dict) -> None:
        heterophily_table.write(results.with_suffix(".md"), merged["datasets"], POLICIES)
        figure = pathlib.Path(args.figure)
        drawn = {n: p for n, p in depth_points.items()  # a kept Policy-GNN row keeps its points
                 if len(p) or "policy-gnn" not in merged["datasets"][n]["rows"]}  # fmt: skip
        figures.depths_by_structure(heterophily_table.merge_points(results, drawn), figure)

    _merge_json(results, entries, args.overwrite, extra={"datasets": summary}, then=side_files)


def _fit_policies_together(args, datasets: dict, cfg, folder: pathlib.Path) -> None:
    """Each policy's runs on the splits not saved yet, compiled as one program (`split_sweep`;
    --split-map) and saved where `fit_or_load` then finds them. Under "map" each equals the
    split's run of its own bit for bit, so it reuses and is reused like one."""
    splits = list(datasets)
    if args.split_map == "apart" or len(splits) < 2:
        return
    for method in (m for m in POLICIES if m not in args.skip):
        cfg_m = dataclasses.replace(cfg, num_episodes=args.episodes)
        prepared = methods.get(method).run_config(cfg_m)
        runs = {k: folder / f"split-{k}" / f"{method}-s{args.seeds}-e{args.episodes}"
                for k in splits}  # fmt: skip
        todo = [k for k in splits if reuse.reusable_record(
            runs[k], datasets[k], prepared, method, args.seeds, 0, None, args.overwrite
        ) is None]  # fmt: skip
        if len(todo) < 2 or not split_sweep.same_sizes([datasets[k] for k in todo]):
            continue  # each trained, and saved as it ends, in turn (`fit_or_load`)
        for k in todo:  # refused before training
            outputs.check_no_result(runs[k], args.overwrite, "--overwrite")
        fits = split_sweep.fit_splits([datasets[k] for k in todo], cfg_m, method=method,
                                      seeds=args.seeds, progress=False,
                                      split_map=args.split_map)  # fmt: skip
        for k, fitted in zip(todo, fits, strict=True):
            fitted.save(runs[k], overwrite=args.overwrite)
        print(f"{datasets[todo[0]].name} {method}: splits {todo} trained as one program",
              flush=True)  # fmt: skip


def _split_rows(ds, cfg, fixed, args, folder, points) -> dict:
    """One split's rows: name -> {"val": [S] or None, "test": [S]} in the dataset's metric
    (the headroom rows in accuracy: they are sums over nodes)."""
    best = best_fixed(fixed)
    rows = {"best fixed depth (val)": {"val": fixed["val"][best], "test": fixed["test"][best],
                                       "depth": int(fixed["depths"][best])}}  # fmt: skip
    analysis = headroom.analyse(ds, fixed["probs"], fixed["depths"], int(fixed["depths"].max()),
                                local_homophily=True)  # fmt: skip
    for key in ("rule_most_confident_depth", "rule_smoothness_depth", "probe_on_validation_nodes",
                "upper_bound_most_often_right_depth", "upper_bound_any_depth_right"):  # fmt: skip
        row = analysis[key]
        val = row.get("val_accuracy", {}).get("per_seed")
        rows[f"headroom: {key}"] = {"val": val, "test": row["test_accuracy"]["per_seed"]}
    rows["headroom: best fixed depth (accuracy)"] = {
        "val": analysis["best_fixed_depth_by_val"]["val_accuracy"]["per_seed"],
        "test": analysis["best_fixed_depth_by_val"]["test_accuracy"]["per_seed"],
    }
    signals = signals_lib.predicted_homophily(ds, fixed["probs"][0]).mean(0)  # [N]
    degree = np.bincount(ds.edges[1], minlength=ds.num_nodes)
    for method in POLICIES:
        if method in args.skip:
            continue
        cfg_m = dataclasses.replace(cfg, num_episodes=args.episodes)
        run = folder / f"{method}-s{args.seeds}-e{args.episodes}"
        fitted = fit_or_load(run, ds, cfg_m, method, args.seeds, args.overwrite)
        rec = fitted.record
        rows[method] = {"val": rec["val_metric"]["per_seed"],
                        "test": rec["test_metric"]["per_seed"]}  # fmt: skip
        if method == "policy-gnn":
            depths = fitted.predict_depths(ds.test_index)  # [S, T]
            test = ds.test_index
            points.append(np.stack([np.repeat(degree[test][None], len(depths), 0).ravel(),
                                    np.repeat(signals[test][None], len(depths), 0).ravel(),
                                    depths.ravel()], 1))  # fmt: skip
    return rows


def _load_splits(args, name) -> dict:
    """Split -> the dataset on that split, for the splits the command runs."""
    splits = _splits(args, name)
    return {k: data.load_dataset(name, data_dir=args.data_dir, split=k) for k in splits}


def _splits(args, name) -> list[int]:
    available = data.heterophily.num_splits(name)
    if args.num_splits > available:
        raise pg.ConfigError(f"--num-splits {args.num_splits}: {name} has {available} splits.")
    return list(range(available))[: args.num_splits]


def _read_json(path: pathlib.Path) -> dict:
    return outputs.read_json(path) if path.exists() else {}


def _merge_json(path: pathlib.Path, entries, overwrite: bool, extra: dict | None = None,
                then=None) -> dict:  # fmt: skip
    """Adds `entries` (or what `entries(the file's content)` gives) to the file (under
    "datasets" with `extra`), keeping every other entry;
    one it holds already is replaced only if the same or `overwrite`. Returns what the file now
    holds. The read and the write are one step under the file's lock (`study_files`)."""

    def add(merged: dict) -> dict:
        old = merged.get("datasets", {}) if extra is not None else merged
        new = entries(merged) if callable(entries) else entries  # made from the file as it is
        records.check_replaced_entries(old, new, path, overwrite)
        if extra is None:
            return {**merged, **new}
        return {"datasets": {**old, **new}}

    if extra is None:
        return study_files.merge(path, OPTIONS_FILE, options_shape(OPTIONS), add)
    return study_files.merge(path, HETEROPHILY_FILE, heterophily_shape, add, then)


def _warn_if_chosen_otherwise(name: str, entry: dict | None, args) -> None:
    """The options were chosen at another depth range or seed count: said, not silently used."""
    splits = len(_splits(args, name))
    then = chosen_otherwise(entry, args.seeds, args.max_depth, splits)
    if then:
        print(f"warning: {name}'s options were chosen with {then}; this study runs max_depth "
              f"{args.max_depth} with {args.seeds} seeds on {splits} splits. Run `options` with "
              f"the same flags to choose for them.", file=sys.stderr)  # fmt: skip


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["options", "study"])
    p.add_argument("--datasets", nargs="+", default=["texas", "wisconsin", "cornell"],
                   choices=data.HETEROPHILY_NAMES)  # fmt: skip
    p.add_argument("--data-dir", default=None)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--max-depth", type=int, default=4, help="K: depths 0..K")
    p.add_argument("--episodes", type=int, default=EPISODES, help="MDP episodes of Policy-GNN")
    p.add_argument("--num-splits", type=int, default=10, help="the first N splits (10: all)")
    p.add_argument("--skip", nargs="*", default=[], choices=POLICIES)
    p.add_argument("--options", nargs="+", default=None, choices=OPTIONS,
                   help="options: the combinations to choose from (all); study: the one to use "
                   "instead of the one chosen")  # fmt: skip
    p.add_argument("--split-map", default="map", choices=split_sweep.SPLIT_MAPS,
                   help="how the splits' runs run: one program, one split after another "
                   "(map), batched (vmap: for accelerators), or apart")  # fmt: skip
    p.add_argument("--out", default="results/heterophily")
    p.add_argument("--options-json", default="docs/results/heterophily_options.json")
    p.add_argument("--results-json", default=STUDY_FILES["--results-json"])
    p.add_argument("--figure", default=STUDY_FILES["--figure"])
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace saved policy or fixed-depth runs, or a dataset's entry in the JSON "
        "files, that differ",
    )
    return p.parse_args(argv)


def run(args) -> None:
    """Refuses bad arguments and unusable files before any training, then runs the command."""
    require_at_least_one(seeds=args.seeds, episodes=args.episodes, num_splits=args.num_splits)
    if args.what == "study" and args.options is not None and len(args.options) != 1:
        raise pg.ConfigError("study --options takes one combination: the one to run.")
    if args.max_depth < 0:
        raise pg.ConfigError(f"--max-depth must be >= 0 (depths 0..K), got {args.max_depth}.")
    for flag in ("options_json", "results_json"):
        if pathlib.Path(getattr(args, flag)).suffix.lower() != ".json":  # the table is its .md
            raise pg.ConfigError(f"--{flag.replace('_', '-')} must name a .json file.")
    heterophily_table.check_distinct_outputs(args.options_json, args.results_json, args.figure)
    for name in args.datasets:  # refused before any folder is made
        _splits(args, name)
    check_outputs(args)
    heterophily_table.check_files(
        pathlib.Path(args.options_json), pathlib.Path(args.results_json), tuple(OPTIONS)
    )
    _check_chosen(args)  # the file is known good now
    with locks.FolderLock(args.out, "output folder"):  # one run at a time trains into --out
        _warn_unused(args)
        (choose_options if args.what == "options" else study)(args)


def _check_chosen(args) -> None:
    """Before any training: options has two candidates per dataset, counting the scores the file
    holds (each a score); the study's chosen combinations mean here what they meant there."""
    known = _read_json(pathlib.Path(args.options_json))
    for name in args.datasets:
        where = f"{name} in {args.options_json}"
        if args.what == "study":  # --options: the user's combination, whatever the file says
            entry = known.get(name) or {}
            error = backbone_options.fields_error(entry, entry.get("chosen_by_val"), where)
            if error and args.options is None:
                raise pg.ConfigError(error)
            continue
        kept = _kept_scores(args, name, known)
        if args.options and len(set(args.options) | set(kept)) < 2:
            raise pg.ConfigError(
                f"options --options needs at least two different combinations to choose from "
                f"for {name}, counting those {args.options_json} scored with the same seeds, "
                f"depths and splits; got {' '.join(args.options)}."
            )


def check_outputs(args) -> None:
    """The files the command writes (merged into; the figure replaced), and --out, usable."""
    results = pathlib.Path(args.results_json)
    beside = (results.with_suffix(".md"), results.with_suffix(".depths.npz"))  # table, points
    written = [args.options_json] if args.what == "options" else [results, *beside, args.figure]
    for path in written:
        outputs.check_writable_file(path)
    outputs.check_writable_dir(args.out)


def _warn_unused(args) -> None:
    given = {"--episodes": args.episodes != EPISODES, "--skip": bool(args.skip),
             "--results-json": args.results_json != STUDY_FILES["--results-json"],
             "--figure": args.figure != STUDY_FILES["--figure"]}  # fmt: skip
    unused = [flag for flag, said in given.items() if said and args.what == "options"]
    if unused:  # the study's: a setting that changes nothing is said, never silently dropped
        print(f"warning: {', '.join(unused)} not used by options (they are the study's).",
              file=sys.stderr)  # fmt: skip


def main(argv=None) -> int:
    args = parse_args(argv)
    return exit_status(run, args)


if __name__ == "__main__":
    use_every_core()  # read when JAX starts its backend, which no import above does
    finish(main() if len(sys.argv) > 1 else main(["--help"]))
