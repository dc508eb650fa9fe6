"""Run by test_sharding.py in a process with 8 host CPU devices (XLA_FLAGS is read when JAX
starts, so it cannot be set inside the pytest process). Prints one JSON line."""

import json
import sys

import jax

import policy_gnn_jax as pg
from policy_gnn_jax import data, runner

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
method, engine = sys.argv[1], sys.argv[2]
config = pg.Config.tiny(engine=engine, subgraph_nodes=64, subgraph_edges=400)
out = {"sharded_over": runner.seed_sharding(8).mesh.size}
mode = sys.argv[3]
for devices in (8, 1):
    fit = pg.fit(
        ds, config, method=method, seeds=8, progress=False, devices=devices, seed_mode=mode
    )
    fields = ("test_accuracy", "val_accuracy", "val_accuracy_curve", "test_depths", "best_epoch")
    out[devices] = {k: fit.record[k] for k in fields if k in fit.record}
    out[f"{devices}-params"] = [x.tobytes().hex() for x in jax.tree.leaves(fit.params)]
print(json.dumps(out))
