"""The host engine: the whole graph in host memory, only the split nodes and each step's padded
subgraph on the device. It must repeat the subgraph engine's bits (same sampler, same rows), give
the whole graph's test scores where no neighbourhood is sampled, and hold device arrays whose
size does not grow with the graph."""

import dataclasses

import jax
import numpy as np
import pytest

import policy_gnn_jax as pg
from policy_gnn_jax import config as config_lib
from policy_gnn_jax import data, graph
from policy_gnn_jax.graph import host

# Fields that differ between two engines by design.
ENGINE_FIELDS = {"engine", "config", "wall_time_s"}


def _records(ds, cfg, engines, seeds=2):
    return {
        e: pg.fit(ds, dataclasses.replace(cfg, engine=e), seeds=seeds, progress=False).record
        for e in engines
    }


def _differences(a: dict, b: dict) -> set:
    return {k for k in a if k not in ENGINE_FIELDS and a[k] != b[k]}


def test_unsampled_host_run_equals_the_subgraph_and_full_engines_on_cora(cora):
    # Budgets that hold every neighbourhood: nothing is sampled, so the test nodes' batched
    # neighbourhoods give the whole graph's logits (the subgraph engine's exactness) and the
    # training repeats the subgraph engine's bits (sparse feature rows: Cora's).
    cfg = config_lib.Config.tiny(subgraph_nodes=4096, subgraph_edges=16384, fanouts=(0,))
    records = _records(cora, cfg, ("subgraph", "host"))
    assert records["host"]["engine"] == "host"
    assert _differences(records["subgraph"], records["host"]) == set()


def test_sampled_host_run_trains_as_the_subgraph_engine_on_dense_rows():
    ds = data.make_csbm(num_nodes=3000, num_features=24, avg_degree=8, seed=2, num_val=120,
                        num_test=200)  # fmt: skip
    cfg = config_lib.Config.tiny(subgraph_nodes=400, subgraph_edges=2400)
    records = _records(ds, cfg, ("subgraph", "host"))
    sub, hosted = records["subgraph"], records["host"]
    # Every training curve and the snapshot chosen on validation are the subgraph engine's;
    # only the test scores may differ: the host engine measures test nodes on sampled
    # neighbourhoods, the subgraph engine on the whole graph.
    assert _differences(sub, hosted) <= {"test_accuracy", "test_depth_counts", "test_depths"}
    assert sub["val_accuracy"] == hosted["val_accuracy"]
    accuracy = np.asarray(hosted["test_accuracy"]["per_seed"])
    assert np.all((accuracy > 0.3) & (accuracy <= 1.0))  # 4 classes: chance is 0.25
    again = _records(ds, cfg, ("host",))["host"]
    assert _differences(hosted, again) == set()


def test_device_arrays_do_not_grow_with_the_graph():
    def device_bytes(n):
        ds = data.make_csbm(num_nodes=n, num_features=8, seed=0)
        g = host.split_graph(ds)
        return sum(x.nbytes for x in jax.tree.leaves(g)), g

    small, g_small = device_bytes(2_000)
    large, g_large = device_bytes(40_000)
    assert g_small.num_nodes == g_large.num_nodes == 4 * 20 + 500 + 1000
    assert small == large


def test_split_graph_keeps_each_split_nodes_rows_and_labels(cora):
    g = host.split_graph(cora)
    whole = graph.from_dataset(cora)
    for name in ("train", "val", "test"):
        local = np.asarray(getattr(g, f"{name}_index"))
        ids = g.host.split_nodes[local]
        np.testing.assert_array_equal(ids, getattr(cora, f"{name}_index"))
        np.testing.assert_array_equal(np.asarray(g.labels)[local], cora.labels[ids])
        np.testing.assert_array_equal(
            np.asarray(g.feat_ell_idx)[local], np.asarray(whole.feat_ell_idx)[ids]
        )
        np.testing.assert_array_equal(
            np.asarray(g.feat_ell_val)[local], np.asarray(whole.feat_ell_val)[ids]
        )
    assert g.senders.shape == (g.num_nodes,)  # self-loops only: no edge of the whole graph


@pytest.mark.parametrize("max_hops", [1, 3, 5])
def test_host_hop_distances_equal_the_dijkstra_table(cora, max_hops):
    store = host.split_graph(cora).host
    train = np.asarray(cora.train_index, np.int64)
    np.testing.assert_array_equal(
        host.hop_distances(store, train, train, max_hops),
        graph.train_hop_distances(cora, max_hops),
    )


@pytest.mark.parametrize(
    "overrides, words",
    [
        (dict(transition="walk"), "transition 'labelled'"),
        (dict(audit=True), "--engine full or subgraph"),
    ],
)
def test_what_needs_the_whole_graph_on_the_device_is_refused(small_dataset, overrides, words):
    cfg = config_lib.Config.tiny(engine="host", **overrides)
    with pytest.raises(config_lib.ConfigError, match=words):
        pg.fit(small_dataset, cfg, seeds=1, progress=False)
