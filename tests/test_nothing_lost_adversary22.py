"""Findings of the twenty-fourth adversarial pass (figures drawn by another command, loops of
links in paths, a JAX setting that forbids transfers, a figure given as a link). Each a test
that failed before its fix."""

import pathlib
import warnings

import jax
import numpy as np
import pytest
from test_heterophily import HETEROPHILY_DIR, _need

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


def test_a_jax_setting_that_forbids_transfers_is_refused(tmp_path, capsys):
    """Before: JAX_TRANSFER_GUARD=disallow gave a JaxRuntimeError traceback from inside JAX,
    exit 1, and left an empty --out."""
    from policy_gnn_jax.cli import command

    jax.config.update("jax_transfer_guard", "disallow")
    try:
        argv = ["--dataset", "csbm", "--seeds", "1", "--method", "gcn", "--epochs", "1"]
        assert command.main([*argv, "--out", str(tmp_path / "o")]) == 2
    finally:
        jax.config.update("jax_transfer_guard", "allow")
    assert "JAX_TRANSFER_GUARD" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def _loop(tmp_path) -> pathlib.Path:
    (tmp_path / "loopA").symlink_to(tmp_path / "loopB")
    (tmp_path / "loopB").symlink_to(tmp_path / "loopA")
    return tmp_path / "loopA"


def test_a_loop_of_links_as_the_checkpoint_folder_is_one_error(tmp_path, capsys):
    from policy_gnn_jax.cli import command

    loop = _loop(tmp_path)
    argv = ["--dataset", "csbm", "--seeds", "1", "--method", "gcn", "--epochs", "1"]
    assert command.main([*argv, "--out", str(tmp_path / "o"), "--checkpoint-dir", str(loop)]) == 2
    assert "loop" in capsys.readouterr().err


def test_a_loop_of_links_under_a_merged_file_is_one_error(experiment, reproduce_module, tmp_path,
                                                          capsys):  # fmt: skip
    _need("texas.npz")
    loop = _loop(tmp_path)
    heterophily = experiment("heterophily")
    argv = ["study", "--datasets", "texas", "--data-dir", str(HETEROPHILY_DIR), "--seeds", "1",
            "--out", str(tmp_path / "h"), "--results-json", str(loop / "x.json"),
            "--figure", str(tmp_path / "f.png")]  # fmt: skip
    assert heterophily.main(argv) == 2
    argv = ["headroom", "--datasets", "texas", "--data-dir", str(HETEROPHILY_DIR), "--preset",
            "tiny", "--seeds", "1", "--out", str(tmp_path / "r"), "--headroom-json",
            str(loop / "h.json")]  # fmt: skip
    assert reproduce_module.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("loop") >= 2 and "Traceback" not in err, err


def test_saving_a_fit_into_a_loop_of_links_is_the_librarys_error(tmp_path):
    """Before: Python's own RuntimeError from pathlib."""
    ds = pg.data.make_csbm(num_nodes=200, num_val=40, num_test=60)
    fitted = pg.fit(ds, pg.Config.tiny(epochs=1), method="gcn", seeds=1, progress=False)
    with pytest.raises(pg.CheckpointError, match="loop"):
        fitted.save(_loop(tmp_path))


def test_a_users_file_read_as_a_merged_json_is_not_called_corrupt(tmp_path):
    """Before: "notes.md is corrupt or truncated ... Delete it": the fix deleted a user's file."""
    from policy_gnn_jax.runtime import files

    notes = tmp_path / "notes.md"
    notes.write_text("# my notes\n")
    with pytest.raises(pg.CheckpointError) as err:
        files.read_json(notes)
    assert "Delete it" not in str(err.value) and "not JSON" in str(err.value)


def test_float16_features_give_no_overflow_warning():
    """Before: numpy's "overflow encountered in cast" (2**24 compared as a float16)."""
    features = np.ones((60, 2), dtype=np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        pg.from_arrays(features, [[0, 1, 2], [1, 2, 3]], np.arange(60) % 2, [0, 1], [2, 3],
                       [4, 5], symmetrise=True)  # fmt: skip


def test_the_gpu_check_refuses_an_out_named_like_a_lock_file(experiment):
    gpu_check = experiment("gpu_check")
    assert isinstance(gpu_check._unwritable("g.json.lock", True), str)


def test_the_headroom_json_refusal_names_the_file_given(reproduce_module, tmp_path, capsys):
    out = tmp_path / "rh"
    argv = ["headroom", "--datasets", "csbm", "--preset", "tiny", "--seeds", "1", "--out",
            str(out), "--headroom-json", str(out / "headroom.md")]  # fmt: skip
    assert reproduce_module.main(argv) == 2
    assert "headroom.md" in capsys.readouterr().err.split("is this run's own")[-1]
