"""experiments/heterophily.py end to end on one split of Texas, made small: the options are
chosen by validation, the study's table holds every row, its numbers are the runs' own, and a
second run reuses the cached runs."""

import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest
from conftest import HETEROPHILY_DIR, need

import policy_gnn_jax as pg

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _study(tmp_path, what, *extra):
    argv = [sys.executable, "experiments/heterophily.py", what, "--datasets", "texas",
            "--data-dir", str(HETEROPHILY_DIR), "--seeds", "1", "--max-depth", "1",
            "--num-splits", "1", "--episodes", "2", "--out", str(tmp_path / "runs"),
            "--options-json", str(tmp_path / "options.json"),
            "--results-json", str(tmp_path / "results.json"),
            "--figure", str(tmp_path / "depths.png"), *extra]  # fmt: skip
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def studied(tmp_path_factory):
    need("texas")
    tmp_path = tmp_path_factory.mktemp("study")
    options = _study(tmp_path, "options", "--options", "plain", "ego")
    assert options.returncode == 0, options.stderr
    study = _study(tmp_path, "study")
    assert study.returncode == 0, study.stderr
    return tmp_path


def test_the_options_are_chosen_by_validation(studied):
    chosen = json.loads((studied / "options.json").read_text())["texas"]
    scores = {k: v["val"]["mean"] for k, v in chosen["scores"].items()}
    assert set(scores) == {"plain", "ego"}
    assert chosen["chosen_by_val"] == max(scores, key=scores.get)
    flags = " ".join(os.environ.get("XLA_FLAGS", "").split()) or None  # conftest's, if any
    assert all(s["xla_flags"] == flags for s in chosen["scores"].values())


def test_the_table_holds_every_row_and_the_runs_own_numbers(studied):
    result = json.loads((studied / "results.json").read_text())["datasets"]["texas"]
    rows = result["rows"]
    for key in ("best fixed depth (val)", "policy-gnn", "random", "policy-gnn-plus",
                "headroom: probe_on_validation_nodes",
                "headroom: upper_bound_most_often_right_depth"):  # fmt: skip
        assert key in rows, key
    flags = " ".join(os.environ.get("XLA_FLAGS", "").split()) or None  # conftest's, if any
    assert result["xla_flags"] == flags  # what made the bits, said
    option = result["backbone_options"]
    fit = pg.load(studied / "runs" / "texas" / option / "split-0" / "policy-gnn-s1-e2")
    assert rows["policy-gnn"]["test"]["mean"] == pytest.approx(
        np.mean(fit.record["test_metric"]["per_seed"])
    )
    table = (studied / "results.md").read_text()
    assert "(reads test labels)" in table and "published: MLP" in table
    assert (studied / "depths.png").stat().st_size > 1000


def test_a_second_study_reuses_its_runs(studied):
    before = (studied / "runs" / "texas").stat().st_mtime
    fit_json = next((studied / "runs" / "texas").rglob("policy-gnn-s1-e2/fit.json"))
    stamp = fit_json.stat().st_mtime_ns
    again = _study(studied, "study")
    assert again.returncode == 0, again.stderr
    assert fit_json.stat().st_mtime_ns == stamp and before is not None


NO_POLICIES = ("--skip", "policy-gnn", "random", "policy-gnn-plus")


def test_a_study_of_other_datasets_keeps_the_earlier_ones_in_the_table(studied):
    """A study of other datasets keeps the ones already studied in the .md table and the figure, and
    the JSON keeps each dataset's own "seeds": one top-level "seeds" would relabel every dataset
    with this run's count."""
    need("cornell")
    done = _study(studied, "study", "--datasets", "cornell", "--seeds", "2", *NO_POLICIES)
    assert done.returncode == 0, done.stderr
    table = (studied / "results.md").read_text()
    assert "| row | texas | cornell |" in table
    saved = json.loads((studied / "results.json").read_text())["datasets"]
    assert (saved["texas"]["seeds"], saved["cornell"]["seeds"]) == (1, 2)
    with np.load(studied / "results.depths.npz") as points:
        assert "texas" in points.files  # the figure still draws texas's policy depths


def test_a_skipped_policy_keeps_its_row_made_with_the_same_settings(studied, tmp_path):
    """A study that skips a policy keeps that policy's row in the dataset's entry: dropping it,
    adding one policy to a finished dataset would mean training the others again, or --overwrite and
    losing their rows (and Policy-GNN's depths in the figure)."""
    copy = tmp_path / "copy"
    shutil.copytree(studied, copy)
    before = json.loads((copy / "results.json").read_text())["datasets"]["texas"]
    with np.load(copy / "results.depths.npz") as z:
        points = z["texas"]
    for run in copy.glob("runs/texas/*/split-0/policy-gnn-s1-e2"):
        shutil.rmtree(run)  # a kept row is read from the results file, not trained again
    done = _study(copy, "study", "--skip", "policy-gnn", "random")
    assert done.returncode == 0, done.stderr
    assert "texas: policy-gnn and random kept from" in done.stderr
    after = json.loads((copy / "results.json").read_text())["datasets"]["texas"]
    assert after == before
    assert list(after["rows"])[-3:] == ["policy-gnn", "random", "policy-gnn-plus"]
    with np.load(copy / "results.depths.npz") as z:
        np.testing.assert_array_equal(z["texas"], points)  # the figure still draws them
    assert not list(copy.glob("runs/texas/*/split-0/policy-gnn-s1-e2"))


def test_a_skipped_policys_row_made_otherwise_is_not_kept_and_is_said(studied, tmp_path):
    """Rows made with other episodes would be mislabelled by this entry's settings: not kept,
    said, and the entry that would drop them is refused as before."""
    copy = tmp_path / "copy"
    shutil.copytree(studied, copy)
    done = _study(copy, "study", "--skip", "policy-gnn", "random", "--episodes", "3")
    assert done.returncode == 2
    assert "texas's policy-gnn and random rows in" in done.stderr
    assert "are not kept: made with episodes 2, not 3" in done.stderr
    assert "already holds texas" in done.stderr


def test_options_chosen_at_another_depth_range_are_said(studied):
    """Options chosen at max-depth 1 and used at max-depth 2 are said, not used without a word."""
    other = str(studied / "other.json")  # the same file's texas entry is not replaced
    figure = str(studied / "other.png")  # depths.png is the figure of results.json
    done = _study(studied, "study", "--max-depth", "2", *NO_POLICIES, "--results-json", other,
                  "--figure", figure)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "texas's options were chosen with max_depth 1" in done.stderr


def test_options_needs_two_different_candidates(tmp_path):
    """`--options plain plain` is refused: it would replace a choice made among two."""
    done = _study(tmp_path, "options", "--options", "plain", "plain")
    assert done.returncode == 2
    assert "at least two different combinations" in done.stderr.strip().splitlines()[-1]


def test_too_many_splits_are_refused_before_any_folder_is_made(tmp_path):
    """Too many splits are refused ahead of making the output folders, which would be left empty."""
    work = tmp_path / "new"
    done = _study(work, "study", "--num-splits", "11")  # the last --num-splits wins
    assert done.returncode == 2 and "--num-splits 11: texas has 10 splits" in done.stderr
    assert not work.exists()


@pytest.mark.parametrize("fault", ["results-json not this script's", "data not found"])
def test_a_refusal_after_the_folders_were_made_is_one_error(tmp_path, fault):
    work, extra = tmp_path / "new", []
    if fault == "data not found":
        (tmp_path / "empty").mkdir()
        extra = ["--data-dir", str(tmp_path / "empty")]
    else:
        (tmp_path / "theirs.json").write_text("[1, 2]")
        extra = ["--results-json", str(tmp_path / "theirs.json")]
    done = _study(work, "study", *extra)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    if fault != "data not found":
        assert (tmp_path / "theirs.json").read_text() == "[1, 2]"


@pytest.mark.parametrize("what", ["study", "options"])
def test_a_different_run_does_not_replace_a_datasets_entry_unasked(studied, what):
    """A smoke run (one seed) does not replace the entry of the ten-split study in the JSON files,
    with exit 0 and no word."""
    name = "results.json" if what == "study" else "options.json"
    before = (studied / name).read_bytes()
    extra = ("--seeds", "2", *NO_POLICIES) if what == "study" else ("--seeds", "2", "--options",
                                                                    "plain", "norm")  # fmt: skip
    done = _study(studied, what, *extra)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "already holds texas from another run" in last and "--overwrite" in last
    assert (studied / name).read_bytes() == before


@pytest.mark.parametrize(
    "flags, message",
    [
        (("--figure", "{results}"), "--figure must name an image"),
        (("--options-json", "{results}"), "--options-json and --results-json are one file"),
        (("--figure", "{tmp}/results.md"), "--figure must name an image"),
    ],
)
def test_output_paths_that_would_overwrite_each_other_are_refused(tmp_path, flags, message):
    """Output paths that would overwrite each other are refused: the figure would be written over
    the results JSON, or the study's summary over the chosen options, with exit 0."""
    results = tmp_path / "results.json"
    flags = [f.format(results=results, tmp=tmp_path) for f in flags]
    done = _study(tmp_path, "study", *NO_POLICIES, *flags)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "runs").exists() and not results.exists()


def test_the_policies_splits_train_as_one_program_and_equal_their_own_runs(experiment, tmp_path):
    """`study` trains each policy's splits as one program (--split-map map); each saved run is
    the split's run of its own, bit for bit, so the cache means the same either way."""
    import types

    need("texas")
    het = experiment("heterophily")
    args = types.SimpleNamespace(
        num_splits=2, data_dir=str(HETEROPHILY_DIR), skip=["random", "policy-gnn-plus"],
        episodes=2, seeds=1, split_map="map", overwrite=False,
    )  # fmt: skip
    cfg = het.base_config(1, "plain")
    datasets = {k: pg.load_dataset("texas", data_dir=HETEROPHILY_DIR, split=k) for k in (0, 1)}
    het._fit_policies_together(args, datasets, cfg, tmp_path)
    for k in range(2):
        saved = pg.load(tmp_path / f"split-{k}" / "policy-gnn-s1-e2")
        ds = pg.load_dataset("texas", data_dir=HETEROPHILY_DIR, split=k)
        alone = pg.fit(ds, dataclasses.replace(cfg, num_episodes=2), seeds=1, progress=False)
        assert saved.record["test_metric"] == alone.record["test_metric"]
        np.testing.assert_array_equal(
            np.concatenate([np.ravel(x) for x in jax.tree.leaves(saved.params)]),
            np.concatenate([np.ravel(x) for x in jax.tree.leaves(alone.params)]),
        )


def test_the_fixed_depths_of_splits_train_as_one_program_and_equal_their_own_runs(
    experiment, tmp_path, monkeypatch
):
    """Every fixed depth is trained on all splits as one program (--split-map map), and each
    split's cached scores and class probabilities are those of its runs apart, bit for bit."""
    need("texas")
    het = experiment("heterophily")
    from policy_gnn_jax import split_sweep

    joined = []
    join = split_sweep.join
    monkeypatch.setattr(split_sweep, "join", lambda *a, **k: joined.append(1) or join(*a, **k))
    cfg = het.base_config(1, "plain")
    datasets = {k: pg.load_dataset("texas", data_dir=HETEROPHILY_DIR, split=k) for k in (0, 1)}
    together = het.fixed_runs.fixed_depths_of_splits(
        datasets, cfg, 1, {k: tmp_path / "map" / f"split-{k}" for k in datasets}, "map"
    )
    assert len(joined) == 2  # depths 0 and 1, each one program over both splits
    apart = het.fixed_runs.fixed_depths_of_splits(
        datasets, cfg, 1, {k: tmp_path / "apart" / f"split-{k}" for k in datasets}, "apart"
    )
    assert len(joined) == 2
    for k in datasets:
        for key in ("probs", "val", "test", "depths"):
            np.testing.assert_array_equal(together[k][key], apart[k][key])
        assert het.fixed_runs.cache_path(tmp_path / "map" / f"split-{k}", cfg, 1).exists()


def test_an_entry_that_only_adds_fields_replaces_its_older_self(tmp_path):
    """An entry written before a field was recorded (the options file's `num_splits`) is the
    same result: the rerun that adds the field loses nothing. A changed or dropped field is
    still refused."""
    from policy_gnn_jax.runtime import records

    path = tmp_path / "f.json"
    old = {"cornell": {"chosen": "ego", "seeds": 3}}
    added = {"cornell": {"chosen": "ego", "seeds": 3, "num_splits": 10}}
    records.check_replaced_entries(old, added, path, overwrite=False)
    for new in ({"chosen": "plain", "seeds": 3, "num_splits": 10}, {"chosen": "ego"}):
        with pytest.raises(pg.CheckpointError, match="already holds cornell"):
            records.check_replaced_entries(old, {"cornell": new}, path, overwrite=False)


def test_an_entry_that_adds_rows_keeps_the_rows_it_had(tmp_path):
    """A study that adds the policies to a dataset whose fixed depths and headroom it held (the
    rows, one level down) loses nothing; a row it changes or drops is still refused."""
    from policy_gnn_jax.runtime import records

    path = tmp_path / "r.json"
    fixed = {"best fixed depth (val)": {"test": {"mean": 0.74}}}
    old = {"cornell": {"episodes": 1000, "rows": fixed}}
    policy = {"policy-gnn": {"test": {"mean": 0.75}}}
    added = {"cornell": {"episodes": 1000, "rows": {**fixed, **policy}}}
    records.check_replaced_entries(old, added, path, overwrite=False)
    changed = {"best fixed depth (val)": {"test": {"mean": 0.70}}}
    for rows in (policy, {**changed, **policy}):
        with pytest.raises(pg.CheckpointError, match="already holds cornell"):
            records.check_replaced_entries(old, {"cornell": {"episodes": 1000, "rows": rows}},
                                           path, overwrite=False)  # fmt: skip


def test_splits_of_other_sizes_train_in_turn_and_are_not_said_to_be_one_program(tmp_path):
    """chameleon-filtered's splits (their sizes differ) train one after another, so they are not
    said to train "as one program", and each is saved without waiting for all to end."""
    need("chameleon-filtered")
    done = _study(tmp_path, "study", "--datasets", "chameleon-filtered", "--num-splits", "2",
                  "--skip", "random", "policy-gnn-plus", "--options", "plain")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "as one program" not in done.stdout
    for k in (0, 1):
        assert (tmp_path / "runs" / "chameleon-filtered" / "plain" / f"split-{k}" /
                "policy-gnn-s1-e2" / "fit.json").is_file()  # fmt: skip
