"""Several splits as one compiled program (`split_sweep.fit_splits`, `--split-map`): under "map"
each split's result is the one a run of its own gives, bit for bit; under "vmap" each split's
`Fit` is its own split's (its predictions score its own record); splits that are not one program
run apart; the command never reuses a split made under another batching."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from test_splits import _argv, _benchmark_file

import policy_gnn_jax as pg
from policy_gnn_jax import cli, data, split_sweep
from policy_gnn_jax.runtime import runner

TINY = dict(num_episodes=3, epochs=6)


def _splits(tmp_path, count=3):
    file = _benchmark_file(tmp_path / "bench.npz", num_splits=count)
    return [data.load_dataset(str(file), split=k) for k in range(count)]


def _same_leaves(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def _each_split_as_its_own_run(tmp_path, method: str, seed_mode: str | None) -> list[bool]:
    datasets = _splits(tmp_path)
    cfg = pg.Config.tiny(**TINY)
    run = dict(method=method, seeds=2, progress=False, seed_mode=seed_mode)
    joined = split_sweep.fit_splits(datasets, cfg, **run)
    same = []
    for ds, fitted in zip(datasets, joined, strict=True):
        alone = pg.fit(ds, cfg, **run)
        same += [_same_leaves(fitted.params, alone.params),
                 _same_leaves(fitted.policy, alone.policy),
                 fitted.record["test_metric"] == alone.record["test_metric"],
                 fitted.record["val_metric"] == alone.record["val_metric"],
                 "split_batch" not in fitted.record]  # fmt: skip
    return same


@pytest.mark.parametrize("method", ["gcn", "policy-gnn"])
def test_under_map_each_split_of_batched_seeds_is_bit_identical_to_a_run_of_its_own(
    tmp_path, method
):
    assert all(_each_split_as_its_own_run(tmp_path, method, "vmap"))


def test_under_map_each_split_of_mapped_seeds_is_bit_identical_to_a_run_of_its_own(tmp_path):
    """With seeds mapped (a CPU's default), at XLA's own optimisation level: the suite's
    `--xla_backend_optimization_level=0` rounds the Q-network's update differently inside the
    loop over splits (the last bit of a few weights), so this runs in a process without it."""
    script = (
        "import json, pathlib, sys; sys.path.insert(0, 'tests'); import test_split_sweep as t; "
        "print(json.dumps(t._each_split_as_its_own_run(pathlib.Path(sys.argv[1]), "
        "'policy-gnn', None)))"
    )
    level_0 = "--xla_backend_optimization_level=0"
    flags = os.environ.get("XLA_FLAGS", "").replace(level_0, "").strip()
    argv = [sys.executable, "-c", script, str(tmp_path)]
    env = {**os.environ, "XLA_FLAGS": flags}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert all(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_splits_run_as_one_program(tmp_path, monkeypatch):
    calls = []
    original = runner.run_trainer
    monkeypatch.setattr(runner, "run_trainer", lambda *a, **k: calls.append(1) or original(*a, **k))
    datasets = _splits(tmp_path)
    cfg = pg.Config.tiny(**TINY)
    split_sweep.fit_splits(datasets, cfg, method="gcn", seeds=1, progress=False)
    assert len(calls) == 1
    split_sweep.fit_splits(datasets, cfg, method="gcn", seeds=1, progress=False, split_map="apart")
    assert len(calls) == 1 + len(datasets)


@pytest.mark.parametrize("method", ["gcn", "policy-gnn"])
def test_under_map_a_call_holds_no_more_work_than_a_split_run_alone(tmp_path, monkeypatch, method):
    """Under "map" a call runs its chunk for every split in turn: with each split's own chunk
    length, ten splits would return to Python (progress, Ctrl-C, a signal) ten times as seldom as
    a split run alone. The joined chunk is the split's chunk shared out over the splits."""
    per_call = []
    original = runner.run_trainer
    monkeypatch.setattr(runner, "run_trainer",
                        lambda trainer, *a, **k: per_call.append(trainer.per_call)
                        or original(trainer, *a, **k))  # fmt: skip
    datasets = _splits(tmp_path, count=3)
    cfg = pg.Config.tiny(num_episodes=5, epochs=20, episodes_per_call=4)
    split_sweep.fit_splits(datasets, cfg, method=method, seeds=1, progress=False)
    alone = 4 if method == "policy-gnn" else 20  # episodes_per_call; the baseline's 20 epochs
    assert per_call == [alone // 3]
    split_sweep.fit_splits(datasets, cfg, method=method, seeds=1, progress=False,
                           split_map="vmap")  # fmt: skip
    assert per_call[1:] == [alone]  # batched, the splits run at once: the call takes as long


@pytest.mark.parametrize("method", ["gcn", "random"])
def test_under_vmap_each_fit_is_its_own_splits(tmp_path, method):
    """Each split's saved snapshot, predicting its own test nodes, scores what its record says:
    a split axis taken from the wrong place would give another split's numbers."""
    datasets = _splits(tmp_path)
    fits = split_sweep.fit_splits(datasets, pg.Config.tiny(**TINY), method=method, seeds=2,
                                  progress=False, split_map="vmap")  # fmt: skip
    tests = []
    for k, (ds, fitted) in enumerate(zip(datasets, fits, strict=True)):
        assert fitted.record["split_batch"] == [0, 1, 2] and fitted.dataset.split == k
        predicted = fitted.predict(ds.test_index)  # [S, T]
        accuracy = (predicted == ds.labels[ds.test_index][None]).mean(1)
        np.testing.assert_allclose(accuracy, fitted.record["test_metric"]["per_seed"], atol=1e-6)
        tests.append(fitted.record["test_metric"]["per_seed"])
    assert len({tuple(t) for t in tests}) > 1  # the splits did not all get one split's result


def test_splits_of_different_sizes_run_apart(tmp_path):
    datasets = _splits(tmp_path, count=2)
    ds = datasets[1]
    smaller = pg.from_arrays(ds.features, ds.edges, ds.labels, ds.train_index[:-1],
                             ds.val_index, ds.test_index)  # fmt: skip
    cfg = pg.Config.tiny(**TINY)
    assert not split_sweep.same_sizes([datasets[0], smaller])
    fits = split_sweep.fit_splits([datasets[0], smaller], cfg, method="gcn", seeds=1,
                                  progress=False, split_map="vmap")  # fmt: skip
    alone = pg.fit(smaller, cfg, method="gcn", seeds=1, progress=False)
    assert "split_batch" not in fits[1].record
    assert _same_leaves(fits[1].params, alone.params)


@pytest.mark.parametrize(
    ("datasets", "extra", "error", "message"),
    [
        ([], {}, pg.ConfigError, "non-empty list"),
        (None, {}, pg.ConfigError, "non-empty list"),
        ("texas", {}, pg.ConfigError, "non-empty list"),
        ([1], {}, pg.InvalidDatasetError, "Dataset"),
        ("ok", {"split_map": "batched"}, pg.ConfigError, "split_map must be one of"),
    ],
)
def test_bad_arguments_are_one_error(tmp_path, datasets, extra, error, message):
    datasets = _splits(tmp_path, count=2) if datasets == "ok" else datasets
    with pytest.raises(error, match=message):
        split_sweep.fit_splits(datasets, pg.Config.tiny(), method="gcn", seeds=1, **extra)


def test_the_command_never_reuses_a_split_made_under_another_batching(tmp_path, capsys):
    file = _benchmark_file(tmp_path / "bench.npz")
    out = tmp_path / "o"
    assert cli.main(_argv(file, out, "--splits", "all", "--split-map", "vmap")) == 0
    made = json.loads((out / "split-1" / "results.json").read_text())
    assert made["split_batch"] == [0, 1, 2]
    (out / "results.json").unlink()  # as if stopped before the summary
    capsys.readouterr()
    assert cli.main(_argv(file, out, "--splits", "all")) == 2
    err = capsys.readouterr().err
    assert "--split-map vmap with splits [0, 1, 2]" in err and "--overwrite" in err
    assert json.loads((out / "split-1" / "results.json").read_text()) == made  # kept
    assert cli.main(_argv(file, out, "--splits", "all", "--split-map", "vmap")) == 0
    assert json.loads((out / "results.json").read_text())["reused_splits"] == [0, 1, 2]
    (out / "results.json").unlink()
    assert cli.main(_argv(file, out, "--splits", "all", "--overwrite")) == 0
    assert "split_batch" not in json.loads((out / "split-1" / "results.json").read_text())


def test_split_map_warnings(tmp_path, capsys):
    file = _benchmark_file(tmp_path / "bench.npz")
    assert cli.main(_argv(file, tmp_path / "a", "--split", "1", "--split-map", "vmap")) == 0
    assert "--split-map is not used without --splits" in capsys.readouterr().err
    argv = _argv(file, tmp_path / "b", "--splits", "0-1", "--split-map", "vmap",
                 "--checkpoint-dir", str(tmp_path / "ck"))  # fmt: skip
    assert cli.main(argv) == 0
    assert "each split runs apart" in capsys.readouterr().err
    record = json.loads((tmp_path / "b" / "split-1" / "results.json").read_text())
    assert "split_batch" not in record
    assert (tmp_path / "ck" / "split-1").is_dir()


def test_splits_without_numbers_are_named_by_their_place_and_other_metrics_run_apart(tmp_path):
    import dataclasses
    import warnings

    ds = _splits(tmp_path, count=1)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mine = pg.from_arrays(ds.features, ds.edges, ds.labels, ds.train_index, ds.val_index,
                              ds.test_index)  # fmt: skip
    assert mine.split is None
    cfg = pg.Config.tiny(**TINY)
    fits = split_sweep.fit_splits([mine, mine], cfg, method="gcn", seeds=1, progress=False,
                                  split_map="vmap")  # fmt: skip
    assert [f.record["split_batch"] for f in fits] == [[0, 1], [0, 1]]
    auc = dataclasses.replace(mine, metric="roc_auc", labels=(mine.labels > 0).astype(np.int32),
                              num_classes=2)  # fmt: skip
    with pytest.warns(UserWarning, match="differ in sizes or kind"):
        split_sweep.fit_splits([mine, auc], cfg, method="gcn", seeds=1, progress=False)
