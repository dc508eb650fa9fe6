"""Timings in one process (medians; the machines are shared, so read the ratios, not the ms).

  python experiments/bench.py --dataset cora

1. Fixed-depth GCN: time per epoch of the 10-seed vmapped run vs one seed.
2. Policy-GNN: time per MDP step of the full compiled loop vs its "kernel floor": one GCN
   forward+backward, one all-depth evaluation forward and one DQN update, each jitted alone.
3. Policy-GNN: time per MDP step of the vmapped S-seed run vs one seed.
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

from policy_gnn_jax import baseline, data, dqn, gcn, graph, normaliser, qnet, runner, train
from policy_gnn_jax import config as config_lib


def median_s(fn, *args, repeats: int) -> float:
    jax.block_until_ready(fn(*args))  # compile + warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def chunk_time(trainer, keys, repeats):
    """Median seconds of one call of the vmapped chunk (`per_call` units), from a warmed-up
    state."""
    chunk = functools.partial(trainer.train_chunk, length=trainer.per_call)
    init_v, chunk_v = jax.jit(jax.vmap(trainer.init)), jax.jit(jax.vmap(chunk))
    state = init_v(keys)
    state, _ = chunk_v(state)
    return median_s(lambda s: chunk_v(s)[1], state, repeats=repeats)


def bench_baseline(cfg, g, seeds, repeats):
    b = baseline.make_baseline(cfg, g, epochs_per_chunk=20)
    one = chunk_time(b, runner.seed_keys(0, 1), repeats) / 20
    many = chunk_time(b, runner.seed_keys(0, seeds), repeats) / 20
    print(
        f"[gcn depth {cfg.depth}] per epoch: 1 seed {1e3 * one:.2f} ms, {seeds} seeds vmapped "
        f"{1e3 * many:.2f} ms -> {many / one:.2f}x the time for {seeds}x the work "
        f"({seeds * one / many:.2f}x throughput of a loop over seeds)"
    )


def kernel_floor(cfg, g, key, repeats):
    """Seconds of the three kernels one MDP step cannot avoid, each jitted alone."""
    model = gcn.make_gcn(cfg, g, cfg.max_depth)
    params = model.init(key, g, train=False)
    nodes = g.train_index[: cfg.buffer_size]
    labels = g.labels[nodes]

    def gcn_grad(p, k):
        def loss(p):
            logits = model.apply(p, g, train=True, rngs={"dropout": k})[cfg.min_depth, nodes]
            return jnp.mean(gcn.cross_entropy(logits, labels))

        return jax.grad(loss)(p)

    def eval_forward(p):
        return model.apply(p, g, train=False)[:, g.val_index]

    q_model = qnet.QNetwork(cfg.q_hidden, cfg.num_actions)
    q_params = q_model.init(key, jnp.zeros((1, g.num_features)))
    state = dqn.DQNState.create(
        apply_fn=q_model.apply, params=q_params, tx=optax.adam(cfg.q_lr), target_params=q_params
    )
    idx = jnp.arange(cfg.batch_size) % g.num_nodes
    mean, std = jnp.zeros(g.num_features), jnp.ones(g.num_features)

    def dqn_update(s):
        s_tm1 = normaliser.normalise(g.features[idx], mean, std)
        return dqn.update(
            s, s_tm1, idx % cfg.num_actions, idx * 0.1, s_tm1, cfg.gamma, cfg.target_period
        )

    parts = {
        "gcn fwd+bwd": median_s(jax.jit(gcn_grad), params, key, repeats=repeats),
        "eval fwd": median_s(jax.jit(eval_forward), params, repeats=repeats),
        "dqn update": median_s(jax.jit(dqn_update), state, repeats=repeats),
    }
    return parts


def bench_policy(cfg, ds, g, seeds, repeats):
    hops = graph.train_hop_distances(ds, cfg.max_depth)
    cfg = dataclasses.replace(cfg, episodes_per_call=2)
    t = train.make_trainer(cfg, g, hops)
    steps = cfg.episodes_per_call * cfg.steps_per_episode
    one = chunk_time(t, runner.seed_keys(0, 1), repeats) / steps
    parts = kernel_floor(cfg, g, jax.random.key(0), repeats * 5)
    floor = sum(parts.values())
    detail = ", ".join(f"{k} {1e3 * v:.2f} ms" for k, v in parts.items())
    print(
        f"[policy-gnn] per MDP step, 1 seed: full loop {1e3 * one:.2f} ms; kernel floor "
        f"{1e3 * floor:.2f} ms ({detail}) -> loop / floor = {one / floor:.2f}x"
    )
    many = chunk_time(t, runner.seed_keys(0, seeds), repeats) / steps
    print(
        f"[policy-gnn] per MDP step: {seeds} seeds vmapped {1e3 * many:.2f} ms vs 1 seed "
        f"{1e3 * one:.2f} ms -> {many / one:.2f}x the time for {seeds}x the work "
        f"({seeds * one / many:.2f}x throughput of a loop over seeds)"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--dataset", default="cora")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--skip-policy", action="store_true")
    args = p.parse_args()
    ds = data.load_dataset(args.dataset, data_dir=args.data_dir)
    g = graph.from_dataset(ds)
    print(ds.summary(), f"| backend {jax.default_backend()}")
    cfg = config_lib.Config.paper()
    bench_baseline(cfg, g, args.seeds, args.repeats)
    if not args.skip_policy:
        bench_policy(cfg, ds, g, args.seeds, args.repeats)


if __name__ == "__main__":
    main()
