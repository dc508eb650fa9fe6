"""The studies' figures: fig1's files are replaced only by the command that drew them, or with
--overwrite (docs/reliability.md, promise 1)."""

import json

from conftest import HETEROPHILY_DIR, need


def test_fig1_of_another_graph_of_the_same_name_is_not_replaced_unasked(
    reproduce_module, tmp_path, monkeypatch
):
    """With two folders of arrays both named csbm, the second fig1 does not replace the first's
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
    """Not only another graph's fig1 is kept: one of other seeds is not replaced either, and
    --seed-mode is used and recorded."""
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
    """fig1 runs a graph whose name has a `/` in it (as a file name it would fail after fig1 trained
    five depths) and one of fewer than 20 test nodes (else numpy's "Cannot take a larger
    sample")."""
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


def test_fig1_keeps_a_lone_figure_of_its_name(reproduce_module, tmp_path, capsys):
    """A fig1_<dataset>.png with no .json beside it is kept, not replaced unasked."""
    out = tmp_path / "f"
    out.mkdir()
    (out / "fig1_csbm.png").write_text("mine")
    argv = ["fig1", "--dataset", "csbm", "--seeds", "1", "--preset", "tiny", "--out", str(out)]
    assert reproduce_module.main(argv) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "fig1_csbm.png").read_text() == "mine"
