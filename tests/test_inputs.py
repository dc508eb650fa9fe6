"""Nothing wrapped: every input is checked as given, before any cast, so no value silently becomes
another; a value of the wrong type is one clear error, not a TypeError from inside JAX."""

import warnings

import numpy as np
import pytest

import policy_gnn_jax as pg
from policy_gnn_jax import cli

N = 60


def _arrays(**changes):
    rng = np.random.default_rng(0)
    labels = np.arange(N) % 2
    arrays = dict(
        features=rng.normal(size=(N, 4)) + labels[:, None],
        edges=np.stack([np.arange(N - 1), np.arange(1, N)]),
        labels=labels,
        train_index=np.arange(10),
        val_index=np.arange(10, 30),
        test_index=np.arange(30, 60),
    )
    arrays.update(changes)
    return arrays


def _build(**changes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pg.from_arrays(**_arrays(**changes))


@pytest.mark.parametrize(
    "split, value", [("train_index", 2**32 + 5), ("val_index", -(2**31) - 1), ("test_index", 2**40)]
)
def test_split_ids_beyond_int32_are_refused_with_the_value(split, value):
    """Split ids beyond int32 are refused with the value: a cast ahead of the range check would
    store 2**32 + 40 as 40."""
    ids = dict(train_index=np.arange(10), val_index=np.arange(10, 30), test_index=np.arange(30, 60))
    ids[split] = np.array([*ids[split][:-1], value], dtype=np.int64)
    with pytest.raises(pg.InvalidDatasetError, match=str(value)):
        _build(**ids)


def test_labels_beyond_int32_are_refused_with_the_value():
    """Labels beyond int32 are refused with the value: a label 2**32 + 1 would train as class 1,
    with num_classes 4294967298."""
    labels = np.arange(N, dtype=np.int64) % 2
    labels[3] = 2**32 + 1
    with pytest.raises(pg.InvalidDatasetError, match=str(2**32 + 1)):
        _build(labels=labels)


def test_a_stray_label_on_an_unlabelled_node_is_named():
    """A stray label on a node in no split is named: a label of 10**9 would make 10**9 + 1 classes,
    and the run would fail with "use at most 0 seeds"."""
    labels = np.arange(N, dtype=np.int64) % 2
    labels[59] = 10**9
    with pytest.raises(pg.InvalidDatasetError, match=r"node 59.*1000000000") as caught:
        _build(labels=labels, test_index=np.arange(30, 59))
    assert "num_classes" in str(caught.value)


def test_features_below_float32_are_counted_in_a_warning():
    """Features float32 rounds to 0 (1e-50) are counted in a warning, not zeroed silently."""
    features = _arrays()["features"]
    features[:2, 0] = 1e-50
    with pytest.warns(UserWarning, match=r"2 feature values .* become 0 in float32"):
        pg.from_arrays(**_arrays(features=features))


def test_features_above_float32_are_refused_as_such():
    """1e39 is refused as beyond float32's range, not reported as "features contain NaN or inf"."""
    features = _arrays()["features"]
    features[5, 1] = 1e39
    with pytest.raises(pg.InvalidDatasetError, match=r"1 feature value.*float32's range") as c:
        _build(features=features)
    assert "NaN" not in str(c.value)


def test_complex_features_are_refused():
    """Complex features are refused: the imaginary part would be dropped with only numpy's
    warning."""
    features = _arrays()["features"].astype(complex)
    features[0, 0] += 1j
    with pytest.raises(pg.InvalidDatasetError, match="complex"):
        _build(features=features)


def test_a_square_edge_array_needs_its_layout():
    """A square edge array needs its layout: a 2x2 array meant as [E, 2] would be read as [2, E]."""
    edges = np.array([[0, 1], [2, 3]])  # meant as edges 0-1 and 2-3
    with pytest.raises(pg.InvalidDatasetError, match="edges_layout"):
        _build(edges=edges)
    ds = _build(edges=edges, edges_layout="Ex2")
    assert {tuple(e) for e in ds.edges.T} == {(0, 1), (1, 0), (2, 3), (3, 2)}
    ds = _build(edges=edges, edges_layout="2xE")
    assert {tuple(e) for e in ds.edges.T} == {(0, 2), (2, 0), (1, 3), (3, 1)}


def test_an_ex2_edge_array_is_refused_with_the_fix():
    edges = np.stack([np.arange(N - 1), np.arange(1, N)]).T  # [E, 2]
    with pytest.raises(pg.InvalidDatasetError, match='edges_layout="Ex2"'):
        _build(edges=edges)


@pytest.mark.parametrize("value", [2.7, "2", True])
def test_num_classes_must_be_a_whole_number(value):
    with pytest.raises(pg.InvalidDatasetError, match="num_classes"):
        pg.from_arrays(**_arrays(), num_classes=value)


def test_an_empty_graph_is_one_clear_error():
    with pytest.raises(pg.InvalidDatasetError, match="no nodes"):
        pg.from_arrays(np.zeros((0, 4)), np.zeros((2, 0), int), np.zeros(0, int), [], [], [])


def test_a_graphs_tuple_that_disagrees_with_itself_is_refused():
    import jraph

    g = _build().to_jraph()
    wrong_count = g._replace(n_node=np.array([N + 5]))
    with pytest.raises(pg.InvalidDatasetError, match="n_node"):
        pg.from_jraph(
            wrong_count, **{k: v for k, v in _arrays().items() if "index" in k or k == "labels"}
        )
    uneven = g._replace(senders=g.senders[:-1])
    with pytest.raises(pg.InvalidDatasetError, match="senders"):
        pg.from_jraph(
            uneven, **{k: v for k, v in _arrays().items() if "index" in k or k == "labels"}
        )
    assert isinstance(g, jraph.GraphsTuple)


@pytest.mark.parametrize(
    "field, value",
    [
        ("hidden", 16.5),
        ("hidden", "16"),
        ("num_episodes", 1.5),
        ("replay_capacity", 10**12),
        ("buffer_size", 10**10),
        ("audit", 1),
        ("gamma", "0.9"),
        ("fanouts", (10, 2.5)),
        ("q_hidden", [32, 32]),
    ],
)
def test_config_fields_are_type_and_range_checked(field, value):
    """Config fields are type- and range-checked when built, not left to a TypeError / OverflowError
    from inside JAX, after compiling."""
    with pytest.raises(pg.ConfigError, match=field):
        pg.Config(**{field: value})


def test_ints_are_accepted_where_floats_are_meant():
    assert pg.Config(gamma=0, q_lr=1).q_lr == 1.0


def test_a_huge_buffer_on_the_command_line_is_one_error(capsys, tmp_path):
    code = cli.main(["--buffer-size", "10000000000", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "buffer_size" in err


@pytest.mark.parametrize("every", [0, -1, 1.5])
def test_checkpoint_every_is_checked_before_training(every, tmp_path):
    """checkpoint_every is checked ahead of training: 0 would raise ZeroDivisionError after the
    first chunk had trained, and -1 would be accepted."""
    with pytest.raises(pg.ConfigError, match="checkpoint_every"):
        pg.fit(_build(), pg.Config.tiny(), checkpoint_dir=tmp_path, checkpoint_every=every)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(config={"hidden": 8}), "config must be a policy_gnn_jax.Config"),
        (dict(seeds=True), "seeds"),
        (dict(seeds=2.0), "seeds"),
        (dict(seed="0"), "seed"),
        (dict(progress="no"), "progress"),
    ],
)
def test_fit_checks_its_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        pg.fit(_build(), **kwargs)


def test_fit_takes_numpy_bools_for_progress():
    """fit takes progress=np.False_ rather than refuse it as "must be True or False"."""
    fit = pg.fit(_build(), pg.Config.tiny(epochs=1), method="gcn", seeds=1, progress=np.False_)
    assert fit.record["seeds"] == 1


def test_fit_of_no_dataset_is_one_clear_error():
    with pytest.raises(pg.InvalidDatasetError, match="dataset must be a policy_gnn_jax.Dataset"):
        pg.fit(None)


def test_csbm_seed_errors_name_the_flag(capsys, tmp_path):
    code = cli.main(["--dataset", "csbm", "--csbm-seed", "-1", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "--csbm-seed" in err


def test_huge_features_are_named_when_training_diverges():
    """Features near 2e38 are named when training diverges, not met with "lower the GCN learning
    rate", the wrong fix."""
    features = _arrays()["features"]
    features[:, 0] = 2e38
    ds = _build(features=features)
    with pytest.raises(pg.DivergenceError, match="features"):
        pg.fit(ds, pg.Config.tiny(epochs=3), method="gcn", seeds=1, progress=False)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(source=None), "source must be a string"),
        (dict(split="x"), "split must be None or a whole number"),
        (dict(split=-5), "split must be None or a whole number"),
        (dict(split=2.5), "split must be None or a whole number"),
        (dict(name=None), "name must be a non-empty string"),
        (dict(name="\x00"), "name must be a non-empty string"),
        (dict(name="cora\x00"), "name contains a NUL character"),
        (dict(source="/tmp\x00"), "source contains a NUL character"),
        (dict(split=2**70), "split must be None or a whole number"),
    ],
)
def test_a_dataset_description_that_cannot_be_saved_is_refused_up_front(change, message):
    """A dataset description that cannot be saved is refused up front: such a dataset would train
    and save, then its fit would not load (or the record could not be written after training)."""
    import dataclasses

    with pytest.raises(pg.InvalidDatasetError, match=message):
        dataclasses.replace(_build(), **change)


def test_from_arrays_refuses_a_bad_name_before_repairing_the_edges():
    """A name that cannot be saved is refused first: not after a warning that the edges were
    repaired, nor hidden behind another problem of the arrays (NaN features)."""
    arrays = _arrays()  # its edges are directed: they would be symmetrised, with a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a repair warning first fails the test
        with pytest.raises(pg.InvalidDatasetError, match="name must be a non-empty string"):
            pg.from_arrays(**arrays, name="")
    arrays["features"][0, 0] = np.nan
    with pytest.raises(pg.InvalidDatasetError, match="name must be a non-empty string"):
        pg.from_arrays(**arrays, name=None)


def test_a_numpy_split_and_a_path_source_round_trip_through_a_saved_fit(tmp_path):
    import dataclasses
    import pathlib

    ds = dataclasses.replace(_build(), split=np.int64(3), source=pathlib.Path(tmp_path))
    fit = pg.fit(ds, pg.Config.tiny(epochs=1), method="gcn", seeds=1, progress=False)
    assert (fit.record["split"], fit.record["data_source"]) == (3, str(tmp_path))
    fit.save(tmp_path / "f")
    loaded = pg.load(tmp_path / "f")
    assert (loaded.dataset.split, loaded.dataset.source) == (3, str(tmp_path))
