"""Findings of the twenty-fifth adversarial pass (an empty checkpoint folder left by a failed
run; the edge-layout messages). Each a test that failed before its fix."""

import numpy as np
import pytest
import scipy.sparse as sp

import policy_gnn_jax as pg


def test_a_failed_run_removes_the_checkpoint_folder_it_made(tmp_path, capsys):
    """Before: a run refused for memory left `ck/a/b` (and its parents) empty; --out was
    removed."""
    from policy_gnn_jax.cli import command

    argv = ["--dataset", "csbm", "--seeds", "1000000", "--out", str(tmp_path / "o"),
            "--checkpoint-dir", str(tmp_path / "ck" / "a" / "b")]  # fmt: skip
    assert command.main(argv) == 2
    assert "GiB" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def _graph(edges, **kw):
    n = 30
    rng = np.random.default_rng(1)
    return pg.from_arrays(rng.normal(size=(n, 3)), edges, rng.integers(0, 2, n), range(5),
                          range(5, 10), range(10, 30), **kw)  # fmt: skip


def test_ex2_given_a_2xe_array_names_the_layout():
    """Before: "edges must have shape [2, E], got (50, 2)": the shape after the library's own
    transpose, and no word of edges_layout."""
    edges = np.random.default_rng(0).integers(0, 30, (2, 50))
    with pytest.raises(pg.data.InvalidDatasetError, match=r"edges_layout.*\(2, 50\)"):
        _graph(edges, edges_layout="Ex2")


def test_an_unknown_edges_layout_names_the_fix():
    """Before: the message ended in ". " with no fix."""
    with pytest.raises(pg.data.InvalidDatasetError, match="Pass edges_layout="):
        _graph(np.array([[0, 1], [1, 2], [2, 3]]).T, edges_layout="2XE")


def test_a_sparse_edge_list_is_not_called_an_adjacency():
    """Before: a sparse [2, E] edge list was "an adjacency", and np.stack(adjacency.nonzero())
    was the advice: row and edge ids taken for node ids."""
    edges = sp.coo_matrix(np.random.default_rng(0).integers(0, 30, (2, 50)))
    with pytest.raises(pg.data.InvalidDatasetError) as err:
        _graph(edges)
    assert "(an adjacency)" not in str(err.value) and "edges.toarray()" in str(err.value)
