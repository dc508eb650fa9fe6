"""Graphs handed to the library (arrays, a jraph GraphsTuple, folders of arrays): what would
be read wrongly or wrap silently is refused or warned about, naming the fix."""

import dataclasses
import warnings

import jax.numpy as jnp
import jraph
import numpy as np
import pytest
import scipy.sparse as sp
from reliability_helpers import path_graph_arrays

import policy_gnn_jax as pg
from policy_gnn_jax import data
from policy_gnn_jax.data import heterophily


def _graphs_tuple(**changes):
    x = np.eye(4, dtype=np.float32)
    fields = dict(nodes=x, edges=None, senders=np.array([0, 1, 2]), receivers=np.array([1, 2, 3]),
                  n_node=np.array([4]), n_edge=np.array([3]), globals=None)  # fmt: skip
    return jraph.GraphsTuple(**{**fields, **changes})


def _arrays_of_rows(num_rows=10):
    features = np.random.default_rng(0).random((num_rows, 4)).astype(np.float32)
    labels = np.arange(10) % 2
    edges = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    return features, edges, labels


SPLITS = dict(train_index=[0, 1], val_index=[2, 3], test_index=[4, 5])


def _path_graphs_tuple(n=6, **kw):
    senders = jnp.arange(n - 1)
    receivers = jnp.arange(1, n)
    return jraph.GraphsTuple(nodes=jnp.eye(n, 4), edges=None, senders=senders,
                             receivers=receivers, n_node=jnp.array([n]),
                             n_edge=jnp.array([n - 1]), globals=None, **kw)  # fmt: skip


def _arrays_with_first_feature(first_feature):
    rng = np.random.default_rng(0)
    n = 60
    x = np.zeros((n, 2), np.asarray(first_feature).dtype)
    x[:, 0] = first_feature
    x[:, 1] = 3
    ring = np.stack([np.arange(n), (np.arange(n) + 1) % n])
    edges = np.concatenate([ring, ring[::-1]], axis=1)  # both directions: no warning of its own
    labels = rng.integers(0, 2, n)
    labels[:4] = [0, 1, 0, 1]
    return x, edges, labels, np.arange(0, 10), np.arange(10, 30), np.arange(30, 60)


def _graph_of_features(features):
    return pg.from_arrays(features, [[0, 1, 2], [1, 2, 3]], np.arange(60) % 2, [0, 1], [2, 3],
                          [4, 5], symmetrise=True)  # fmt: skip


def _graph_of_edges(edges, **kw):
    n = 30
    rng = np.random.default_rng(1)
    return pg.from_arrays(rng.normal(size=(n, 3)), edges, rng.integers(0, 2, n), range(5),
                          range(5, 10), range(10, 30), **kw)  # fmt: skip


def test_labels_are_range_checked_when_num_classes_is_given():
    """With num_classes=2, a label 2**32 + 1 is refused by the range check, not stored as 1."""
    labels = np.arange(60, dtype=np.int64) % 2
    labels[3] = 2**32 + 1
    with pytest.raises(pg.InvalidDatasetError, match=str(2**32 + 1)):
        pg.from_arrays(np.ones((60, 2)), [[0, 1, 2], [1, 2, 3]], labels, [0, 1], [2, 3],
                       [4, 5], num_classes=2)  # fmt: skip
    labels = labels.astype(np.uint64)
    labels[3] = 2**64 - 2
    with pytest.raises(pg.InvalidDatasetError, match=str(2**64 - 2)):
        pg.from_arrays(np.ones((60, 2)), [[0, 1, 2], [1, 2, 3]], labels, [0, 1], [2, 3],
                       [4, 5], num_classes=2)  # fmt: skip


def test_int_features_that_float32_rounds_are_counted():
    features = np.ones((60, 2), dtype=np.int64)
    features[0, 0] = 2**24 + 1
    with pytest.warns(UserWarning, match="1 feature value"):
        pg.from_arrays(features, [[0, 1, 2], [1, 2, 3]], np.arange(60) % 2, [0, 1], [2, 3], [4, 5])


def test_a_heterophily_file_is_checked_like_from_arrays(tmp_path):
    """A heterophily file is checked like from_arrays: a label beyond int32 would overflow inside
    JAX, and 1e39 features would be called NaN."""

    n = 6
    masks = np.zeros((1, n), bool)
    arrays = dict(
        node_features=np.ones((n, 2), np.float64),
        node_labels=np.array([0, 1, 0, 1, 0, 1], np.int64),
        edges=np.array([[0, 1], [2, 3], [4, 5]], np.int64),
        train_masks=masks.copy(), val_masks=masks.copy(), test_masks=masks.copy(),
    )  # fmt: skip
    arrays["train_masks"][0, :2] = arrays["val_masks"][0, 2:4] = arrays["test_masks"][0, 4:] = 1
    labels = arrays["node_labels"].copy()
    labels[5] = 2**32 + 1
    np.savez(tmp_path / "a.npz", **{**arrays, "node_labels": labels})
    with pytest.raises(pg.DataError, match=str(2**32 + 1)):
        heterophily.load_heterophily(str(tmp_path / "a.npz"))
    features = arrays["node_features"].copy()
    features[0, 0] = 1e39
    np.savez(tmp_path / "b.npz", **{**arrays, "node_features": features})
    with pytest.raises(pg.DataError, match="float32"):
        heterophily.load_heterophily(str(tmp_path / "b.npz"))


def test_roc_auc_needs_both_classes_in_every_split():
    """ROC AUC needs both classes in every split: a test split of one class would record a ROC AUC
    of 0.5."""
    ds = data.make_csbm(num_nodes=1600, num_classes=2, seed=1)
    labels = ds.labels.copy()
    labels[ds.test_index] = 0
    with pytest.raises(pg.InvalidDatasetError, match="the test nodes are all of class 0"):
        dataclasses.replace(ds, labels=labels, metric="roc_auc")


@pytest.mark.parametrize(
    "graph, message",
    [
        (_graphs_tuple(n_edge=np.array([5])), "n_edge says"),
        (_graphs_tuple(n_node=np.array([4.0])), "n_node must hold whole numbers"),
        ((1, 2), "must be a jraph.GraphsTuple"),
        (None, "must be a jraph.GraphsTuple"),
        (_graphs_tuple(n_node=None), "must be a jraph.GraphsTuple"),
    ],
)
def test_a_bad_graphs_tuple_is_named(graph, message):
    with pytest.raises(pg.InvalidDatasetError, match=message):
        pg.from_jraph(graph, np.array([0, 1, 0, 1]), [0], [1], [2, 3])


def test_a_graphs_tuple_with_two_edges_is_read_as_senders_and_receivers():
    """A GraphsTuple's senders and receivers say their layout: two edges are two edges, not an
    ambiguous 2x2 array (found by an independent tester)."""
    two = dict(senders=np.array([0, 1]), n_edge=np.array([2]))
    ds = pg.from_jraph(_graphs_tuple(**two, receivers=np.array([1, 0])), np.array([0, 1, 0, 1]),
                       [0], [1], [2, 3])  # fmt: skip
    assert ds.edges.tolist() == [[1, 0], [0, 1]]
    outside = _graphs_tuple(**two, receivers=np.array([1, 9]))
    with pytest.raises(pg.InvalidDatasetError, match="must lie in 0..3, got 9"):
        pg.from_jraph(outside, np.array([0, 1, 0, 1]), [0], [1], [2, 3])


def test_features_with_fewer_rows_than_labels_name_both_counts():
    """Features with fewer rows than labels name both counts, not "labels must be integers of shape
    (8,)", as if the labels were wrong."""
    features, edges, labels = _arrays_of_rows()
    with pytest.raises(pg.InvalidDatasetError, match="features have 8 rows but labels has 10"):
        pg.from_arrays(features[:8], edges, labels, **SPLITS)


def test_bfloat16_features_are_taken():
    """bfloat16 features (numpy has no such type; JAX's ml_dtypes does) are taken, not called "not
    numeric"."""
    features, edges, labels = _arrays_of_rows()
    half = jnp.asarray(features, dtype=jnp.bfloat16)
    ds = pg.from_arrays(half, edges, labels, **SPLITS)
    want = np.asarray(half.astype(jnp.float32))
    np.testing.assert_array_equal(ds.features.toarray(), want)


def test_a_sparse_adjacency_passed_as_edges_is_named():
    """A sparse adjacency passed as edges is named as such, not "edges must have shape [2, E], got
    ()"."""
    features, edges, labels, splits = path_graph_arrays()
    adjacency = sp.coo_matrix((np.ones(edges.shape[1]), tuple(edges)), shape=(60, 60))
    with pytest.raises(pg.InvalidDatasetError, match="sparse 60x60 matrix.*nonzero"):
        pg.from_arrays(features, adjacency, labels, **splits)


def test_a_graphs_tuple_without_nodes_says_so():
    """A GraphsTuple without nodes says graph.nodes is None, not "n_node says 60 nodes, but nodes
    has 0 rows"."""
    features, edges, labels, splits = path_graph_arrays()
    g = jraph.GraphsTuple(nodes=None, edges=None, senders=edges[0], receivers=edges[1],
                          globals=None, n_node=np.array([60]), n_edge=np.array([59]))  # fmt: skip
    with pytest.raises(pg.InvalidDatasetError, match="graph.nodes is None"):
        pg.from_jraph(g, labels, **splits)


def test_a_graphs_tuples_globals_are_said_to_be_unused():
    """A GraphsTuple's globals are said to be unused (as edge features are), not dropped without a
    word."""
    labels = np.arange(6) % 2
    g = _path_graphs_tuple()._replace(globals=jnp.ones((1, 3)))
    with pytest.warns(UserWarning, match="globals"):
        pg.from_jraph(g, labels, train_index=[0, 1], val_index=[2, 3], test_index=[4, 5])


def test_a_padded_graphs_tuple_names_the_unpadding():
    """A padded GraphsTuple's hint names the unpadding (unpad_with_graphs), not jraph.unbatch, which
    does not remove padding."""
    padded = jraph.pad_with_graphs(_path_graphs_tuple(), n_node=8, n_edge=8, n_graph=2)
    with pytest.raises(pg.InvalidDatasetError, match="unpad_with_graphs"):
        pg.from_jraph(padded, np.arange(8) % 2, train_index=[0, 1], val_index=[2, 3],
                      test_index=[4, 5])  # fmt: skip


@pytest.mark.parametrize(
    "value", [np.int64(2**55 + 1), np.int64(2**63 - 1), np.uint64(2**64 - 1), np.int64(2**40 + 1)]
)
def test_integer_features_that_float32_rounds_are_warned_about_however_large(value):
    """Integer features float32 rounds are warned about however large: beyond 2**53 a check through
    float64 rounds too and sees no change, and 2**55 + 1 would be stored as 2**55 without a word."""
    x, edges, labels, tr, va, te = _arrays_with_first_feature(value)
    with pytest.warns(UserWarning, match="60 feature value"):
        pg.from_arrays(x, edges, labels, tr, va, te, name="big")


def test_integer_features_that_float32_holds_are_not_warned_about():
    x, edges, labels, tr, va, te = _arrays_with_first_feature(np.int64(2**55))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pg.from_arrays(x, edges, labels, tr, va, te, name="exact")


def test_a_stray_uint8_label_is_named_with_the_classes_it_would_make():
    """Label 255 in uint8 is named with the 256 classes it would make, not "would make 0 classes"
    with numpy's overflow warning."""
    x, edges, labels, tr, va, te = _arrays_with_first_feature(np.int64(1))
    labels = labels.astype(np.uint8)
    labels[-1] = 255
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(pg.InvalidDatasetError, match="would make 256 classes"):
            pg.from_arrays(x, edges, labels, tr, va, te, name="u8")


@pytest.mark.parametrize("big", [2**63 + 5, -(2**24) - 1, 2**53 + 1])
def test_python_integers_that_float32_rounds_are_counted_in_a_list_too(big):
    """A list holding 2**63+5 beside a float is counted in the warning: numpy makes it float64, and
    the +5 would be lost with no warning, while an int64 array of the same value is counted."""
    rows = [[1.5, 1] for _ in range(60)]
    rows[0][1] = big
    args = ([[0, 1, 2], [1, 2, 3]], np.arange(60) % 2, [0, 1], [2, 3], [4, 5])
    with pytest.warns(UserWarning, match="1 feature value"):
        pg.from_arrays(rows, *args)


def test_masked_features_are_refused(tmp_path):
    """Masked features are refused: the mask would be dropped and the masked values used as
    features."""
    features = np.ma.masked_array(np.ones((60, 2)), mask=np.zeros((60, 2), bool))
    features.mask[0, 0] = True
    with pytest.raises(pg.data.InvalidDatasetError, match="masked"):
        _graph_of_features(features)


def test_whole_float64_numbers_float32_rounds_are_counted():
    """2.0**24 + 1 as float64 is counted in the warning, as the same value as an int64 is: float32
    makes it 16777216."""
    features = np.ones((60, 2))
    features[0, 0] = 2.0**24 + 1
    with pytest.warns(UserWarning, match="1 feature value"):
        _graph_of_features(features)


def test_a_benchmark_files_edge_id_beyond_its_nodes_is_named(tmp_path):
    """A benchmark file's edge id beyond its nodes is named (4294967299), not "edge endpoint outside
    0..182" without the id."""
    with pytest.raises(pg.data.InvalidDatasetError, match="4294967299"):
        pg.data.symmetric_edges(np.array([2**32 + 3, 1]), np.array([0, 2]), 183)


def test_float16_features_give_no_overflow_warning():
    """float16 features give no numpy "overflow encountered in cast" (2**24 compared as a
    float16)."""
    features = np.ones((60, 2), dtype=np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        pg.from_arrays(features, [[0, 1, 2], [1, 2, 3]], np.arange(60) % 2, [0, 1], [2, 3],
                       [4, 5], symmetrise=True)  # fmt: skip


def test_ex2_given_a_2xe_array_names_the_layout():
    """edges_layout="Ex2" given a 2xE array names edges_layout and the shape as given, not "edges
    must have shape [2, E], got (50, 2)", the shape after the library's own transpose."""
    edges = np.random.default_rng(0).integers(0, 30, (2, 50))
    with pytest.raises(pg.data.InvalidDatasetError, match=r"edges_layout.*\(2, 50\)"):
        _graph_of_edges(edges, edges_layout="Ex2")


def test_an_unknown_edges_layout_names_the_fix():
    """An unknown edges_layout names the fix ("Pass edges_layout="), not a message that ends in ". "
    with no fix."""
    with pytest.raises(pg.data.InvalidDatasetError, match="Pass edges_layout="):
        _graph_of_edges(np.array([[0, 1], [1, 2], [2, 3]]).T, edges_layout="2XE")


def test_a_sparse_edge_list_is_not_called_an_adjacency():
    """A sparse [2, E] edge list is not called "an adjacency" with np.stack(adjacency.nonzero()) as
    the advice: that would take row and edge ids for node ids."""
    edges = sp.coo_matrix(np.random.default_rng(0).integers(0, 30, (2, 50)))
    with pytest.raises(pg.data.InvalidDatasetError) as err:
        _graph_of_edges(edges)
    assert "(an adjacency)" not in str(err.value) and "edges.toarray()" in str(err.value)
