"""Which GCN formulation is fastest here? Forward+backward of the training loss, in one process.

  python benchmarks/bench_gcn.py --dataset cora

Variants: the first layer as a dense `X @ W` or over X's non-zeros, and `Â @ h` as a sorted
segment sum with plain autodiff, the same with the symmetric custom VJP (the library's choice),
or jax.experimental.sparse BCSR. Prints medians and ratios to the library's formulation.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as jsparse

from policy_gnn_jax import cli, data, graph
from policy_gnn_jax.backbones import gcn as backbone_lib


def _plain_propagate(g, h):
    msg = h[g.senders] * g.weights[:, None]
    return jax.ops.segment_sum(msg, g.receivers, g.num_nodes, indices_are_sorted=True)


def make_loss(g, adj_bcsr, x_bcsr, first: str, prop: str, depth: int):
    def propagate(h):
        if prop == "segment_sum":
            return _plain_propagate(g, h)
        if prop == "bcsr":
            return adj_bcsr @ h
        return graph.propagate(g, h)

    def loss(params):
        if first == "sparse":
            h = graph.sparse_feature_matmul(g, params[0])
        elif first == "bcsr":
            h = x_bcsr @ params[0]
        else:
            h = g.features @ params[0]
        h = jax.nn.relu(propagate(h))
        for w in params[1:depth]:
            h = jax.nn.relu(propagate(h @ w))
        logits = h @ params[-1]
        return jnp.mean(backbone_lib.cross_entropy(logits[g.train_index], g.labels[g.train_index]))

    return jax.jit(jax.value_and_grad(loss))


def median_ms(fn, params, repeats: int) -> float:
    jax.block_until_ready(fn(params))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(params))
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--dataset", default="cora")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--repeats", type=int, default=30)
    return cli.exit_status(run, p.parse_args(argv), saves=False)


def run(args) -> None:
    data.check_name(args.dataset)
    cli.require_at_least_one(hidden=args.hidden, repeats=args.repeats)
    ds = data.load_dataset(args.dataset, data_dir=args.data_dir)
    g = graph.from_dataset(ds)
    n = ds.num_nodes
    adj = jsparse.BCSR.from_scipy_sparse(
        __import__("scipy.sparse").sparse.csr_matrix(
            (np.asarray(g.weights), (np.asarray(g.receivers), np.asarray(g.senders))), (n, n)
        )
    )
    x_bcsr = jsparse.BCSR.from_scipy_sparse(ds.features)
    key = jax.random.key(0)
    shapes = (
        [(ds.num_features, args.hidden)]
        + [(args.hidden, args.hidden)] * 4
        + [(args.hidden, ds.num_classes)]
    )
    params = [0.1 * jax.random.normal(jax.random.fold_in(key, i), s) for i, s in enumerate(shapes)]
    print(ds.summary())
    print(f"forward+backward of the loss, hidden {args.hidden}, median of {args.repeats} (ms)")
    variants = [
        ("sparse", "custom_vjp"),
        ("sparse", "segment_sum"),
        ("sparse", "bcsr"),
        ("dense", "custom_vjp"),
        ("bcsr", "custom_vjp"),
    ]
    for depth in (1, 2, 5):
        ps = params[:depth] + params[-1:]
        times = {
            v: median_ms(make_loss(g, adj, x_bcsr, *v, depth), ps, args.repeats) for v in variants
        }
        ref = times[variants[0]]
        row = "  ".join(f"{a}+{b}: {t:6.2f} ({t / ref:4.2f}x)" for (a, b), t in times.items())
        print(f"depth {depth}: {row}")


if __name__ == "__main__":
    cli.finish(main())
