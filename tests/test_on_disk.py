"""Datasets whose features and edges are memory-mapped `.npy` files, used in place: dense
features beside CSR ones and the memory-bounded checks (`write_csbm` / `load_arrays`:
test_write_csbm.py)."""

import dataclasses
import hashlib
import warnings

import jax
import numpy as np
import pytest
import scipy.sparse as sp

from policy_gnn_jax import data, graph

CSBM_300 = dict(num_nodes=300, seed=1, num_val=50, num_test=100)


def _documented_fingerprint(ds) -> str:
    """A CSR dataset's fingerprint as `Dataset.fingerprint` documents it, computed here apart:
    its three arrays and shape, the labels, the edges, the three parts' ids, then their lengths
    as int64. Saved fits and checkpoints are matched by it, so it must not drift."""
    digest = hashlib.sha256()
    f = ds.features
    parts = (ds.train_index, ds.val_index, ds.test_index)
    lengths = np.array([len(p) for p in parts], np.int64)
    for array in (f.indptr, f.indices, f.data, np.asarray(f.shape), ds.labels, ds.edges, *parts,
                  lengths):  # fmt: skip
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def csbm():
    return data.make_csbm(**CSBM_300)


def test_the_fingerprint_of_a_csr_dataset_is_the_documented_hash(csbm):
    assert csbm.fingerprint() == _documented_fingerprint(csbm)


def _with_edges(ds, senders, receivers):
    return dataclasses.replace(ds, edges=np.array([senders, receivers], np.int32))


@pytest.mark.parametrize(
    "senders, receivers, message",
    [
        ([0, 1], [1, 0], r"not sorted by \(receiver, sender\) without duplicates"),
        ([1, 1, 0], [0, 0, 1], r"not sorted by \(receiver, sender\) without duplicates"),
        ([0, 1, 0], [0, 0, 1], "edges contain self-loops"),
        ([1, 2], [0, 1], r"edges are directed: some \(u, v\) has no \(v, u\)"),
        ([1, 0], [0, 300], r"edge endpoints must lie in 0\.\.299, got 0\.\.300"),
    ],
)
def test_edges_that_break_an_invariant_are_refused_with_the_same_message(
    csbm, senders, receivers, message
):
    with pytest.raises(data.InvalidDatasetError, match=message):
        _with_edges(csbm, senders, receivers)


def test_the_fingerprint_of_cora_is_the_documented_hash(cora):
    assert cora.fingerprint() == _documented_fingerprint(cora)


def _perturbed(edges):
    """Edge lists that each break one invariant, some of them at a block boundary of 3."""
    e = edges.shape[1]
    swapped = edges.copy()
    swapped[:, [2, 3]] = swapped[:, [3, 2]]  # positions 2 | 3: across the first boundary
    repeated = edges.copy()
    repeated[:, 3] = repeated[:, 2]
    directed = np.delete(edges, e // 2, axis=1)
    looped = edges.copy()
    looped[0, e - 1] = looped[1, e - 1]  # in the last block
    return {"swapped": swapped, "repeated": repeated, "directed": directed, "looped": looped}


def test_the_edge_check_reads_blocks_without_missing_a_boundary(csbm, monkeypatch):
    """A block of 3 edges must find what one block of all of them finds, at every boundary."""
    from policy_gnn_jax.data import edge_check

    cases = {"valid": csbm.edges, **_perturbed(csbm.edges)}
    whole = {k: edge_check.edge_problem(v, csbm.num_nodes) for k, v in cases.items()}
    monkeypatch.setattr(edge_check, "EDGE_BLOCK", 3)
    blocked = {k: edge_check.edge_problem(v, csbm.num_nodes) for k, v in cases.items()}
    assert blocked == whole
    assert whole["valid"] is None
    assert whole["swapped"] == whole["repeated"] == edge_check.NOT_SORTED
    assert whole["directed"][0].startswith("edges are directed")
    assert whole["looped"][0] == "edges contain self-loops."


@pytest.mark.parametrize("seed", range(6))
def test_the_row_by_row_symmetry_search_finds_every_missing_reverse(seed, monkeypatch):
    """Random graphs, dense and sparse rows: removing an edge leaves its reverse alone."""
    from policy_gnn_jax.data import edge_check

    monkeypatch.setattr(edge_check, "EDGE_BLOCK", 5)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 40))
    pairs = rng.integers(0, n, (2, int(rng.integers(1, n * n))))
    edges = data.symmetric_edges(pairs[0], pairs[1], n)
    assert edge_check.edge_problem(edges, n) is None
    for drop in rng.permutation(edges.shape[1])[:60]:
        problem = edge_check.edge_problem(np.delete(edges, drop, axis=1), n)
        assert problem[0] == "edges are directed: some (u, v) has no (v, u).", drop


def _mapped(path, array):
    """`array` written to `path` as .npy and mapped back read-only."""
    np.save(path, array)
    return np.load(path, mmap_mode="r")


def _csbm_arrays(ds):
    return dict(
        labels=ds.labels,
        train_index=ds.train_index,
        val_index=ds.val_index,
        test_index=ds.test_index,
    )


def test_memory_mapped_features_and_edges_are_kept_without_a_copy(csbm, tmp_path):
    features = _mapped(tmp_path / "x.npy", csbm.features.toarray())
    edges = _mapped(tmp_path / "e.npy", csbm.edges)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to repair: nothing to say
        ds = data.from_arrays(features, edges, **_csbm_arrays(csbm))
    assert isinstance(ds.features, np.memmap) and np.shares_memory(ds.features, features)
    assert str(ds.features.filename) == str(tmp_path / "x.npy")
    assert isinstance(ds.edges, np.memmap) and np.shares_memory(ds.edges, edges)
    assert data.is_dense_features(ds.features) and not data.is_dense_features(csbm.features)


def test_a_plain_dense_array_still_becomes_csr(csbm):
    ds = data.from_arrays(csbm.features.toarray(), csbm.edges, **_csbm_arrays(csbm))
    assert sp.isspmatrix_csr(ds.features)
    assert ds.fingerprint() == csbm.fingerprint()


def test_a_memory_mapped_array_of_another_dtype_is_refused(csbm, tmp_path):
    features = _mapped(tmp_path / "x.npy", csbm.features.toarray().astype(np.float64))
    with pytest.raises(ValueError, match="memory-mapped float64.*Write them as float32"):
        data.from_arrays(features, csbm.edges, **_csbm_arrays(csbm))


@pytest.mark.parametrize(
    "layout, said",
    [
        ("fortran", "in Fortran order"),
        ("columns", "a strided view"),  # before: called Fortran order too
    ],
)
def test_a_memory_map_not_in_row_order_is_refused_for_what_it_is(csbm, tmp_path, layout, said):
    dense = csbm.features.toarray()
    if layout == "fortran":
        features = np.lib.format.open_memmap(
            tmp_path / "x.npy", "w+", np.float32, dense.shape, fortran_order=True
        )
        features[:] = dense
    else:
        features = _mapped(tmp_path / "x.npy", np.concatenate([dense, dense], axis=1))[:, ::2]
    with pytest.raises(ValueError, match=said):
        data.from_arrays(features, csbm.edges, **_csbm_arrays(csbm))


def test_memory_mapped_edges_to_repair_are_copied_and_the_warning_says_so(csbm, tmp_path):
    reversed_order = csbm.edges[:, ::-1].copy()
    edges = _mapped(tmp_path / "e.npy", reversed_order)
    with pytest.warns(UserWarning, match="copied the memory-mapped edges into memory"):
        ds = data.from_arrays(csbm.features, edges, **_csbm_arrays(csbm))
    assert not np.shares_memory(ds.edges, edges)
    np.testing.assert_array_equal(ds.edges, csbm.edges)


def test_non_finite_dense_features_are_found_in_any_block(csbm, monkeypatch):
    from policy_gnn_jax.data import dense

    monkeypatch.setattr(dense, "CHUNK_VALUES", 7)  # blocks of one row
    x = csbm.features.toarray()
    ds = dataclasses.replace(csbm, features=x)
    x = x.copy()
    x[-1, -1] = np.inf
    with pytest.raises(data.InvalidDatasetError, match="NaN or inf"):
        dataclasses.replace(ds, features=x)
    assert data.largest_feature(ds.features) == data.largest_feature(csbm.features)


def test_a_dense_dataset_fingerprints_its_own_layout(csbm):
    dense = dataclasses.replace(csbm, features=csbm.features.toarray())
    assert dense.fingerprint() != csbm.fingerprint()
    again = dataclasses.replace(csbm, features=np.array(csbm.features.toarray()))
    assert again.fingerprint() == dense.fingerprint()
    np.testing.assert_array_equal(dense.to_jraph().nodes, csbm.to_jraph().nodes)
    fortran = dataclasses.replace(csbm, features=np.asfortranarray(csbm.features.toarray()))
    assert fortran.fingerprint() == dense.fingerprint()  # kept as a C-ordered read-only copy


def test_a_dense_dataset_gives_the_same_device_graph_as_its_csr(csbm):
    dense = dataclasses.replace(csbm, features=csbm.features.toarray())
    a, b = graph.from_dataset(dense), graph.from_dataset(csbm)
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def test_a_dense_dataset_survives_a_saved_fit_and_its_signals_read_it(csbm):
    from policy_gnn_jax.contrib.adaptive_depth import signals
    from policy_gnn_jax.runtime import saved_fit

    dense = dataclasses.replace(csbm, features=csbm.features.toarray())
    back = saved_fit._dataset_from(saved_fit.dataset_bytes(dense))
    assert data.is_dense_features(back.features)
    assert back.fingerprint() == dense.fingerprint()
    assert saved_fit._dataset_from(saved_fit.dataset_bytes(csbm)).fingerprint() == (
        csbm.fingerprint()
    )
    np.testing.assert_array_equal(
        signals.feature_similarity(dense), signals.feature_similarity(csbm)
    )


def test_a_fit_of_a_folder_given_by_a_relative_path_saves_and_loads_from_another_folder(
    tmp_path, monkeypatch
):
    """A folder of arrays named relative to the working folder is recorded by its absolute
    path: a fit saved after a change of working folder still loads (found by an adversarial
    pass: the fit named the folder of the same name in the new working folder)."""
    import policy_gnn_jax as pg

    for folder, seed in ((tmp_path / "a", 0), (tmp_path / "b", 1)):
        data.write_csbm(folder / "g", num_nodes=400, num_features=8, num_val=50, num_test=100,
                        seed=seed)  # fmt: skip
    monkeypatch.chdir(tmp_path / "a")
    ds = data.load_arrays("g")
    fitted = pg.fit(ds, pg.Config.tiny(epochs=2), method="gcn", seeds=1, progress=False)
    monkeypatch.chdir(tmp_path / "b")
    fitted.save(tmp_path / "fit")
    assert pg.load(tmp_path / "fit").record["test_metric"] == fitted.record["test_metric"]
