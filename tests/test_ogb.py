"""ogbn-arxiv from a generated zip of OGB's layout: parsed right, its checksum recorded on first
load and enforced afterwards, and every missing or damaged file a clear error. No download."""

import gzip
import json
import zipfile

import numpy as np
import pytest

from policy_gnn_jax import cli, data
from policy_gnn_jax.data import ogb


def _csv_gz(rows) -> bytes:
    lines = [",".join(str(v) for v in np.atleast_1d(r)) for r in rows]
    return gzip.compress(("\n".join(lines) + "\n").encode())


def make_arxiv_zip(folder, n=40, f=6, classes=3, seed=0, drop=None):
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(n, f)).astype(np.float32)
    labels = rng.integers(0, classes, n)
    edges = np.stack([rng.integers(0, n, 3 * n), rng.integers(0, n, 3 * n)], 1)
    order = rng.permutation(n)
    splits = {"train": order[:20], "valid": order[20:30], "test": order[30:]}
    members = {
        ogb.ARXIV_MEMBERS["edges"]: _csv_gz(edges),
        ogb.ARXIV_MEMBERS["features"]: _csv_gz(features),
        ogb.ARXIV_MEMBERS["labels"]: _csv_gz(labels),
        **{ogb.ARXIV_MEMBERS[k]: _csv_gz(v) for k, v in splits.items()},
    }
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / ogb.ARXIV_ZIP, "w") as z:
        for name, blob in members.items():
            if name != drop:
                z.writestr(name, blob)
    return features, labels, edges, splits


@pytest.fixture
def arxiv(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    truth = make_arxiv_zip(tmp_path / "data")
    return tmp_path / "data", truth


def test_arxiv_zip_is_parsed_into_the_dataset(arxiv):
    folder, (features, labels, edges, splits) = arxiv
    ds = data.load_dataset("ogbn-arxiv", data_dir=folder, download=False)
    assert ds.name == "ogbn-arxiv" and ds.num_classes == labels.max() + 1
    np.testing.assert_array_equal(ds.features.toarray(), features)
    np.testing.assert_array_equal(ds.labels, labels)
    np.testing.assert_array_equal(ds.train_index, splits["train"])
    np.testing.assert_array_equal(ds.val_index, splits["valid"])
    np.testing.assert_array_equal(ds.test_index, splits["test"])
    # Citations symmetrised, self-loops and duplicates dropped.
    want = {(a, b) for a, b in edges.tolist() if a != b}
    want |= {(b, a) for a, b in want}
    assert set(zip(ds.edges[0].tolist(), ds.edges[1].tolist())) == want


def test_checksum_recorded_on_first_load_and_enforced_after(arxiv, tmp_path):
    folder, _ = arxiv
    data.load_dataset("ogbn-arxiv", data_dir=folder, download=False)
    record = json.loads((ogb.default_cache_dir() / ogb.RECORD_FILE).read_text())
    assert record[ogb.ARXIV_ZIP] == data.sha256_of(folder / ogb.ARXIV_ZIP)
    data.load_dataset("ogbn-arxiv", data_dir=folder, download=False)  # same file: fine
    make_arxiv_zip(folder, seed=1)  # another file under the same name
    with pytest.raises(data.DataError, match="not the copy first loaded here"):
        data.load_dataset("ogbn-arxiv", data_dir=folder, download=False)


def test_missing_zip_member_and_damaged_zip_are_named(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(data.DATA_ENV, raising=False)
    with pytest.raises(data.MissingDataError, match="arxiv.zip"):
        ogb.load_ogbn_arxiv(data_dir=tmp_path, download=False)
    make_arxiv_zip(tmp_path / "a", drop=ogb.ARXIV_MEMBERS["labels"])
    with pytest.raises(data.DataError, match="node-label"):
        ogb.load_ogbn_arxiv(data_dir=tmp_path / "a", download=False)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / ogb.ARXIV_ZIP).write_bytes(b"not a zip")
    # A download cut short fails every later load alike: the message says to delete it.
    with pytest.raises(data.DataError, match=r"could not be read .*: delete it"):
        ogb.load_ogbn_arxiv(data_dir=tmp_path / "b", download=False, cache_dir=tmp_path / "c2")
    # A copy that fails to parse is never recorded as the trusted one.
    assert not (tmp_path / "c2" / ogb.RECORD_FILE).exists()


def test_cli_runs_on_the_arxiv_layout(arxiv, tmp_path):
    folder, _ = arxiv
    code = cli.main(
        ["--dataset", "ogbn-arxiv", "--data-dir", str(folder), "--method", "gcn", "--seeds", "1",
         "--epochs", "3", "--no-progress", "--out", str(tmp_path / "out")]
    )  # fmt: skip
    assert code == 0
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert record["dataset"] == "ogbn-arxiv"


def test_download_into_the_cache_then_recorded(tmp_path, monkeypatch):
    """The download path, fed from a local file:// mirror (tests never touch the network)."""
    monkeypatch.delenv("POLICY_GNN_OFFLINE")
    monkeypatch.delenv(data.DATA_ENV, raising=False)
    make_arxiv_zip(tmp_path / "mirror")
    monkeypatch.setattr(ogb, "ARXIV_URL", (tmp_path / "mirror" / ogb.ARXIV_ZIP).as_uri())
    cache = tmp_path / "cache"
    ds = ogb.load_ogbn_arxiv(cache_dir=cache)
    assert ds.num_nodes == 40 and (cache / ogb.ARXIV_ZIP).is_file()
    record = json.loads((cache / ogb.RECORD_FILE).read_text())
    assert record[ogb.ARXIV_ZIP] == data.sha256_of(cache / ogb.ARXIV_ZIP)


def test_downloaded_files_follow_the_umask(tmp_path, monkeypatch):
    """A download and the checksum record get the permissions the umask gives any new file
    (docs/reliability.md, promise 2), not a temporary file's 0600."""
    import os

    monkeypatch.delenv("POLICY_GNN_OFFLINE")
    monkeypatch.delenv(data.DATA_ENV, raising=False)
    make_arxiv_zip(tmp_path / "mirror")
    monkeypatch.setattr(ogb, "ARXIV_URL", (tmp_path / "mirror" / ogb.ARXIV_ZIP).as_uri())
    old = os.umask(0o022)
    try:
        ogb.load_ogbn_arxiv(cache_dir=tmp_path / "cache")
    finally:
        os.umask(old)
    for name in (ogb.ARXIV_ZIP, ogb.RECORD_FILE):
        assert (tmp_path / "cache" / name).stat().st_mode & 0o777 == 0o644, name
