"""Run by test_sharding.py in a process with 8 host CPU devices (XLA_FLAGS is read when JAX
starts, so it cannot be set inside the pytest process). Prints one JSON line: for each
(method, engine, seed mode), the results and parameter bytes on 8 devices and on 1."""

import dataclasses
import json

import jax
import numpy as np
import scipy.sparse as sp

import policy_gnn_jax as pg
from policy_gnn_jax import data
from policy_gnn_jax.runtime import seed_axis

VARIANTS = [
    ("policy-gnn", "full", "map"),
    ("policy-gnn", "subgraph", "map"),
    ("policy-gnn", "full", "vmap"),
    ("gcn", "full", "map"),
    # Sparse binary features, as Planetoid's: the DQN's sparse first layer and the normaliser's
    # sparse statistics, whose divisions XLA compiled otherwise when sharded.
    ("policy-gnn", "sparse", "map"),
]
FIELDS = ("test_metric", "val_metric", "val_metric_curve", "test_depths", "best_epoch")

assert len(jax.devices()) == 8, jax.devices()
ds = data.make_csbm(
    num_nodes=300,
    num_classes=3,
    num_features=16,
    homophily=0.85,
    avg_degree=6,
    seed=1,
    num_train_per_class=5,
    num_val=60,
    num_test=100,
)
words = np.random.default_rng(2).random((ds.num_nodes, 200)) < 0.03
sparse = dataclasses.replace(ds, features=sp.csr_matrix(words, dtype=np.float32))
out = {"sharded_over": seed_axis.seed_sharding(8).mesh.size}
for method, engine, mode in VARIANTS:
    config = pg.Config.tiny(
        engine="full" if engine == "sparse" else engine, subgraph_nodes=64,
        subgraph_edges=400, num_episodes=2, epochs=10,
    )  # fmt: skip
    runs = {}
    for devices in (8, 1):
        fit = pg.fit(
            sparse if engine == "sparse" else ds, config, method=method, seeds=8,
            progress=False, devices=devices, seed_mode=mode,
        )  # fmt: skip
        runs[devices] = {
            "record": {k: fit.record[k] for k in FIELDS if k in fit.record},
            "params": [x.tobytes().hex() for x in jax.tree.leaves(fit.params)],
            "policy": [x.tobytes().hex() for x in jax.tree.leaves(fit.policy)],
        }
    out[f"{method}/{engine}/{mode}"] = runs
print(json.dumps(out))
