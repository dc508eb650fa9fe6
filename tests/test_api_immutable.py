"""Data that cannot change under a fit, and fits that cannot go stale: a `Dataset`'s arrays are
read-only copies (or read-only maps kept as they are), a `Fit` is frozen, and a fit whose record
does not describe its data is refused when saved."""

import copy
import dataclasses
import pickle
import warnings

import jax
import numpy as np
import pytest
import scipy.sparse as sp

import policy_gnn_jax as pg


def _arrays(n=60, seed=0):
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 2
    features = rng.normal(size=(n, 4)) + labels[:, None]
    edges = np.stack([np.arange(n - 1), np.arange(1, n)])
    return features, edges, labels, np.arange(10), np.arange(10, 30), np.arange(30, n)


def _dataset(**kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pg.from_arrays(*_arrays(), **kwargs)


@pytest.fixture(scope="module")
def fitted():
    ds = _dataset()
    return pg.fit(ds, pg.Config.tiny(epochs=3), method="gcn", seeds=2, progress=False)


def _arrays_of(ds):
    features = [ds.features] if isinstance(ds.features, np.ndarray) else [
        ds.features.data, ds.features.indices, ds.features.indptr
    ]
    return [*features, ds.labels, ds.edges, ds.train_index, ds.val_index, ds.test_index]


def test_a_datasets_arrays_cannot_be_edited_in_place():
    ds = _dataset()
    for array in _arrays_of(ds):
        assert not array.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        ds.labels[0] = 1


def test_a_hand_built_dataset_copies_the_callers_writable_arrays_and_leaves_them_writable():
    built = _dataset()
    mine = {name: np.array(getattr(built, name)) for name in
            ("labels", "edges", "train_index", "val_index", "test_index")}  # fmt: skip
    mine_features = built.features.toarray()  # from_arrays stores CSR; dense rows here
    ds = pg.Dataset("mine", mine_features, num_classes=2, **mine)
    mine["labels"][0] = 1  # the caller's own array: still theirs to edit
    mine_features[0, 0] = 99.0
    assert ds.labels[0] == built.labels[0] and ds.features[0, 0] == built.features[0, 0]
    assert mine["labels"].flags.writeable and mine_features.flags.writeable
    assert all(not a.flags.writeable for a in _arrays_of(ds))


def test_a_csr_dataset_is_read_only_too():
    ds = _dataset()
    mine = sp.csr_matrix(ds.features.toarray())
    csr = dataclasses.replace(ds, features=mine)
    for array in _arrays_of(csr):
        assert not array.flags.writeable
    assert mine.data.flags.writeable


def test_a_read_only_map_is_kept_as_it_is_and_a_writable_one_refused(tmp_path):
    ds = _dataset()
    path = tmp_path / "features.npy"
    np.save(path, ds.features.toarray())
    mapped = np.load(path, mmap_mode="r")
    kept = dataclasses.replace(ds, features=mapped)
    assert kept.features is mapped  # a graph too large to copy is not copied
    writable = np.load(path, mmap_mode="r+")
    with pytest.raises(pg.InvalidDatasetError, match="mode='r'"):
        dataclasses.replace(ds, features=writable)


def test_an_integer_numpy_scalar_is_a_class_count_and_a_float_is_not():
    features, edges, labels, train, val, test = _arrays()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = pg.from_arrays(features, edges, labels, train, val, test, num_classes=np.int64(2))
    assert type(ds.num_classes) is int
    with pytest.raises(pg.InvalidDatasetError, match="num_classes"):
        dataclasses.replace(ds, num_classes=2.0)
    with pytest.raises(pg.InvalidDatasetError, match="num_classes"):
        dataclasses.replace(ds, num_classes=True)


def test_a_fit_is_frozen_and_its_record_and_snapshots_cannot_be_edited(fitted):
    with pytest.raises(dataclasses.FrozenInstanceError):
        fitted.dataset = _dataset()
    record = fitted.record
    record["test_metric"]["mean"] = 2.0  # a copy: the fit's own record is unchanged
    assert fitted.record["test_metric"]["mean"] != 2.0
    for leaf in jax.tree.leaves(fitted.params):
        assert not leaf.flags.writeable


def test_a_fit_pickles_and_deep_copies_after_it_has_predicted(fitted, tmp_path):
    nodes = np.arange(fitted.dataset.num_nodes)
    before = fitted.predict(nodes)
    for copied in (pickle.loads(pickle.dumps(fitted)), copy.deepcopy(fitted)):
        np.testing.assert_array_equal(copied.predict(nodes), before)
        assert copied.record == fitted.record


def test_a_fit_given_another_dataset_is_refused_when_saved(fitted, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other = dataclasses.replace(fitted, dataset=pg.from_arrays(*_arrays(seed=1)))
    with pytest.raises(pg.CheckpointError, match="record"):
        other.save(tmp_path / "f")
    assert not (tmp_path / "f" / "fit.json").exists()


def _score(fit):
    test = fit.dataset.test_index
    return (fit.predict(test) == fit.dataset.labels[test]).mean(1)


def test_copies_of_a_fit_and_of_a_dataset_stay_read_only(fitted):
    for copied in (copy.deepcopy(fitted), pickle.loads(pickle.dumps(fitted))):
        for leaf in jax.tree.leaves((copied.params, copied.policy)):
            assert not leaf.flags.writeable
        for array in _arrays_of(copied.dataset):
            assert not array.flags.writeable


def test_a_fit_made_by_replace_is_read_only_too(fitted):
    zeroed = dataclasses.replace(fitted, params=jax.tree.map(np.zeros_like, fitted.params))
    for leaf in jax.tree.leaves(zeroed.params):
        assert not leaf.flags.writeable


@pytest.mark.parametrize("change", ["config", "method", "params-shape"])
def test_a_fit_whose_parts_are_not_its_records_is_refused_when_saved(fitted, tmp_path, change):
    if change == "config":
        other = dataclasses.replace(fitted, config=dataclasses.replace(fitted.config, epochs=9))
    elif change == "method":
        other = dataclasses.replace(fitted, method="random")
    else:
        other = dataclasses.replace(fitted, eval_keys=np.zeros((5, 2), np.uint32))
    with pytest.raises(pg.CheckpointError, match="record"):
        other.save(tmp_path / "f")
    assert not (tmp_path / "f" / "fit.json").exists()


def test_a_read_only_view_of_a_writable_buffer_is_copied():
    ds = _dataset()
    buffer = bytearray(ds.labels.astype(np.int32).tobytes())
    labels = np.frombuffer(buffer, np.int32)
    labels.flags.writeable = False
    kept = dataclasses.replace(ds, labels=labels)
    np.frombuffer(buffer, np.int32)[:] = 0  # the buffer's owner writes it
    np.testing.assert_array_equal(kept.labels, ds.labels)


@pytest.mark.parametrize("damage", ["indptr end", "indptr order", "index out of range"])
def test_a_csr_matrix_that_is_not_one_is_refused(damage):
    ds = _dataset()
    features = ds.features.copy()
    if damage == "indptr end":
        features.indptr[-1] -= 3
    elif damage == "indptr order":
        features.indptr[5] = features.indptr[6] + 4
    else:
        features.indices[0] = 10**6
    with pytest.raises(pg.InvalidDatasetError, match="features"):
        dataclasses.replace(ds, features=features)


@pytest.mark.parametrize("field", ["labels", "edges", "train_index"])
def test_a_list_where_an_array_goes_is_the_datasets_error(field):
    ds = _dataset()
    with pytest.raises(pg.InvalidDatasetError, match=field):
        dataclasses.replace(ds, **{field: getattr(ds, field).tolist()})


@pytest.mark.parametrize("count", [2**31, np.uint64(2**63), 61])
def test_a_class_count_beyond_the_nodes_is_refused(count):
    with pytest.raises(pg.InvalidDatasetError, match="num_classes"):
        dataclasses.replace(_dataset(), num_classes=count)


def test_notes_of_numpy_values_are_recorded_as_numbers(fitted):
    noted = fitted.with_record(note=np.int64(3), scale=np.float32(1.5), ids=np.array([1, 2]))
    assert noted.record["note"] == 3 and noted.record["ids"] == [1, 2]
    with pytest.raises(pg.ConfigError, match="mine"):
        fitted.with_record(mine=object())
