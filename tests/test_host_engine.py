"""The host engine: the whole graph in host memory, only the split nodes and each step's padded
subgraph on the device. It must repeat the subgraph engine's bits (same sampler, same rows), give
the whole graph's test scores where no neighbourhood is sampled, and hold device arrays whose
size does not grow with the graph."""

import dataclasses
import json
import pathlib

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


@pytest.fixture(scope="module")
def cora_fits(cora):
    """One seed on Cora under each engine, with budgets that hold every neighbourhood."""
    cfg = config_lib.Config.tiny(subgraph_nodes=4096, subgraph_edges=16384, fanouts=(0,))
    return {
        e: pg.fit(cora, dataclasses.replace(cfg, engine=e), seeds=1, progress=False)
        for e in ("subgraph", "host")
    }


def test_unsampled_host_run_equals_the_subgraph_and_full_engines_on_cora(cora_fits):
    # Nothing is sampled, so the test nodes' own neighbourhoods give the whole graph's logits
    # (the subgraph engine's exactness) and the training repeats the subgraph engine's bits
    # (sparse feature rows: Cora's).
    records = {e: f.record for e, f in cora_fits.items()}
    assert records["host"]["engine"] == "host"
    assert _differences(records["subgraph"], records["host"]) == set()


def test_sampled_host_run_trains_as_the_subgraph_engine_on_dense_rows():
    ds = data.make_csbm(num_nodes=3000, num_features=24, avg_degree=8, seed=2, num_val=120,
                        num_test=200)  # fmt: skip
    cfg = config_lib.Config.tiny(subgraph_nodes=400, subgraph_edges=2400)
    records = _records(ds, cfg, ("subgraph", "host"), seeds=1)
    sub, hosted = records["subgraph"], records["host"]
    # Every training curve and the snapshot chosen on validation are the subgraph engine's;
    # only the test scores may differ: the host engine measures test nodes on sampled
    # neighbourhoods, the subgraph engine on the whole graph.
    assert _differences(sub, hosted) <= {"test_metric", "test_depth_counts", "test_depths"}
    assert sub["val_metric"] == hosted["val_metric"]
    accuracy = np.asarray(hosted["test_metric"]["per_seed"])
    assert np.all((accuracy > 0.3) & (accuracy <= 1.0))  # 4 classes: chance is 0.25
    again = _records(ds, cfg, ("host",), seeds=1)["host"]
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


@pytest.fixture(scope="module")
def sampled_fit(tmp_path_factory):
    """A host-engine fit whose neighbourhoods are sampled, on memory-mapped dense features."""
    folder = tmp_path_factory.mktemp("graph") / "csbm"
    data.write_csbm(folder, num_nodes=3000, num_features=24, avg_degree=8, seed=2, num_val=120,
                    num_test=200)  # fmt: skip
    ds = data.load_arrays(folder)
    assert isinstance(ds.features, np.memmap)
    cfg = config_lib.Config.tiny(engine="host", subgraph_nodes=400, subgraph_edges=2400)
    return pg.fit(ds, cfg, seeds=2, progress=False)


def test_predict_repeats_the_evaluation_on_the_test_nodes(sampled_fit):
    # The record's test depths and score were computed inside the compiled loop; prediction
    # runs outside it, on a device graph of the asked nodes' rows and their own sampler.
    fitted, ds = sampled_fit, sampled_fit.dataset
    depths = fitted.predict_depths(ds.test_index)
    np.testing.assert_array_equal(depths, np.asarray(fitted.record["test_depths"]))
    correct = fitted.predict(ds.test_index) == ds.labels[ds.test_index]
    np.testing.assert_allclose(
        correct.mean(1), fitted.record["test_metric"]["per_seed"], rtol=0, atol=1e-6
    )
    assert fitted.predict_logits(np.zeros(0, np.int64)).shape == (2, 0, ds.num_classes)


def test_a_nodes_prediction_does_not_depend_on_the_others_asked(sampled_fit):
    # Neighbourhoods are sampled (budgets of 400 nodes): each node's sample must come from the
    # key and its own id, not from the union of what was asked with it.
    nodes = sampled_fit.dataset.test_index[:40]
    together = sampled_fit.predict_logits(nodes)
    reversed_ = sampled_fit.predict_logits(nodes[::-1])[:, ::-1]
    one = np.concatenate([sampled_fit.predict_logits(nodes[i : i + 1]) for i in (0, 7)], 1)
    np.testing.assert_array_equal(together, reversed_)
    np.testing.assert_array_equal(together[:, [0, 7]], one)


def test_predict_on_cora_equals_the_subgraph_engines_whole_graph_prediction(cora_fits):
    fits = cora_fits
    nodes = np.array([5, 0, 2707, 5, 1200])  # any order, repeats, outside the splits
    np.testing.assert_array_equal(
        fits["host"].predict_depths(nodes), fits["subgraph"].predict_depths(nodes)
    )
    np.testing.assert_array_equal(
        fits["host"].predict_logits(nodes), fits["subgraph"].predict_logits(nodes)
    )


def test_a_saved_fit_refers_to_its_folder_of_arrays(sampled_fit, tmp_path):
    fitted, ds = sampled_fit, sampled_fit.dataset
    out = fitted.save(tmp_path / "fit")
    # The graph is not copied: the fit names its folder and checks its fingerprint on load.
    assert (out / "dataset.npz").stat().st_size < 10_000 < ds.features.nbytes
    loaded = pg.load(out)
    assert isinstance(loaded.dataset.features, np.memmap)
    np.testing.assert_array_equal(
        loaded.predict(ds.test_index[:50]), fitted.predict(ds.test_index[:50])
    )
    folder = pathlib.Path(ds.source)
    moved = folder.with_name("moved")
    folder.rename(moved)
    try:
        with pytest.raises(pg.CheckpointError, match="put the folder back") as refused:
            pg.load(out)
        assert "damaged" not in str(refused.value)  # one message, not one wrapped in another
    finally:
        moved.rename(folder)


def test_a_fit_whose_folder_of_arrays_changed_is_refused(tmp_path):
    folder = tmp_path / "graph"
    data.write_csbm(folder, num_nodes=2000, num_features=8, seed=0, num_test=100)
    cfg = config_lib.Config.tiny(engine="host", num_episodes=1, subgraph_nodes=600,
                                 subgraph_edges=3000)  # fmt: skip
    out = pg.fit(data.load_arrays(folder), cfg, seeds=1, progress=False).save(tmp_path / "fit")
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps({**meta, "num_classes": 9}))
    with pytest.raises(pg.CheckpointError, match="meta.json says 9 classes, but this fit was"):
        pg.load(out)
    data.write_csbm(folder, num_nodes=2000, num_features=8, seed=1, num_test=100, overwrite=True)
    with pytest.raises(pg.CheckpointError, match="changed since the fit was saved"):
        pg.load(out)


def test_a_dataset_cannot_be_edited_after_its_checks(small_dataset):
    ds = dataclasses.replace(small_dataset, edges=small_dataset.edges.copy())
    with pytest.raises(ValueError, match="read-only"):
        ds.edges[:, [0, 1]] = ds.edges[:, [1, 0]]
