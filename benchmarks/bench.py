"""Timings in one process (medians; the machines are shared, so read the ratios, not the ms).

  python benchmarks/bench.py --datasets cora citeseer

Per dataset:
1. one fixed-depth GCN epoch (depth 2, 1 seed): the unit the MDP step is compared with;
2. one Policy-GNN MDP step (1 seed, paper config) of the full compiled loop, for the dense
   formulation (dense normaliser window, dense Q-network states: the earlier default) and
   the default (each part as `build.dqn_agent` picks it for the graph): `step/epoch = X.XXx`;
3. the step against its kernel floor: one GCN forward+backward, one all-depth evaluation forward
   and one DQN update, each jitted alone;
4. S seeds vmapped, and S seeds one after another on device (`--seed-mode map`), for S = 1 and
   each S of `--seeds`, for the GCN epoch and for the MDP step: per seed, and as throughput
   against a loop over single-seed runs (`--out` keeps this table as JSON); with `--seed-parts`,
   also the per-seed cost of the MDP step's parts (the backbone's evaluation forward, training
   forward and gradient, and the whole step) vmapped over 1 seed and each S: which parts get
   cheaper per seed when batched, and which dearer;
5. the backbones: one MDP step and one fixed-depth epoch (1 seed) of `gcn` (the paper's
   structure), `gcn-readout` (legacy) and `decoupled` (its preset: depths 0..16, hidden
   64), as ratios to `gcn` (`--skip-backbones` to leave it out);
6. the kernels: one MDP step with the gather-only kernels (deterministic on GPU) against the
   segment-sum ones (`gather / scatter step`), and whether two fresh runs of one seed give the
   same bits with each (`--skip-kernels` to leave it out).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from policy_gnn_jax import backbones, cli, data, fixed_depth, graph
from policy_gnn_jax import config as config_lib
from policy_gnn_jax.agents import build, dqn, qnet
from policy_gnn_jax.backbones import gcn
from policy_gnn_jax.mdp import loop, policy_gnn
from policy_gnn_jax.runtime import locks, outputs, runner, seed_axis


def median_s(fn, *args, repeats: int) -> float:
    jax.block_until_ready(fn(*args))  # compile + warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def chunk_time(trainer, keys, repeats: int, mode: str = "vmap") -> float:
    """Median seconds of one call of the chunk (`per_call` units) over the seeds, batched
    (`vmap`) or one after another (`map`; `seed_axis.over_seeds`), warmed up."""
    chunk = functools.partial(trainer.train_chunk, length=trainer.per_call)
    seeds = functools.partial(seed_axis.over_seeds, mode=mode, sharding=None)
    init_v, chunk_v = jax.jit(seeds(trainer.init)), jax.jit(seeds(chunk))
    data = trainer.data
    state = init_v(data, keys)
    state, _ = chunk_v(data, state)
    return median_s(lambda s: chunk_v(data, s)[1], state, repeats=repeats)


def epoch_time(cfg, g, seeds: int, repeats: int, depth: int = 2, mode: str = "vmap") -> float:
    b = fixed_depth.make_baseline(dataclasses.replace(cfg, depth=depth), g, epochs_per_chunk=20)
    return chunk_time(b, seed_axis.seed_keys(0, seeds), repeats, mode) / b.per_call


def step_time(cfg, g, hops, agent, seeds: int, repeats: int, mode: str = "vmap") -> float:
    t = policy_gnn.make_trainer(cfg, g, hops, agent=agent)
    per_call = t.per_call * cfg.steps_per_episode
    return chunk_time(t, seed_axis.seed_keys(0, seeds), repeats, mode) / per_call


def kernel_floor(cfg, g, key, repeats: int, sparse_states: bool) -> dict:
    """Seconds of the three kernels one MDP step cannot avoid, each jitted alone."""
    backbone = backbones.gcn_backbone(cfg, g, cfg.max_depth, cfg.min_depth)
    params = backbone.init(key, g)
    nodes = g.train_index[: cfg.buffer_size]
    labels = g.labels[nodes]

    def gcn_grad(p, k):
        def loss(p):
            logits = backbone.logits(p, g, k)[0, nodes]
            return jnp.mean(gcn.cross_entropy(logits, labels))

        return jax.grad(loss)(p)

    def eval_forward(p):
        return backbone.logits(p, g, None)[:, g.val_index]

    q_model = qnet.QNetwork(cfg.q_hidden, cfg.num_actions)
    q_params = q_model.init(key, jnp.zeros((1, g.num_features)))
    state = dqn.DQNState.create(
        apply_fn=q_model.apply, params=q_params, tx=optax.adam(cfg.q_lr), target_params=q_params
    )
    idx = jnp.arange(cfg.batch_size) % g.num_nodes
    mean, std = jnp.zeros(g.num_features), jnp.ones(g.num_features)

    dqn_ctx = dqn.DQNContext(q_model, cfg, sparse_states, False)

    def q_of(p):
        return dqn.q_values(dqn_ctx, dqn.DQNPolicy(p, mean, std), g, idx)

    def dqn_update(s):
        actions, rewards = idx % cfg.num_actions, idx * 0.1
        return dqn.update_with(s, q_of, q_of, actions, rewards, cfg.gamma, cfg.target_period)

    return {
        "gcn fwd+bwd": median_s(jax.jit(gcn_grad), params, key, repeats=repeats),
        "eval fwd": median_s(jax.jit(eval_forward), params, repeats=repeats),
        "dqn update": median_s(jax.jit(dqn_update), state, repeats=repeats),
    }


def bench_dataset(name: str, args) -> None:
    ds = data.load_dataset(name, data_dir=args.data_dir)
    g = graph.from_dataset(ds)
    print(f"\n== {ds.summary()} | backend {jax.default_backend()}")
    cfg = config_lib.Config.paper(episodes_per_call=2)
    hops = graph.train_hop_distances(ds, cfg.max_depth)
    epoch = epoch_time(cfg, g, 1, args.repeats)
    variants = {
        "dense": build.dqn_agent(cfg, g, sparse_states=False, sparse_statistics=False),
        "default": build.dqn_agent(cfg, g),
    }
    steps = {}
    for label, agent in variants.items():
        steps[label] = step_time(cfg, g, hops, agent, 1, args.repeats)
        print(
            f"[{name}] {label}: MDP step {1e3 * steps[label]:.2f} ms, GCN epoch "
            f"{1e3 * epoch:.2f} ms -> step/epoch = {steps[label] / epoch:.2f}x"
        )
    default = variants["default"]
    sparse_states, sparse_statistics = build.default_formulation(cfg, g)
    ctx_flags = {"sparse_states": sparse_states, "sparse_statistics": sparse_statistics}
    print(f"[{name}] default formulation: {ctx_flags}")
    print(f"[{name}] default / dense step = {steps['default'] / steps['dense']:.2f}x")
    parts = kernel_floor(cfg, g, jax.random.key(0), args.repeats * 5, ctx_flags["sparse_states"])
    floor = sum(parts.values())
    detail = ", ".join(f"{k} {1e3 * v:.2f} ms" for k, v in parts.items())
    print(f"[{name}] step / kernel floor = {steps['default'] / floor:.2f}x ({detail})")
    SEED_ROWS.extend(bench_seeds(name, cfg, g, hops, default, args))
    if args.seed_parts:
        SEED_ROWS.extend(seed_parts(name, cfg, g, hops, args))
    if not args.skip_backbones:
        bench_backbones(name, ds, g, args)
    if not args.skip_kernels:
        bench_kernels(name, ds, cfg, hops, args)


SEED_ROWS: list[dict] = []  # every dataset's seeds table, for --out


def seed_counts(args) -> list[int]:
    """1 and each S of `--seeds` above it."""
    return [1, *(s for s in args.seeds if s > 1)]


def bench_seeds(name, cfg, g, hops, agent, args) -> list[dict]:
    """The GCN epoch and the MDP step over S seeds (S = 1 and each of `--seeds`), batched and
    mapped. `throughput` is against a loop over single-seed runs of the same mode, `vs_best_loop`
    against a loop over the cheaper of the two single-seed runs: what running the seeds one
    command at a time would cost at best."""
    rows = []
    for seeds in seed_counts(args):
        for mode in args.seed_modes:
            many = {"GCN epoch": epoch_time(cfg, g, seeds, args.repeats, mode=mode),
                    "MDP step": step_time(cfg, g, hops, agent, seeds, args.repeats, mode=mode)}
            rows += [{"dataset": name, "what": what, "seeds": seeds, "mode": mode,
                      "ms_per_seed": 1e3 * t / seeds} for what, t in many.items()]  # fmt: skip
    one = {(r["what"], r["mode"]): r["ms_per_seed"] for r in rows if r["seeds"] == 1}
    for r in rows:
        r["throughput"] = one[r["what"], r["mode"]] / r["ms_per_seed"]
        r["vs_best_loop"] = min(v for (w, _), v in one.items() if w == r["what"]) / r["ms_per_seed"]
        print(f"[{name}] {r['what']}: {r['seeds']} seeds {r['mode']}: {r['ms_per_seed']:.2f} ms "
              f"per seed, {r['throughput']:.2f}x the throughput of a loop over 1-seed "
              f"{r['mode']} runs, {r['vs_best_loop']:.2f}x the best loop")  # fmt: skip
    return rows


def seed_parts(name, cfg, g, hops, args) -> list[dict]:
    """Milliseconds per seed of each part of the MDP step vmapped over S seeds (S = 1 and each
    of `--seeds`), from the state one episode in."""
    ctx, data_ = policy_gnn.make_context(cfg, g), policy_gnn.mdp_data(g, hops)
    bb, key = ctx.env.backbone, jax.random.key(1)

    def grad(d, r):
        nodes = d.graph.train_index
        depths = jnp.full(nodes.shape, cfg.min_depth)
        return jax.grad(lambda p: bb.loss(p, d.graph, key, nodes, depths).sum())(r.env.params)

    parts = {
        "eval forward": lambda d, r: bb.logits(r.env.params, d.graph, None),
        "train forward": lambda d, r: bb.logits(r.env.params, d.graph, key),
        "backbone grad": grad,
        "MDP step": lambda d, r: loop.mdp_step(ctx, d, r),
    }
    rows, one = [], {}
    for seeds in seed_counts(args):
        keys = seed_axis.seed_keys(0, seeds)
        init = jax.jit(jax.vmap(functools.partial(policy_gnn.init, ctx), in_axes=(None, 0)))
        state = init(data_, keys)
        episode = jax.jit(jax.vmap(functools.partial(loop.run_episode, ctx), in_axes=(None, 0)))
        state, _ = episode(data_, state)
        for part, fn in parts.items():
            batched = jax.jit(jax.vmap(fn, in_axes=(None, 0)))
            ms = 1e3 * median_s(batched, data_, state, repeats=args.repeats) / seeds
            one.setdefault(part, ms)
            rows.append({"dataset": name, "what": f"per seed: {part}", "seeds": seeds,
                         "mode": "vmap", "ms_per_seed": ms,
                         "vs_one_seed": ms / one[part]})  # fmt: skip
            print(f"[{name}] per seed, {seeds} seeds vmapped: {part} {ms:.2f} ms "
                  f"({ms / one[part]:.2f}x one seed's)")  # fmt: skip
    return rows


def bench_backbones(name: str, ds, g, args) -> None:
    configs = {
        "gcn": config_lib.Config.paper(episodes_per_call=2),
        "gcn-readout": config_lib.Config.paper(episodes_per_call=2, backbone="gcn-readout"),
        "decoupled": config_lib.Config.decoupled(episodes_per_call=2),
    }
    steps, epochs = {}, {}
    for label, cfg in configs.items():
        hops = graph.train_hop_distances(ds, cfg.max_depth)
        steps[label] = step_time(cfg, g, hops, policy_gnn.make_agent(cfg, g), 1, args.repeats)
        epochs[label] = epoch_time(cfg, g, 1, args.repeats, depth=cfg.depth)
        print(
            f"[{name}] backbone {label} (depths {cfg.min_depth}-{cfg.max_depth}): MDP step "
            f"{1e3 * steps[label]:.2f} ms = {steps[label] / steps['gcn']:.2f}x gcn; fixed-depth "
            f"epoch (depth {cfg.depth}) {1e3 * epochs[label]:.2f} ms = "
            f"{epochs[label] / epochs['gcn']:.2f}x gcn"
        )


def same_bits_twice(cfg, ds, g, hops, seeds: int) -> bool:
    """Two fresh compiled runs of the same seeds: identical metrics and final state?"""
    runs = []
    for _ in range(2):
        trainer = policy_gnn.make_trainer(cfg, g, hops)
        state, metrics, results = runner.run_trainer(
            trainer, seed_axis.seed_keys(0, seeds), progress=False
        )
        leaves = jax.tree.leaves((jax.random.key_data(state.key), state.env.params, metrics))
        runs.append([np.asarray(x) for x in leaves])
    return all(np.array_equal(a, b) for a, b in zip(*runs))


def bench_kernels(name: str, ds, cfg, hops, args) -> None:
    times, identical, seeds = {}, {}, max(args.seeds)
    for kernels in ("scatter", "gather"):
        g = graph.from_dataset(ds, kernels)
        agent = policy_gnn.make_agent(cfg, g)
        times[kernels] = step_time(cfg, g, hops, agent, seeds, args.repeats)
        short = dataclasses.replace(cfg, num_episodes=6, episodes_per_call=2)
        identical[kernels] = same_bits_twice(short, ds, g, hops, seeds)
        print(
            f"[{name}] kernels {kernels}: MDP step ({seeds} seeds) "
            f"{1e3 * times[kernels]:.2f} ms; two runs bit-identical: "
            f"{'yes' if identical[kernels] else 'NO'}"
        )
    print(f"[{name}] gather / scatter step = {times['gather'] / times['scatter']:.2f}x "
          f"(on GPU: deterministic / fast)")  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--datasets", nargs="+", default=["cora", "citeseer"])
    p.add_argument("--data-dir", default=None)
    p.add_argument("--seeds", type=int, nargs="+", default=[4],
                   help="seed counts S compared with one seed (e.g. 4 10 32)")
    p.add_argument("--seed-modes", nargs="+", default=list(seed_axis.SEED_MODES),
                   choices=seed_axis.SEED_MODES,
                   help="the seed modes of the seeds table")  # fmt: skip
    p.add_argument("--seed-parts", action="store_true",
                   help="also the MDP step's parts: per-seed cost at each seed count")  # fmt: skip
    p.add_argument("--out", default=None, help="also write the seeds table here, as JSON")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--skip-kernels", action="store_true", help="leave out the kernels section")
    p.add_argument("--skip-backbones", action="store_true", help="leave out the backbones section")
    return cli.exit_status(run, p.parse_args(argv), saves=False)


def run(args) -> None:
    for name in args.datasets:  # every name before the first (long) benchmark
        data.check_name(name)
    cli.require_at_least_one(seeds=min(args.seeds), repeats=args.repeats)
    if args.out is not None:
        locks.claim_output_file(args.out, overwrite=args.overwrite)
    for name in args.datasets:
        bench_dataset(name, args)
    if args.out is not None:
        table = {"backend": jax.default_backend(), "device": jax.devices()[0].device_kind,
                 "repeats": args.repeats, "rows": SEED_ROWS}  # fmt: skip
        outputs.atomic_write_json(args.out, table)


if __name__ == "__main__":
    cli.finish(main())
