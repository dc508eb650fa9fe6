"""The decoupled backbone's two forms, compared on VALIDATION accuracy and on cost.

  python benchmarks/decoupled_forms.py --datasets cora citeseer --seeds 10

This chooses between propagating the features once and caching them (SGC / SIGN /
NDLS) and propagating an MLP's outputs (APPNP / DAGNN) by measured validation accuracy and cost.
Both forms here use the same propagation, `P_0 = I`, `P_k = (1 - alpha) Â P_{k-1} + alpha I`
(alpha = `Config.teleport`), and the same MLP (hidden size, dropouts, Adam with L2 on W_1, epochs,
best-validation epoch with ties keeping the earliest), so only the order differs:

- propagated (the library's `--backbone decoupled`): logits at depth k = `P_k MLP(X)`;
- cached: logits at depth k = `MLP(P_k X)`, with `P_k X` a dense [N, F] matrix computed once.

The propagated form's accuracies per depth are the fixed-depth sweeps of the headroom analysis
(`docs/results/headroom.json`, the same command as `policy-gnn --method gcn --backbone decoupled
--depth k`); the cached form is trained here, 10 seeds vmapped, on the rows it needs (training
nodes each epoch, validation nodes each epoch, test nodes once at the end). Cost: one training
epoch of each form at the same depth, jitted alone and timed in this process (medians), and the
memory the cached features take for depths 0..K. Writes docs/results/decoupled_forms.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from bench import median_s  # a sibling script: experiments/ is on the path when run

import policy_gnn_jax as pg
from policy_gnn_jax import backbones, data, fixed_depth, metrics
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.backbones import gcn as backbone_lib
from policy_gnn_jax.cli import exit_status, finish
from policy_gnn_jax.contrib.study_shapes import HEADROOM_FILE, headroom_shape
from policy_gnn_jax.metrics import tree_select
from policy_gnn_jax.runtime import locks, outputs, records, seed_axis, study_files

REPEATS = 20  # timed calls per cost, after one to compile
# The hyperparameters both forms share, recorded with the results.
CONFIG_FIELDS = (
    "hidden", "dropout", "input_dropout", "weight_decay", "epochs", "teleport", "gcn_lr"
)  # fmt: skip


def propagated_features(g: graph_lib.Graph, alpha: float, max_depth: int):
    """Yields (k, P_k X) for k = 0..max_depth, one dense [N, F] matrix at a time."""
    x0 = g.features
    x = x0
    yield 0, x0
    step = jax.jit(lambda x: (1.0 - alpha) * graph_lib.propagate(g, x) + alpha * x0)
    for k in range(1, max_depth + 1):
        x = step(x)
        yield k, x


def init_mlp(key, num_features: int, hidden: int, num_classes: int) -> dict:
    k1, k2 = jax.random.split(key)
    glorot = jax.nn.initializers.glorot_uniform()
    return {
        "w_1": glorot(k1, (num_features, hidden)),
        "b_1": jnp.zeros((hidden,)),
        "w_2": glorot(k2, (hidden, num_classes)),
        "b_2": jnp.zeros((num_classes,)),
    }


def dropout(key, x, rate: float):
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)


def mlp_logits(params, x, cfg, key=None):
    """The decoupled backbone's MLP on dense rows; `key` None is evaluation mode."""
    if key is not None:
        k_in, k_hidden = jax.random.split(key)
        x = dropout(k_in, x, cfg.input_dropout)
    h = jax.nn.relu(x @ params["w_1"] + params["b_1"])
    if key is not None:
        h = dropout(k_hidden, h, cfg.dropout)
    return h @ params["w_2"] + params["b_2"]


def init_carry(cfg, optimizer, key, num_features: int, num_classes: int):
    """(params, optimiser state, dropout key, best validation accuracy, best params)."""
    key, k_init = jax.random.split(key)
    params = init_mlp(k_init, num_features, cfg.hidden, num_classes)
    return params, optimizer.init(params), key, jnp.float32(-1.0), params


def cached_epoch(cfg, optimizer, x_train, y_train, x_val, y_val, carry, _=None):
    """One full-batch step on the training rows, then the best-validation bookkeeping."""
    params, opt_state, key, best_val, best_params = carry
    key, k_drop = jax.random.split(key)

    def loss_fn(p):
        return jnp.mean(backbone_lib.cross_entropy(mlp_logits(p, x_train, cfg, k_drop), y_train))

    grads = jax.grad(loss_fn)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    val = metrics.accuracy(mlp_logits(params, x_val, cfg), y_val)
    better = val > best_val  # ties keep the earliest, as the library's baseline
    best_params = tree_select(better, params, best_params)
    return (params, opt_state, key, jnp.maximum(val, best_val), best_params), None


def train_cached(cfg, num_classes: int, x_rows, labels, key):
    """One seed of the cached form at one depth: (val accuracy of the selected epoch, test)."""
    x_train, x_val, x_test = x_rows
    y_train, y_val, y_test = labels
    optimizer = backbones.make_optimizer(cfg.gcn_lr, cfg.weight_decay)
    carry = init_carry(cfg, optimizer, key, x_train.shape[1], num_classes)
    epoch = functools.partial(cached_epoch, cfg, optimizer, x_train, y_train, x_val, y_val)
    carry, _ = jax.lax.scan(epoch, carry, length=cfg.epochs)
    best_val, best_params = carry[3], carry[4]
    return best_val, metrics.accuracy(mlp_logits(best_params, x_test, cfg), y_test)


def cached_sweep(cfg, x, g: graph_lib.Graph, keys):
    """Every seed of the cached form at one depth, vmapped: (val [S], test [S])."""
    rows = [g.train_index, g.val_index, g.test_index]
    x_rows = tuple(x[r] for r in rows)
    labels = tuple(g.labels[r] for r in rows)
    fn = jax.jit(jax.vmap(functools.partial(train_cached, cfg, g.num_classes, x_rows, labels)))
    val, test = fn(keys)
    return np.asarray(val), np.asarray(test)


def epoch_costs(cfg, g: graph_lib.Graph, depth: int, x) -> dict:
    """ms of one training epoch of each form at `depth` (1 seed), in this process."""
    fixed = dataclasses.replace(cfg, depth=depth)
    ctx = fixed_depth.BaselineContext(backbones.for_fixed_depth(fixed, g), depth)
    state = fixed_depth.init(ctx, g, jax.random.key(0))
    propagated = jax.jit(functools.partial(fixed_depth.epoch_step, ctx, g))
    train, val = g.train_index, g.val_index
    optimizer = backbones.make_optimizer(cfg.gcn_lr, cfg.weight_decay)
    carry = init_carry(cfg, optimizer, jax.random.key(0), g.num_features, g.num_classes)
    cached = jax.jit(
        functools.partial(
            cached_epoch, cfg, optimizer, x[train], g.labels[train], x[val], g.labels[val]
        )
    )
    return {
        "depth": depth,
        "propagated_epoch_ms": 1e3 * median_s(propagated, state, repeats=REPEATS),
        "cached_epoch_ms": 1e3 * median_s(cached, carry, repeats=REPEATS),
    }


def all_depth_costs(cfg, g: graph_lib.Graph, xs: list) -> dict:
    """ms of one evaluation forward of every depth 0..K for every node (what each MDP step of
    Policy-GNN needs): the propagated form's one MLP pass and K C-wide propagations, against
    the cached form's one shared MLP applied to each of the K + 1 cached matrices."""
    backbone = backbones.for_policy(cfg, g)
    params = backbone.init(jax.random.key(0), g)
    mlp = init_mlp(jax.random.key(0), g.num_features, cfg.hidden, g.num_classes)
    stacked = jnp.stack(xs)  # [K + 1, N, F]
    cached = jax.jit(lambda p, x: jax.vmap(lambda xk: mlp_logits(p, xk, cfg))(x))
    return {
        "propagated_all_depths_ms": 1e3
        * median_s(jax.jit(backbone.logits), params, g, None, repeats=REPEATS),
        "cached_all_depths_ms": 1e3 * median_s(cached, mlp, stacked, repeats=REPEATS),
    }


def compare(name: str, args, headroom: dict) -> dict:
    ds = data.load_dataset(name, data_dir=args.data_dir)
    g = graph_lib.from_dataset(ds)
    cfg = pg.Config.decoupled(dataset=name)
    keys = seed_axis.seed_keys(0, args.seeds)
    cached, xs = {}, []
    for k, x in propagated_features(g, cfg.teleport, cfg.max_depth):
        xs.append(x)
        if args.depths and k not in args.depths:
            continue
        start = time.perf_counter()
        val, test = cached_sweep(cfg, x, g, keys)
        cached[k] = {"val_metric": records.mean_std(val), "test_metric": records.mean_std(test)}
        print(
            f"{name} cached depth {k}: val {val.mean():.4f} test {test.mean():.4f} ± "
            f"{test.std():.4f} ({time.perf_counter() - start:.1f} s)",
            flush=True,
        )
    best_k = max(cached, key=lambda k: cached[k]["val_metric"]["mean"])
    fixed = headroom.get("decoupled", {}).get(name, {})
    propagated = {int(k): row for k, row in fixed.get("fixed_depth", {}).items()}
    bytes_cached = 4 * g.num_nodes * g.num_features * (cfg.max_depth + 1)
    result = {
        "config": {k: getattr(cfg, k) for k in CONFIG_FIELDS},
        "seeds": args.seeds,
        "cached": {str(k): v for k, v in cached.items()},
        "cached_best_depth_by_val": best_k,
        "propagated": {str(k): v for k, v in propagated.items()},
        "cached_features_bytes": bytes_cached,
    }
    if propagated:
        result["propagated_best_depth_by_val"] = max(
            propagated, key=lambda k: propagated[k]["val_metric"]["mean"]
        )
    if cfg.depth in cached:
        result["epoch_cost"] = epoch_costs(cfg, g, cfg.depth, xs[cfg.depth])
    result["all_depths_cost"] = all_depth_costs(cfg, g, xs)
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--datasets", nargs="+", default=["cora", "citeseer"])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--depths", type=int, nargs="*", default=None, help="default: 0..K")
    p.add_argument("--headroom-json", default="docs/results/headroom.json")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default="docs/results/decoupled_forms.json")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    args = p.parse_args(argv)
    return exit_status(run, args, saves=False)


def _read_headroom(path: pathlib.Path, datasets) -> dict:
    """The headroom analysis ({} if there is none yet), refused before any fit unless each
    dataset's fixed-depth rows are what `compare` reads: {depth: {...}}."""
    headroom = study_files.check(path, HEADROOM_FILE, headroom_shape(pg.config.BACKBONES))
    for name in datasets:
        rows = headroom.get("decoupled", {}).get(name, {}).get("fixed_depth", {})
        if not isinstance(rows, dict) or not all(isinstance(r, dict) for r in rows.values()):
            raise outputs.CheckpointError(
                f"{path} is not {HEADROOM_FILE}: its decoupled {name} fixed_depth rows have "
                f"another shape. Pass another --headroom-json."
            )
    return headroom


def run(args) -> None:
    """Refuses bad input before any fit, then compares the forms on every dataset."""
    if args.seeds < 1:
        raise pg.ConfigError(f"--seeds must be >= 1, got {args.seeds}.")
    max_depth = pg.Config.decoupled().max_depth
    if args.depths is not None and not all(0 <= k <= max_depth for k in args.depths):
        raise pg.ConfigError(f"--depths must lie in 0..{max_depth}, got {args.depths}.")
    locks.claim_output_file(args.out, overwrite=args.overwrite)  # before any fit
    headroom = _read_headroom(pathlib.Path(args.headroom_json), args.datasets)
    results = {name: compare(name, args, headroom) for name in args.datasets}
    outputs.atomic_write_text(args.out, json.dumps(results, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    finish(main())
