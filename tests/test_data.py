"""Planetoid loading against the statistics of docs/algorithm.md section 10 and the data
folder's README."""

import pathlib
import pickle
import shutil
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import PLANETOID_DIR, ROOT

from policy_gnn_jax import data

# From docs/algorithm.md section 10 (the data's own documented statistics, computed
# independently of this loader).
EXPECTED = {
    "cora": dict(
        nodes=2708,
        features=1433,
        classes=7,
        edges=10556,
        train=140,
        test=1000,
        class_counts=[351, 217, 418, 818, 426, 298, 180],
        nnz=49216,
        unlabelled=0,
    ),
    "citeseer": dict(
        nodes=3327,
        features=3703,
        classes=6,
        edges=9104,
        train=120,
        test=1000,
        class_counts=[249, 590, 668, 701, 596, 508],
        nnz=105165,
        unlabelled=15,
    ),
}


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_planetoid_statistics(name, request):
    ds = request.getfixturevalue(name)
    want = EXPECTED[name]
    assert (ds.num_nodes, ds.num_features, ds.num_classes) == (
        want["nodes"],
        want["features"],
        want["classes"],
    )
    assert ds.num_edges == want["edges"]
    assert (len(ds.train_index), len(ds.val_index), len(ds.test_index)) == (
        want["train"],
        500,
        want["test"],
    )
    np.testing.assert_array_equal(ds.train_index, np.arange(want["train"]))
    np.testing.assert_array_equal(ds.val_index, np.arange(want["train"], want["train"] + 500))
    labelled = ds.labels[ds.labels >= 0]
    np.testing.assert_array_equal(np.bincount(labelled), want["class_counts"])
    assert np.sum(ds.labels < 0) == want["unlabelled"]
    assert ds.features.nnz == want["nnz"]
    # Splits are disjoint and only hold labelled nodes.
    splits = np.concatenate([ds.train_index, ds.val_index, ds.test_index])
    assert len(np.unique(splits)) == len(splits)
    assert np.all(ds.labels[splits] >= 0)


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_planetoid_structure(name, request):
    ds = request.getfixturevalue(name)
    s, r = ds.edges
    assert np.all(s != r), "self-loops must be removed"
    pairs = set(zip(s.tolist(), r.tolist()))
    assert len(pairs) == ds.num_edges, "duplicate edges"
    assert all((b, a) in pairs for a, b in pairs), "edges must be symmetric"
    row_sums = np.asarray(ds.features.sum(1)).ravel()
    nonzero = row_sums > 0
    np.testing.assert_allclose(row_sums[nonzero], 1.0, rtol=1e-5)


def test_citeseer_missing_test_ids_have_no_features_or_split(citeseer):
    missing = np.flatnonzero(citeseer.labels < 0)
    assert len(missing) == 15
    assert np.all((missing >= 2312) & (missing <= 3326))
    assert citeseer.features[missing].nnz == 0
    assert not np.isin(missing, citeseer.test_index).any()


def test_test_rows_follow_test_index(cora):
    """tx rows are listed in test.index order: row i must land on node test_index[i]."""
    with open(PLANETOID_DIR / "ind.cora.tx", "rb") as f:
        tx = pickle.load(f, encoding="latin1")
    order = np.loadtxt(PLANETOID_DIR / "ind.cora.test.index", dtype=int)
    want = data.row_normalise(sp.csr_matrix(tx, dtype=np.float32)).toarray()
    np.testing.assert_allclose(cora.features[order].toarray(), want, rtol=1e-6)


@pytest.mark.benchmark_data("pubmed-seven")
def test_pubmed_missing_allx_is_a_clear_error():
    if (PLANETOID_DIR / "ind.pubmed.allx").exists():
        pytest.skip("ind.pubmed.allx is present here")
    with pytest.raises(data.DataError, match=r"Missing raw file ind\.pubmed\.allx"):
        data.load_planetoid("pubmed", download=False)


def test_pubmed_loads_with_a_stand_in_allx(pubmed_stand_in, tmp_path):
    """The seven real PubMed files plus a generated allx (real x as its first 60 rows)."""
    folder, allx_sha = pubmed_stand_in
    table = dict(data.PLANETOID_SHA256)
    table["ind.pubmed.allx"] = allx_sha
    ds = data.load_planetoid(
        "pubmed", data_dir=folder, download=False, cache_dir=tmp_path / "cache", sha_table=table
    )
    assert (ds.num_nodes, ds.num_features, ds.num_classes, ds.num_edges) == (19717, 500, 3, 88648)
    assert (len(ds.train_index), len(ds.val_index), len(ds.test_index)) == (60, 500, 1000)
    np.testing.assert_array_equal(np.bincount(ds.labels), [4103, 7739, 7875])


def _copy_cora(dst: pathlib.Path) -> None:
    for s in data.RAW_SUFFIXES:
        shutil.copy(PLANETOID_DIR / f"ind.cora.{s}", dst / f"ind.cora.{s}")


@pytest.mark.parametrize("suffix", data.RAW_SUFFIXES)
def test_a_corrupted_byte_is_caught(tmp_path, suffix, cora):
    _copy_cora(tmp_path)
    path = tmp_path / f"ind.cora.{suffix}"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(data.DataError, match=rf"ind\.cora\.{suffix}.*corrupt"):
        data.load_planetoid("cora", data_dir=tmp_path, download=False, cache_dir=tmp_path / "cache")


def test_download_verifies_and_caches(tmp_path, cora, monkeypatch):
    """The download path, fed from a local file:// mirror (tests never touch the network)."""
    monkeypatch.delenv("POLICY_GNN_OFFLINE")
    monkeypatch.delenv("POLICY_GNN_DATA")
    monkeypatch.setattr(data.planetoid, "PLANETOID_URL", PLANETOID_DIR.resolve().as_uri())
    cache = tmp_path / "cache"
    ds = data.load_planetoid("cora", cache_dir=cache)
    assert ds.num_edges == cora.num_edges
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        f"ind.cora.{s}" for s in data.RAW_SUFFIXES
    )


def test_a_bad_download_is_not_kept(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "ind.cora.x").write_bytes(b"not the file")
    monkeypatch.delenv("POLICY_GNN_OFFLINE")
    monkeypatch.setattr(data.planetoid, "PLANETOID_URL", mirror.as_uri())
    with pytest.raises(data.DataError, match="SHA-256"):
        data.resolve_raw_file("ind.cora.x", [], tmp_path / "cache", data.PLANETOID_SHA256, True)
    assert not (tmp_path / "cache" / "ind.cora.x").exists()


def test_cli_empty_folder_offline_fails_clearly(tmp_path):
    """Also: a run that fails leaves no empty output folder behind (the default folder is
    made under the working directory, here a scratch one, never the repository)."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = {
        "POLICY_GNN_OFFLINE": "1",
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "experiments" / "run.py"),
            "--dataset",
            "cora",
            "--method",
            "gcn",
            "--data-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=workdir,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Missing raw file ind.cora." in proc.stderr
    assert "Traceback" not in proc.stderr
    assert list(workdir.rglob("*")) in ([], [workdir / "results"])


def test_unknown_dataset_is_a_clear_error():
    with pytest.raises(data.DataError, match="Unknown dataset 'coraa'"):
        data.load_dataset("coraa")


def test_csbm_is_deterministic_and_homophilous():
    a = data.make_csbm(num_nodes=2000, homophily=0.9, seed=3)
    b = data.make_csbm(num_nodes=2000, homophily=0.9, seed=3)
    np.testing.assert_array_equal(a.edges, b.edges)
    np.testing.assert_array_equal(a.features.toarray(), b.features.toarray())
    same = a.labels[a.edges[0]] == a.labels[a.edges[1]]
    assert 0.85 < same.mean() < 0.95
    assert len(a.train_index) == 20 * 4 and len(a.val_index) == 500 and len(a.test_index) == 1000
    with pytest.raises(ValueError, match="homophily"):
        data.make_csbm(homophily=1.5)


def test_two_threads_downloading_write_apart():
    """Each download is written under a name of its own before it is renamed into place: two
    threads of one process fetching the same file at once must not share one partial file."""
    import pathlib
    import threading

    names, both_alive = [], threading.Barrier(2)

    def name_it():
        both_alive.wait()  # two live threads at once, as two downloads in flight
        names.append(data.planetoid.partial_file(pathlib.Path("/tmp/ind.cora.x")))
        both_alive.wait()

    threads = [threading.Thread(target=name_it) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(names)) == 2
