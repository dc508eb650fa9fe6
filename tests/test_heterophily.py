"""The heterophilous benchmarks: a hand-built file parsed exactly, the real files against the
statistics in docs/usage.md (Heterophilous benchmarks), checksums enforced, and the folder rules of
Planetoid (data_dir means that folder only). No download: conftest forces offline."""

import hashlib
import pathlib
import shutil

import numpy as np
import pytest
from conftest import HETEROPHILY_DIR, need

import policy_gnn_jax as pg
from policy_gnn_jax import data
from policy_gnn_jax.data import heterophily

# From the table in docs/usage.md (Heterophilous benchmarks), which states the data's own
# documentation: nodes, features, classes, undirected edges,
# edge homophily (2 decimals), split 0's train / val / test sizes.
README = {
    "actor": (7600, 932, 5, 26659, 0.22, (3648, 2432, 1520)),
    "chameleon-filtered": (890, 2325, 5, 8854, 0.24, (409, 287, 194)),
    "minesweeper": (10000, 7, 2, 39402, 0.68, (5000, 2500, 2500)),
    "texas": (183, 1703, 5, 279, 0.06, (87, 59, 37)),
    "wisconsin": (251, 1703, 5, 450, 0.18, (120, 80, 51)),
    "cornell": (183, 1703, 5, 277, 0.12, (87, 59, 37)),
}
FILES = {name: name.replace("-", "_") + ".npz" for name in README}


# A 6-node graph, written by hand: edges stored once, plus a self-loop and a repeated edge
# (reversed) that the loader must drop; node 5 is in no split of split 0.
TINY_FEATURES = np.array(
    [[1, 0, 2], [0, 0, 0], [0, 3, 0], [1, 1, 1], [0, 0, 5], [2, 0, 0]], dtype=np.float32
)
TINY_LABELS = np.array([0, 1, 2, 0, 1, 2], dtype=np.int64)
TINY_EDGES = np.array([[0, 1], [1, 2], [2, 3], [4, 5], [3, 3], [2, 1]], dtype=np.int64)
T, F = True, False
TINY_MASKS = {
    "train_masks": np.array([[T, T, F, F, F, F], [F, F, F, F, T, T]]),
    "val_masks": np.array([[F, F, T, F, F, F], [T, F, F, F, F, F]]),
    "test_masks": np.array([[F, F, F, T, T, F], [F, T, F, F, F, F]]),
}


def _save(path, **overrides):
    arrays = dict(
        node_features=TINY_FEATURES, node_labels=TINY_LABELS, edges=TINY_EDGES, **TINY_MASKS
    )
    arrays.update(overrides)
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return path


def _edge_set(ds):
    return set(zip(ds.edges[0].tolist(), ds.edges[1].tolist()))


def test_hand_built_file_is_loaded_as_written(tmp_path):
    path = _save(tmp_path / "Tiny.npz")
    ds = data.load_heterophily(path, split=0)
    # Each undirected edge both ways; the self-loop (3, 3) and the repeat (2, 1) gone.
    assert _edge_set(ds) == {(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2), (4, 5), (5, 4)}
    assert ds.num_edges == 8
    np.testing.assert_array_equal(ds.train_index, [0, 1])
    np.testing.assert_array_equal(ds.val_index, [2])
    np.testing.assert_array_equal(ds.test_index, [3, 4])
    for part in ("train", "val", "test"):
        want = np.flatnonzero(TINY_MASKS[f"{part}_masks"][0])
        np.testing.assert_array_equal(getattr(ds, f"{part}_index"), want)
    # Labels as written (node 5, in no split, keeps its label), features not row-normalised.
    np.testing.assert_array_equal(ds.labels, [0, 1, 2, 0, 1, 2])
    assert ds.labels.dtype == np.int32 and ds.features.dtype == np.float32
    np.testing.assert_array_equal(ds.features.toarray(), TINY_FEATURES)
    assert ds.num_classes == 3 and ds.name == "Tiny" and ds.source == str(tmp_path.absolute())


def test_hand_built_second_split_and_registry(tmp_path):
    path = _save(tmp_path / "Tiny.npz")
    assert heterophily.num_splits(path) == 2
    assert data.check_name(str(path)) == str(path)  # a path is not lower-cased
    ds = data.load_dataset(str(path), split=1)
    np.testing.assert_array_equal(ds.train_index, [4, 5])
    np.testing.assert_array_equal(ds.val_index, [0])
    np.testing.assert_array_equal(ds.test_index, [1])
    with pytest.raises(data.DataError, match=r"0\.\.1"):
        data.load_heterophily(path, split=2)


def test_malformed_files_are_named(tmp_path):
    with pytest.raises(data.DataError, match=r"lacks the arrays \['edges'\]"):
        data.load_heterophily(_save(tmp_path / "a.npz", edges=None))
    overlap = TINY_MASKS["val_masks"].copy()
    overlap[0, 0] = True  # node 0 is also in train of split 0
    with pytest.raises(data.DataError, match="split 0 of .* overlaps another split"):
        data.load_heterophily(_save(tmp_path / "b.npz", val_masks=overlap))
    with pytest.raises(data.DataError, match="val_masks must be bool"):
        data.load_heterophily(_save(tmp_path / "c.npz", val_masks=overlap[:, :5]))
    (tmp_path / "d.npz").write_text("not a zip")
    with pytest.raises(data.DataError, match="not a .npz"):
        data.load_heterophily(tmp_path / "d.npz")
    with pytest.raises(data.MissingDataError, match="No such file"):
        data.load_heterophily(tmp_path / "missing.npz")
    none = {f"{part}_masks": TINY_MASKS[f"{part}_masks"][:0] for part in ("train", "val", "test")}
    with pytest.raises(data.DataError, match="the masks hold no split"):  # was "0..-1"
        data.load_heterophily(_save(tmp_path / "e.npz", **none))


@pytest.mark.benchmark_data(*README)
def test_pinned_checksums_are_those_of_the_real_files():
    sums = {f: data.sha256_of(HETEROPHILY_DIR / f) for f in FILES.values()}
    assert heterophily.HETEROPHILY_SHA256 == sums
    assert sorted(heterophily.HETEROPHILY_FILES.values()) == sorted(sums)


@pytest.mark.parametrize("name", list(README))
def test_real_file_matches_the_readme(name):
    need(name)
    nodes, features, classes, undirected, homophily, sizes = README[name]
    ds = data.load_dataset(name, data_dir=HETEROPHILY_DIR, download=False)
    assert ds.name == name and ds.source == str(HETEROPHILY_DIR.absolute())
    assert (ds.num_nodes, ds.num_features, ds.num_classes) == (nodes, features, classes)
    assert ds.num_edges == 2 * undirected  # each edge stored once, both directions loaded
    assert (len(ds.train_index), len(ds.val_index), len(ds.test_index)) == sizes
    same = ds.labels[ds.edges[0]] == ds.labels[ds.edges[1]]
    assert round(float(same.mean()), 2) == homophily
    raw = np.load(HETEROPHILY_DIR / FILES[name])
    np.testing.assert_array_equal(ds.features.toarray(), raw["node_features"])
    np.testing.assert_array_equal(ds.labels, raw["node_labels"])


@pytest.mark.parametrize("name", list(README))
def test_every_split_loads(name):
    need(name)
    assert heterophily.num_splits(name) == 10
    raw = np.load(HETEROPHILY_DIR / FILES[name])
    for split in range(10):
        ds = data.load_heterophily(name, split=split, data_dir=HETEROPHILY_DIR, download=False)
        np.testing.assert_array_equal(ds.test_index, np.flatnonzero(raw["test_masks"][split]))
        if name != "chameleon-filtered":  # the README: only chameleon's sizes vary by split
            assert (len(ds.train_index), len(ds.val_index), len(ds.test_index)) == README[name][5]


def test_corrupted_file_is_refused_by_hash(tmp_path):
    need("texas")
    copy = tmp_path / "texas.npz"
    shutil.copy(HETEROPHILY_DIR / "texas.npz", copy)
    copy.chmod(0o644)
    blob = bytearray(copy.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    copy.write_bytes(bytes(blob))
    got = hashlib.sha256(bytes(blob)).hexdigest()
    pinned = "b164b99e6c3d43e4ab07488ec59bd8c815f90cbc1bd4cf425ce587d2b534d844"  # SHA256SUMS
    with pytest.raises(data.DataError) as err:
        data.load_heterophily("texas", data_dir=tmp_path, download=False)
    message = str(err.value)
    assert not isinstance(err.value, data.MissingDataError)
    assert str(copy) in message and got in message and pinned in message
    assert "Delete it" in message and "heterophilous-graphs/raw/main/data/texas.npz" in message


@pytest.mark.parametrize("split", [10, -1, True, 1.5, "0"])
def test_split_out_of_range_is_refused(split):
    with pytest.raises(data.DataError, match=r"0\.\.9"):
        data.load_heterophily("texas", split=split, data_dir=HETEROPHILY_DIR, download=False)


def test_data_dir_does_not_fall_back_to_the_environment(tmp_path, monkeypatch):
    need("texas")
    monkeypatch.setenv("POLICY_GNN_DATA", str(HETEROPHILY_DIR))
    empty_cache = tmp_path / "cache"
    # Without data_dir, $POLICY_GNN_DATA is where texas is found ...
    ds = data.load_heterophily("texas", download=False, cache_dir=empty_cache)
    assert ds.source == str(HETEROPHILY_DIR.absolute())
    # ... but a data_dir that lacks it is the only folder read.
    (tmp_path / "empty").mkdir()
    with pytest.raises(data.MissingDataError, match="Missing texas.npz") as err:
        data.load_heterophily("texas", data_dir=tmp_path / "empty", download=False)
    assert str(HETEROPHILY_DIR) not in str(err.value)
    with pytest.raises(data.DataError, match="does not exist"):
        data.load_heterophily("texas", data_dir=tmp_path / "nowhere")


def test_cache_is_searched_and_offline_means_no_download(tmp_path, monkeypatch):
    need("cornell")
    monkeypatch.delenv("POLICY_GNN_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cache = tmp_path / "policy_gnn_jax" / "heterophily"
    cache.mkdir(parents=True)
    shutil.copy(HETEROPHILY_DIR / "cornell.npz", cache / "cornell.npz")
    assert data.load_heterophily("cornell").source == str(cache)
    url = "https://github.com/yandex-research/heterophilous-graphs/raw/main/data/texas.npz"
    with pytest.raises(data.MissingDataError, match="POLICY_GNN_OFFLINE is set") as err:
        data.load_heterophily("texas")  # download allowed, but conftest sets offline
    assert url in str(err.value)
    assert not (cache / "texas.npz").exists()


def test_a_folder_named_like_a_npz_file_is_called_a_folder(tmp_path):
    folder = tmp_path / "actor.npz"
    folder.mkdir()
    for call in (data.check_name, lambda p: heterophily.read_npz(pathlib.Path(p))):
        with pytest.raises(data.DataError, match="is a folder, not a .npz file"):
            call(str(folder))


def test_names_are_registered():
    assert data.HETEROPHILY_NAMES == tuple(README)
    for name in README:
        assert name in data.DATASET_NAMES and data.check_name(name.upper()) == name
    with pytest.raises(data.DataError, match="No such file"):
        data.check_name("nowhere/actor.npz")
    with pytest.raises(data.DataError, match="Unknown dataset 'chameleon'"):
        data.check_name("chameleon")
    with pytest.raises(data.DataError, match="Unknown heterophilous dataset"):
        data.load_heterophily("chameleon")


def test_the_command_runs_the_split_asked_and_records_it(tmp_path, capsys):
    """`--split K` reaches the loader, and results.json says which split the numbers are of."""
    import json

    from policy_gnn_jax import cli

    need("texas")
    argv = ["--dataset", "texas", "--split", "3", "--data-dir", str(HETEROPHILY_DIR), "--method"]
    argv += ["gcn", "--epochs", "2", "--seeds", "1", "--no-progress", "--out", str(tmp_path / "o")]
    assert cli.main(argv) == 0
    record = json.loads((tmp_path / "o" / "results.json").read_text())
    assert record["split"] == 3 and record["dataset"] == "texas"
    with np.load(HETEROPHILY_DIR / "texas.npz") as z:
        test_mask = z["test_masks"][3]
    assert record["dataset_summary"].endswith(f"{int(test_mask.sum())}")
    loaded = pg.load(tmp_path / "o")  # the saved fit remembers which split it was trained on
    assert loaded.dataset.split == 3 and loaded.dataset.source == str(HETEROPHILY_DIR)
    assert cli.main([*argv[:3], "10", *argv[4:-1], str(tmp_path / "p")]) == 2
    assert "0..9" in capsys.readouterr().err
