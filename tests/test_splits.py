"""`--splits`: every fixed split run and saved, the summary's mean ± std recomputed from the
saved splits, an interrupted sweep resumed from them; and the honesty check of the protocol:
permuting a split's test labels changes nothing before the final evaluation."""

import dataclasses
import json

import jax
import numpy as np
import pytest

import policy_gnn_jax as pg
from policy_gnn_jax import cli, data


def _benchmark_file(path, num_splits=3, n=60, classes=3, seed=0):
    """A small graph in the heterophilous benchmarks' format, with `num_splits` splits."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    features = (np.eye(classes)[labels] + rng.normal(0, 0.8, (n, classes))).astype(np.float32)
    edges = np.stack([rng.integers(0, n, 3 * n), rng.integers(0, n, 3 * n)], 1)
    masks = {name: np.zeros((num_splits, n), bool) for name in ("train", "val", "test")}
    for k in range(num_splits):
        order = np.random.default_rng(100 + k).permutation(n)
        for name, part in zip(masks, np.array_split(order, 3)):
            masks[name][k, part] = True
    np.savez(path, node_features=features, node_labels=labels, edges=edges,
             **{f"{name}_masks": m for name, m in masks.items()})  # fmt: skip
    return path


def _argv(file, out, *extra):
    return ["--dataset", str(file), "--method", "gcn", "--epochs", "5", "--seeds", "2",
            "--no-progress", "--out", str(out), *extra]  # fmt: skip


def test_every_split_is_saved_and_summarised_over_splits(tmp_path, capsys):
    file = _benchmark_file(tmp_path / "bench.npz")
    assert cli.main(_argv(file, tmp_path / "o", "--splits", "all")) == 0
    summary = json.loads((tmp_path / "o" / "results.json").read_text())
    assert summary["kind"] == "splits" and summary["splits"] == [0, 1, 2]
    means = []
    for k in range(3):
        fit = pg.load(tmp_path / "o" / f"split-{k}")
        assert fit.dataset.split == k
        means.append(np.mean(fit.record["test_metric"]["per_seed"]))
    assert summary["test_metric"]["per_split"] == pytest.approx(means)
    assert summary["test_metric"]["mean"] == pytest.approx(np.mean(means))
    assert summary["test_metric"]["std"] == pytest.approx(np.std(means))
    out = capsys.readouterr().out
    assert "over 3 splits (2 seeds each" in out


def test_an_interrupted_sweep_goes_on_from_its_saved_splits(tmp_path):
    file = _benchmark_file(tmp_path / "bench.npz")
    assert cli.main(_argv(file, tmp_path / "o", "--splits", "0-1")) == 0
    first = json.loads((tmp_path / "o" / "results.json").read_text())
    (tmp_path / "o" / "results.json").unlink()  # as if stopped before the summary
    assert cli.main(_argv(file, tmp_path / "o", "--splits", "all")) == 0
    again = json.loads((tmp_path / "o" / "results.json").read_text())
    assert again["reused_splits"] == [0, 1]
    assert again["test_metric"]["per_split"][:2] == first["test_metric"]["per_split"]


@pytest.mark.parametrize("method", ["random", "policy-gnn-plus"])
def test_a_sweep_of_a_method_that_adjusts_its_config_is_reused_too(tmp_path, method):
    """The random policy runs its config with `random_policy` set (`Method.prepare`): its saved
    splits were compared with the config as given, and never reused."""
    file = _benchmark_file(tmp_path / "bench.npz")
    argv = _argv(file, tmp_path / "o", "--splits", "0", "--episodes", "2")
    argv[argv.index("gcn")] = method
    assert cli.main(argv) == 0
    (tmp_path / "o" / "results.json").unlink()
    assert cli.main(argv) == 0
    assert json.loads((tmp_path / "o" / "results.json").read_text())["reused_splits"] == [0]


def test_a_split_folder_of_another_run_is_not_reused(tmp_path, capsys):
    file = _benchmark_file(tmp_path / "bench.npz")
    assert cli.main(_argv(file, tmp_path / "o", "--splits", "0")) == 0
    (tmp_path / "o" / "results.json").unlink()
    other = _argv(file, tmp_path / "o", "--splits", "0")
    other[other.index("--epochs") + 1] = "6"
    assert cli.main(other) == 2  # refused, not mixed in
    assert "already holds" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--splits", "all", "--split", "1"], "--split K for one split or --splits"),
        (["--splits", "0,0"], "distinct"),
        (["--splits", "x"], "--splits must be"),
        (["--splits", "5"], "splits 0..2"),
    ],
)
def test_bad_splits_are_one_error(tmp_path, capsys, extra, message):
    file = _benchmark_file(tmp_path / "bench.npz")
    assert cli.main(_argv(file, tmp_path / "o", *extra)) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_splits_on_a_graph_with_one_split_is_refused(tmp_path, capsys):
    argv = ["--dataset", "csbm", "--splits", "all", "--out", str(tmp_path / "o")]
    assert cli.main(argv) == 2
    assert "--splits needs a benchmark with fixed splits" in capsys.readouterr().err


def _permuted_test_labels(ds, seed=0):
    labels = ds.labels.copy()
    test = ds.test_index
    labels[test] = labels[test][np.random.default_rng(seed).permutation(len(test))]
    assert (labels[test] != ds.labels[test]).any()
    return dataclasses.replace(ds, labels=labels)


@pytest.mark.parametrize("method", ["gcn", "policy-gnn"])
def test_test_labels_are_read_only_by_the_final_evaluation(tmp_path, method):
    """Permuting one split's test labels leaves the training curves, the validation scores, the
    selected snapshot and the chosen depths exactly as they were."""
    ds = data.load_heterophily(str(_benchmark_file(tmp_path / "bench.npz")), split=1)
    config = pg.Config.tiny(epochs=8)
    a = pg.fit(ds, config, method=method, seeds=2, progress=False)
    b = pg.fit(_permuted_test_labels(ds), config, method=method, seeds=2, progress=False)
    for key in ("val_metric", "best_step", "best_epoch"):
        if key in a.record:
            assert a.record[key] == b.record[key], key
    for x, y in zip(jax.tree_util.tree_leaves((a.params, a.policy)),
                    jax.tree_util.tree_leaves((b.params, b.policy))):  # fmt: skip
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a.predict_depths(ds.test_index), b.predict_depths(ds.test_index))
    np.testing.assert_array_equal(a.predict(ds.test_index), b.predict(ds.test_index))
