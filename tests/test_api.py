"""The public API on a user's own graph: from_arrays / from_jraph, fit, predict, save and load."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import policy_gnn_jax as pg
from policy_gnn_jax import data, graph


def _two_community_arrays(seed=0, n=120):
    """A small homophilous graph from plain NumPy: two classes, features hint at the class."""
    rng = np.random.default_rng(seed)
    labels = (np.arange(n) >= n // 2).astype(np.int64)
    features = rng.normal(size=(n, 8)) + labels[:, None] * 0.8
    same = rng.integers(0, n, (2, 3 * n))
    same = same[:, labels[same[0]] == labels[same[1]]]
    cross = rng.integers(0, n, (2, n // 4))
    edges = np.concatenate([same, cross], axis=1)  # directed, unsorted, with duplicates/loops
    order = rng.permutation(n)
    return features, edges, labels, order[:20], order[20:60], order[60:]


@pytest.fixture(scope="module")
def fitted():
    """The README example, as written there."""
    features, edges, labels, train, val, test = _two_community_arrays()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = pg.from_arrays(features, edges, labels, train, val, test, name="toy")
    config = pg.Config.tiny(num_episodes=6, episodes_per_call=4)
    return ds, pg.fit(ds, config, seeds=3, progress=False)


def test_readme_example_fit_record_and_predictions(fitted):
    ds, fit = fitted
    record = fit.record
    for field in ("dataset", "method", "config", "seeds", "test_metric", "val_metric"):
        assert field in record
    assert record["dataset"] == "toy" and record["seeds"] == 3
    assert len(record["val_metric_curve"]["per_seed"][0]) == 6  # exactly the episodes asked
    depths = fit.predict_depths(ds.test_index)
    classes = fit.predict(ds.test_index)
    assert depths.shape == classes.shape == (3, len(ds.test_index))
    assert depths.min() >= fit.config.min_depth and depths.max() <= fit.config.max_depth
    # The selected snapshots reproduce the honest evaluation exactly (an independent recompute).
    np.testing.assert_array_equal(depths, np.array(record["test_depths"]))
    accuracy = (classes == ds.labels[ds.test_index]).mean(1)
    np.testing.assert_allclose(accuracy, record["test_metric"]["per_seed"], atol=1e-6)


def test_save_and_load_give_identical_predictions(fitted, tmp_path):
    ds, fit = fitted
    fit.save(tmp_path / "fit")
    loaded = pg.load(tmp_path / "fit")
    nodes = np.arange(ds.num_nodes)
    np.testing.assert_array_equal(loaded.predict_depths(nodes), fit.predict_depths(nodes))
    np.testing.assert_array_equal(loaded.predict(nodes), fit.predict(nodes))
    assert loaded.record == fit.record and loaded.config == fit.config


def test_random_policy_and_fixed_depth_fits_predict_their_own_evaluation():
    features, edges, labels, train, val, test = _two_community_arrays(seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = pg.from_arrays(features, edges, labels, train, val, test)
    for method in ("random", "gcn"):
        fit = pg.fit(
            ds, pg.Config.tiny(num_episodes=2, epochs=10), method=method, seeds=2, progress=False
        )
        accuracy = (fit.predict(ds.test_index) == ds.labels[ds.test_index]).mean(1)
        np.testing.assert_allclose(accuracy, fit.record["test_metric"]["per_seed"], atol=1e-6)


def test_predict_refuses_bad_nodes(fitted):
    _, fit = fitted
    with pytest.raises(ValueError, match="node id 10000, outside 0..119"):
        fit.predict(np.array([0, 10_000]))
    with pytest.raises(ValueError, match="1-D array of node ids"):
        fit.predict_depths(np.array([0.5]))


def _directed_path(n=7):
    s = np.arange(n - 1)
    return np.eye(n, dtype=np.float32), np.stack([s, s + 1])


def test_directed_graph_is_symmetrised_and_gradients_match_autodiff(key):
    features, edges = _directed_path()
    n = features.shape[0]
    labels = np.arange(n) % 2
    with pytest.warns(UserWarning, match=r"added 6 reverse edges"):
        ds = pg.from_arrays(features, edges, labels, [0, 1], [2, 3], [4, 5, 6])
    g = graph.from_dataset(ds)
    # Dense reference Â of the undirected path, and autodiff through it.
    a = np.zeros((n, n))
    a[edges[0], edges[1]] = a[edges[1], edges[0]] = 1
    a += np.eye(n)
    d = a.sum(1) ** -0.5
    a_hat = jnp.asarray(d[:, None] * a * d[None, :], jnp.float32)
    h = jax.random.normal(key, (n, 3))
    c = jax.random.normal(jax.random.fold_in(key, 1), (n, 3))
    got = jax.grad(lambda x: jnp.sum(graph.propagate(g, x) * c))(h)
    want = jax.grad(lambda x: jnp.sum((a_hat @ x) * c))(h)
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_directed_graph_is_refused_without_symmetrise():
    features, edges = _directed_path()
    with pytest.raises(ValueError, match="directed"):
        pg.from_arrays(features, edges, np.zeros(7, int), [0], [1], [2], symmetrise=False)


def test_hand_built_directed_dataset_is_refused():
    """The original failure: a Dataset built by hand with directed edges trained silently."""
    features, edges = _directed_path()
    with pytest.raises(ValueError, match="directed"):
        data.Dataset(
            "bad",
            data.row_normalise(features_csr(features)),
            np.zeros(7, np.int32),
            edges.astype(np.int32),
            np.array([0], np.int32),
            np.array([1], np.int32),
            np.array([2], np.int32),
            2,
        )


def features_csr(x):
    import scipy.sparse as sp

    return sp.csr_matrix(x)


def test_unsorted_duplicate_edges_give_the_same_dataset():
    features, edges, labels, train, val, test = _two_community_arrays(seed=1)
    shuffled = edges[:, np.random.default_rng(0).permutation(edges.shape[1])]
    reversed_ = edges[::-1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = pg.from_arrays(features, edges, labels, train, val, test)
        b = pg.from_arrays(features, shuffled, labels, train, val, test)
        c = pg.from_arrays(features, reversed_, labels, train, val, test)
    assert a.fingerprint() == b.fingerprint() == c.fingerprint()
    s, r = a.edges.astype(np.int64)
    assert np.all(np.diff(r * a.num_nodes + s) > 0)  # receiver-sorted, no duplicates


@pytest.mark.parametrize("nodes", [None, {"x": np.zeros((5, 3))}, np.zeros(5)])
def test_a_graphs_tuple_without_a_feature_matrix_is_named(small_dataset, nodes):
    """A built-in backbone given a GraphsTuple whose nodes are not an [N, F] array says so,
    not a JAX error about None or a dict."""
    config = pg.Config.tiny()
    graph = pg.graph.from_dataset(small_dataset)
    backbone = pg.make_backbone(config, graph, 1, config.max_depth)
    params = backbone.init(jax.random.key(0), graph)
    bad = small_dataset.to_jraph()._replace(nodes=nodes)
    with pytest.raises(ValueError, match=r"GraphsTuple's nodes must be the \[N, F\] features"):
        backbone.logits(params, bad, None)


@pytest.mark.parametrize("field", ["senders", "receivers"])
def test_a_graphs_tuple_edge_to_a_node_it_lacks_is_named(small_dataset, field):
    """An edge id outside 0..N-1 would be dropped or clamped by the sparse product without a
    word: refused where the ids are known (outside jit), naming the field."""
    config = pg.Config.tiny()
    graph = pg.graph.from_dataset(small_dataset)
    backbone = pg.make_backbone(config, graph, 1, config.max_depth)
    params = backbone.init(jax.random.key(0), graph)
    good = small_dataset.to_jraph()
    ids = np.asarray(getattr(good, field)).copy()
    ids[0] = small_dataset.num_nodes
    with pytest.raises(ValueError, match=rf"GraphsTuple's {field} hold node id {ids[0]}"):
        backbone.logits(params, good._replace(**{field: ids}), None)


def test_jraph_round_trip(small_dataset):
    g = small_dataset.to_jraph()
    back = pg.from_jraph(
        g,
        small_dataset.labels,
        small_dataset.train_index,
        small_dataset.val_index,
        small_dataset.test_index,
        name=small_dataset.name,
    )
    assert back.fingerprint() == small_dataset.fingerprint()


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: a.update(features=np.where(np.eye(120, 8) > 0, np.nan, a["features"])), "NaN"),
        (
            lambda a: a.update(labels=np.where(np.arange(120) == 3, 7, a["labels"]), num_classes=2),
            "node 3 has label 7, not below num_classes 2",
        ),
        (lambda a: a.update(val_index=a["train_index"][:5]), "overlaps"),
        (lambda a: a.update(test_index=np.array([], np.int64)), "non-empty"),
        (lambda a: a.update(edges=np.array([[0, 1, 2], [1, 500, 3]])), "lie in"),
        (lambda a: a.update(train_index=np.arange(120) < 5), "boolean mask"),
        (lambda a: a.update(labels=np.where(a["labels"] == 0, -1, a["labels"])), "no label"),
        (lambda a: a.update(labels=a["labels"][:50]), "but labels has 50 entries"),
        (lambda a: a.update(train_index=np.array([0, 0, 1])), "repeats"),
    ],
)
def test_from_arrays_refuses_bad_input_with_a_named_problem(change, message):
    features, edges, labels, train, val, test = _two_community_arrays()
    arrays = dict(
        features=features,
        edges=edges,
        labels=labels,
        train_index=train,
        val_index=val,
        test_index=test,
    )
    change(arrays)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=message):
            pg.from_arrays(**arrays)


def test_the_readme_example_runs_as_written_twice_in_a_row(tmp_path, monkeypatch):
    """The Python block of README "Use it on your own graph", executed verbatim, twice in one
    folder, as a reader runs it again: the second run replaces the first one's saved fit."""
    from conftest import ROOT

    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- README-EXAMPLE")[1].split("```python\n")[1].split("```")[0]
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        scope = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(block, "README.md", "exec"), scope)  # noqa: S102
    fit, ds, same = scope["fit"], scope["ds"], scope["same"]
    assert scope["depths"].shape == scope["classes"].shape == (3, len(ds.test_index))
    accuracy = (scope["classes"] == ds.labels[ds.test_index]).mean(1)
    np.testing.assert_allclose(accuracy, fit.record["test_metric"]["per_seed"], atol=1e-6)
    np.testing.assert_array_equal(same.predict(ds.test_index), scope["classes"])
    assert (tmp_path / "my_fit" / "results.json").is_file()
