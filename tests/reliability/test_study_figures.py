"""The studies' figures: a figure is replaced only by the study that drew it, and a user's
file of the same name is kept."""

import json
import pathlib

import pytest
from reliability_helpers import ROOT
from conftest import HETEROPHILY_DIR, need

import policy_gnn_jax as pg
from policy_gnn_jax.contrib.adaptive_depth import heterophily_table
from policy_gnn_jax.contrib.reproduction import figures
from policy_gnn_jax.contrib.study_shapes import is_our_figure


def _draw(path: pathlib.Path, mark: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, _ = plt.subplots()
    figures.save_figure(fig, path, mark)
    plt.close(fig)


def test_fig1_of_another_graph_of_the_same_name_is_not_replaced_unasked(
    reproduce_module, tmp_path, monkeypatch
):
    """Before: two folders of arrays both named csbm: the second fig1 replaced the first's
    fig1_csbm.{png,json} without a word."""
    from policy_gnn_jax import data

    for where, seed in (("g", 0), ("g4", 3)):
        data.write_csbm(tmp_path / where, num_nodes=300, seed=seed, num_val=50, num_test=100)
    argv = ["fig1", "--seeds", "1", "--preset", "tiny", "--out", str(tmp_path / "f")]
    assert reproduce_module.main([*argv, "--dataset", str(tmp_path / "g")]) == 0
    first = (tmp_path / "f" / "fig1_csbm.json").read_bytes()
    assert json.loads(first)["dataset_fingerprint"]
    assert reproduce_module.main([*argv, "--dataset", str(tmp_path / "g4")]) == 2
    assert (tmp_path / "f" / "fig1_csbm.json").read_bytes() == first
    assert reproduce_module.main([*argv, "--dataset", str(tmp_path / "g")]) == 0  # its own: redrawn


def test_fig1_of_other_seeds_or_seed_mode_is_not_replaced_unasked(reproduce_module, tmp_path):
    """Before: only another graph's fig1 was refused; one of other seeds was replaced, and
    --seed-mode was not used at all."""
    need("texas")
    argv = ["fig1", "--dataset", "texas", "--data-dir", str(HETEROPHILY_DIR), "--preset", "tiny",
            "--out", str(tmp_path / "f")]  # fmt: skip
    assert reproduce_module.main([*argv, "--seeds", "1", "--seed-mode", "map"]) == 0
    saved = json.loads((tmp_path / "f" / "fig1_texas.json").read_text())
    assert saved["seed_mode"] == "map" and saved["seeds"] == 1
    assert reproduce_module.main([*argv, "--seeds", "2", "--seed-mode", "map"]) == 2
    assert json.loads((tmp_path / "f" / "fig1_texas.json").read_text()) == saved


def test_fig1_runs_a_graph_whose_name_has_a_slash_and_fewer_than_20_test_nodes(
    reproduce_module, tmp_path
):
    """Before: fig1 trained five depths and then failed on a file name with a `/` in it, and
    a graph of fewer than 20 test nodes was numpy's "Cannot take a larger sample"."""
    from policy_gnn_jax import data

    folder = tmp_path / "g"
    data.write_csbm(folder, num_nodes=300, seed=1, num_val=50, num_test=10)
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps({**meta, "name": "sub/graph"}))
    out = tmp_path / "o"
    argv = ["fig1", "--dataset", str(folder), "--seeds", "1", "--preset", "tiny",
            "--out", str(out)]  # fmt: skip
    assert reproduce_module.main(argv) == 0
    saved = json.loads((out / "fig1_sub_graph.json").read_text())
    assert len(saved["nodes"]) == 10


def test_the_heterophily_study_keeps_a_users_file_at_figure(tmp_path):
    """Before: `study --figure pic.png` replaced a user's existing pic.png, unasked."""
    from policy_gnn_jax.contrib.adaptive_depth import heterophily_table

    figure = tmp_path / "pic.png"
    figure.write_text("my holiday photo")
    with pytest.raises(pg.CheckpointError, match="pic.png"):
        heterophily_table.check_files(tmp_path / "o.json", tmp_path / "r.json", ("ego",),
                                      figure=figure)  # fmt: skip
    assert figure.read_text() == "my holiday photo"


def test_a_figure_the_library_drew_is_recognised_as_its_own(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from policy_gnn_jax.contrib.adaptive_depth import heterophily_table
    from policy_gnn_jax.contrib.reproduction import figures

    fig, _ = plt.subplots()
    mark = heterophily_table.figure_mark(tmp_path / "r.json", tmp_path / "d.png")
    figures.save_figure(fig, tmp_path / "d.png", mark)
    plt.close(fig)
    heterophily_table.check_files(tmp_path / "o.json", tmp_path / "r.json", ("ego",),
                                  figure=tmp_path / "d.png")  # fmt: skip


def test_fig1_keeps_a_lone_figure_of_its_name(reproduce_module, tmp_path, capsys):
    """Before: a fig1_<dataset>.png with no .json beside it was replaced, unasked."""
    out = tmp_path / "f"
    out.mkdir()
    (out / "fig1_csbm.png").write_text("mine")
    argv = ["fig1", "--dataset", "csbm", "--seeds", "1", "--preset", "tiny", "--out", str(out)]
    assert reproduce_module.main(argv) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "fig1_csbm.png").read_text() == "mine"


def test_the_committed_study_figure_carries_the_mark():
    """The study's default --figure is redrawn by every study: drawn without the mark, it would
    be refused as a user's file."""
    from policy_gnn_jax.contrib.adaptive_depth import heterophily_table
    from policy_gnn_jax.contrib.study_shapes import is_our_figure

    figure = ROOT / "docs" / "figures" / "heterophily_depths.png"
    results = ROOT / "docs" / "results" / "heterophily.json"  # the study's defaults
    assert is_our_figure(figure, heterophily_table.figure_mark(results, figure))


def test_a_figure_is_the_studys_own_only_if_drawn_for_that_study(tmp_path):
    """Before: every figure the library drew carried one mark, so the study replaced fig1's
    figure (or another study's) given as its --figure."""
    results = tmp_path / "r.json"
    figure = tmp_path / "d.png"
    _draw(figure, heterophily_table.figure_mark(results, figure))
    heterophily_table.check_files(tmp_path / "o.json", results, ("ego",), figure=figure)
    for other in (tmp_path / "other.json", tmp_path / "sub" / "r.json"):
        with pytest.raises(pg.CheckpointError, match="d.png"):
            heterophily_table.check_files(tmp_path / "o.json", other, ("ego",), figure=figure)
    _draw(figure, "fig1 of fig1_texas.json")
    with pytest.raises(pg.CheckpointError, match="d.png"):
        heterophily_table.check_files(tmp_path / "o.json", results, ("ego",), figure=figure)


@pytest.mark.parametrize("kind", ["to-a-study-figure", "to-nowhere", "loop"])
def test_a_figure_given_as_a_link_is_refused_and_kept(tmp_path, kind):
    """Before: the link became a plain file; the figure it named kept the old picture."""
    results, link = tmp_path / "r.json", tmp_path / "link.png"
    if kind == "to-a-study-figure":
        _draw(tmp_path / "real.png", heterophily_table.figure_mark(results, tmp_path / "real.png"))
        link.symlink_to(tmp_path / "real.png")
    elif kind == "to-nowhere":
        link.symlink_to("/nonexistent/fig.png")
    else:
        link.symlink_to(tmp_path / "loop.png")
        (tmp_path / "loop.png").symlink_to(link)
    with pytest.raises(pg.CheckpointError, match="link"):
        heterophily_table.check_files(tmp_path / "o.json", results, ("ego",), figure=link)
    assert link.is_symlink()


def test_fig1_keeps_a_users_png_beside_its_record(reproduce_module, tmp_path, capsys):
    """Before: a user's own fig1_<dataset>.png beside a matching .json was replaced."""
    out = tmp_path / "f"
    argv = ["fig1", "--dataset", "csbm", "--seeds", "1", "--preset", "tiny", "--out", str(out)]
    assert reproduce_module.main(argv) == 0
    assert is_our_figure(out / "fig1_csbm.png", "fig1 of fig1_csbm.json")
    (out / "fig1_csbm.png").write_bytes(b"\x89PNG my polished version")
    assert reproduce_module.main(argv) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "fig1_csbm.png").read_bytes() == b"\x89PNG my polished version"
