"""The run cache behind the reproduction: one seed sweep per folder, reused when its saved
config, seed count, method and seed mode match, so an interrupted command resumes."""

from __future__ import annotations

import dataclasses
import json
import pathlib

from policy_gnn_jax import api, data, methods
from policy_gnn_jax import config as config_lib
from policy_gnn_jax.runtime import locks, outputs, records, seed_axis


def _as_json(cfg: config_lib.Config) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def configs_match(saved: dict, cfg: config_lib.Config) -> bool:
    """Whether a saved run's config is `cfg`, field for field."""
    return saved == _as_json(cfg)


# The fields of a run's results.json that readers take, and their types.
RECORD_FIELDS = {"config": dict, "seeds": int, "method": str, "dataset_fingerprint": str,
                 "seed_mode": str, "test_metric": dict, "val_metric": dict}  # fmt: skip


def is_current_record(record) -> bool:
    """Whether `record` is a run's results.json as this version writes it (another version's,
    or a damaged one, is not reused)."""
    return not _record_problems(record)


def _record_problems(record) -> list[str]:
    """What in `record` differs from a results.json this version writes, in words."""
    if not isinstance(record, dict):
        return [f"it holds a {type(record).__name__}, not an object"]
    kinds = {dict: "an object", int: "a whole number", str: "a string"}
    wrong = [k for k, kind in RECORD_FIELDS.items() if not isinstance(record.get(k), kind)]
    found = [f"{k} is not {kinds[RECORD_FIELDS[k]]}" if k in record else f"no {k}" for k in wrong]
    found += [f"{k} lacks mean, std or per_seed" for k in ("test_metric", "val_metric")
              if isinstance(record.get(k), dict)
              and not {"mean", "std", "per_seed"} <= set(record[k])]  # fmt: skip
    return found


def run_or_load(
    out: pathlib.Path, ds, cfg, method, seeds, seed_mode=None, seed=0, replace=False
) -> dict:
    """Runs one sweep unless a matching results.json is already saved there (same data, config,
    seeds, method and seed mode, None meaning the backend's, `seed_axis.seed_mode_for`).
    A saved run of anything else is replaced only with `replace` (`--overwrite`): never lost
    silently."""
    made, seed_mode = not out.exists(), seed_axis.seed_mode_for(seed_mode)
    try:
        with locks.FolderLock(out, "run folder"):  # one writer per run, a command or the CLI
            return _run_or_load(out, ds, cfg, method, seeds, seed_mode, seed, replace)
    except BaseException:  # a stop or an error: leave no empty run folder behind
        if made:
            try:
                out.rmdir()  # refuses (OSError) when anything was written there
            except OSError:
                pass
        raise


def _run_or_load(out: pathlib.Path, ds, cfg, method, seeds, seed_mode, seed, replace) -> dict:
    path = out / "results.json"
    if path.exists():
        record = outputs.read_json(path)  # a truncated file is named, with what to do
        problems = _record_problems(record)
        if problems and not replace:
            raise outputs.CheckpointError(
                f"{path} is not the results.json of a run of this version of policy-gnn-jax "
                f"({'; '.join(problems[:4])}): move it away, or pass --overwrite to replace it."
            )
        if not problems:
            differs = _differences(record, ds, cfg, method, seeds, seed_mode)
            if not differs:
                print(f"reusing {path}: {methods.summary_line(record)}")
                return record
            if not replace:
                raise outputs.CheckpointError(
                    f"{path} holds another run (its {', '.join(differs[:4])} differ from this "
                    f"command's); nothing was replaced. Pass --overwrite to replace it, or use "
                    f"another --out."
                )
    record = api.fit(ds, cfg, method=method, seeds=seeds, seed=seed, seed_mode=seed_mode).record
    if path.exists() and (out / "fit.json").exists():  # --overwrite of a saved fit: now outdated
        for name in ("fit.json", "snapshots.npz", "dataset.npz"):
            (out / name).unlink(missing_ok=True)
    records.save(record, out)
    print(methods.summary_line(record))
    return record


def _differences(record: dict, ds, cfg, method, seeds, seed_mode) -> list[str]:
    """What makes a saved run another one than this command's, by name. The data too: a
    dataset given as a path may hold another graph now."""
    ran = methods.get(method).run_config(cfg)
    found = [] if configs_match(record["config"], ran) else ["config"]
    found += ["data"] if record["dataset_fingerprint"] != ds.fingerprint() else []
    found += ["seeds"] if record["seeds"] != seeds else []
    found += ["method"] if record["method"] != method else []
    found += ["seed mode"] if record["seed_mode"] != seed_mode else []
    return found


def base_config(args, dataset: str | None = None, **overrides) -> config_lib.Config:
    """The preset (paper defaults, or `tiny` for smoke runs) with the command's overrides; for
    the decoupled backbone, its defaults and the regularisation tuned for `dataset`."""
    preset = config_lib.Config.tiny if args.preset == "tiny" else config_lib.Config.paper
    if args.backbone == "decoupled":
        backbone_values = dict(config_lib.DECOUPLED_DEFAULTS)
        backbone_values.update(config_lib.DECOUPLED_TUNED.get(dataset or "", {}))
        if args.preset == "tiny":  # keep the tiny depths
            for name in ("min_depth", "max_depth", "depth", "epochs"):
                backbone_values.pop(name)
        overrides = {**backbone_values, **overrides}
    else:
        overrides.setdefault("backbone", args.backbone)
    if args.episodes is not None:
        overrides.setdefault("num_episodes", args.episodes)
    return preset(**overrides)


def policy_config(args, method, dataset=None, **overrides) -> config_lib.Config:
    """Policy-GNN or the random policy; with the audit on unless --no-audit (the audit has its
    own key and feeds nothing back, so the honest numbers are the same either way)."""
    return base_config(
        args, dataset, random_policy=(method == "random"), audit=args.audit, **overrides
    )


def dataset_folder(out_root: pathlib.Path, name: str) -> pathlib.Path:
    """Where a dataset's runs go under `--out`: a folder named by `dataset_folder_name`."""
    return pathlib.Path(out_root) / dataset_folder_name(name)


def dataset_folder_name(name: str) -> str:
    """A dataset's name, or for one given by path the path's last part (`out / "/data/g.npz"`
    would be the input itself; `..` the folder above `--out`, so it is resolved first)."""
    last = pathlib.PurePath(name).name
    if last in ("", ".", ".."):
        last = outputs.real_path(name).name or "root"
    return last


def dataset_runs(name, args, out_root) -> dict:
    ds = data.load_dataset(name, data_dir=args.data_dir)
    if args.audit and ds.metric != "accuracy":  # refused before the fixed depths train
        raise config_lib.ConfigError(
            f"the audit reproduces the released code's accuracy; {name} is scored by "
            f"{ds.metric}: pass --no-audit."
        )
    base = base_config(args, name)
    runs, folder = {}, dataset_folder(out_root, name)
    lowest = 0 if base.backbone == "decoupled" else 1
    for depth in range(lowest, base.max_depth + 1):
        cfg = dataclasses.replace(base, depth=depth)
        runs[f"gcn-d{depth}"] = run_or_load(
            folder / f"gcn-d{depth}", ds, cfg, "gcn", args.seeds, args.seed_mode,
            replace=args.overwrite,
        )  # fmt: skip
    for method in ("random", "policy-gnn"):
        cfg = policy_config(args, method, name)
        runs[method] = run_or_load(
            folder / method, ds, cfg, method, args.seeds, args.seed_mode,
            replace=args.overwrite,
        )  # fmt: skip
    return runs
