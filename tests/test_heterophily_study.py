"""experiments/heterophily.py end to end on one split of Texas, made small: the options are
chosen by validation, the study's table holds every row, its numbers are the runs' own, and a
second run reuses the cached runs."""

import dataclasses
import json
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest
from test_heterophily import HETEROPHILY_DIR, _need

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
    _need("texas.npz")
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


def test_the_table_holds_every_row_and_the_runs_own_numbers(studied):
    result = json.loads((studied / "results.json").read_text())["datasets"]["texas"]
    rows = result["rows"]
    for key in ("best fixed depth (val)", "policy-gnn", "random", "policy-gnn-plus",
                "headroom: probe_on_validation_nodes",
                "headroom: upper_bound_most_often_right_depth"):  # fmt: skip
        assert key in rows, key
    option = result["backbone_options"]
    fit = pg.load(studied / "runs" / "texas" / option / "split-0" / "policy-gnn-s1-e2")
    assert rows["policy-gnn"]["test"]["mean"] == pytest.approx(
        np.mean(fit.record["test_accuracy"]["per_seed"])
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
    """Before: the .md table and the figure were rewritten with this run's datasets only, and
    the JSON's one "seeds" relabelled every dataset with this run's count."""
    _need("cornell.npz")
    done = _study(studied, "study", "--datasets", "cornell", "--seeds", "2", *NO_POLICIES)
    assert done.returncode == 0, done.stderr
    table = (studied / "results.md").read_text()
    assert "| row | texas | cornell |" in table
    saved = json.loads((studied / "results.json").read_text())["datasets"]
    assert (saved["texas"]["seeds"], saved["cornell"]["seeds"]) == (1, 2)
    with np.load(studied / "results.depths.npz") as points:
        assert "texas" in points.files  # the figure still draws texas's policy depths


def test_options_chosen_at_another_depth_range_are_said(studied):
    """Before: options chosen at max-depth 1 were used at max-depth 2 without a word."""
    other = str(studied / "other.json")  # the same file's texas entry is not replaced
    figure = str(studied / "other.png")  # depths.png is the figure of results.json
    done = _study(studied, "study", "--max-depth", "2", *NO_POLICIES, "--results-json", other,
                  "--figure", figure)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "texas's options were chosen with max_depth 1" in done.stderr


def test_options_needs_two_different_candidates(tmp_path):
    """Before: `--options plain plain` replaced an earlier choice among two."""
    done = _study(tmp_path, "options", "--options", "plain", "plain")
    assert done.returncode == 2
    assert "at least two different combinations" in done.stderr.strip().splitlines()[-1]


def test_too_many_splits_are_refused_before_any_folder_is_made(tmp_path):
    """Before: the refusal came after the output folders were made, and left them empty."""
    work = tmp_path / "new"
    done = _study(work, "study", "--num-splits", "11")  # the last --num-splits wins
    assert done.returncode == 2 and "--num-splits 11: texas has 10 splits" in done.stderr
    assert not work.exists()


@pytest.mark.parametrize("fault", ["results-json not this script's", "data not found"])
def test_a_refusal_after_the_folders_were_made_leaves_none_of_them(tmp_path, fault):
    """Before: these refusals came after the output folders were made, and left them empty."""
    work, extra = tmp_path / "new", []
    if fault == "data not found":
        (tmp_path / "empty").mkdir()
        extra = ["--data-dir", str(tmp_path / "empty")]
    else:
        (tmp_path / "theirs.json").write_text("[1, 2]")
        extra = ["--results-json", str(tmp_path / "theirs.json")]
    done = _study(work, "study", *extra)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert not work.exists()
    if fault != "data not found":
        assert (tmp_path / "theirs.json").read_text() == "[1, 2]"


@pytest.mark.parametrize("what", ["study", "options"])
def test_a_different_run_does_not_replace_a_datasets_entry_unasked(studied, what):
    """Before: a smoke run (one seed) replaced the entry of the ten-split study in the JSON
    files, with exit 0 and no word."""
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
    """Before: the figure was written over the results JSON, or the study's summary over the
    chosen options, with exit 0."""
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

    _need("texas.npz")
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
        assert saved.record["test_accuracy"] == alone.record["test_accuracy"]
        np.testing.assert_array_equal(
            np.concatenate([np.ravel(x) for x in jax.tree.leaves(saved.params)]),
            np.concatenate([np.ravel(x) for x in jax.tree.leaves(alone.params)]),
        )


def test_the_fixed_depths_of_splits_train_as_one_program_and_equal_their_own_runs(
    experiment, tmp_path, monkeypatch
):
    """Every fixed depth is trained on all splits as one program (--split-map map), and each
    split's cached scores and class probabilities are those of its runs apart, bit for bit."""
    _need("texas.npz")
    het = experiment("heterophily")
    from policy_gnn_jax.runtime import split_batch

    joined = []
    stack = split_batch.stack_trainers
    monkeypatch.setattr(split_batch, "stack_trainers",
                        lambda *a, **k: joined.append(1) or stack(*a, **k))  # fmt: skip
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


def _earlier_options(tmp_path, chosen: str, score: float, seeds: int = 1) -> pathlib.Path:
    """An options file that scored one combination on texas (one split, depths 0..1)."""
    val = {"mean": score, "std": 0.0, "per_split": [score]}
    entry = {
        "chosen_by_val": chosen,
        "options": {"ego_head": True, "layer_norm": False},
        "scores": {chosen: {"val": val}},
        "seeds": seeds,
        "max_depth": 1,
        "num_splits": 1,
    }
    path = tmp_path / "options.json"
    path.write_text(json.dumps({"texas": entry}))
    return path


def test_options_scores_a_new_combination_beside_the_ones_scored_before(tmp_path):
    """Before: `options --options ego+res` needed every other combination trained again (and
    one alone was refused); now the combinations the file scored with the same seeds, depths
    and splits stay, and the choice is made over all of them."""
    _need("texas.npz")
    path = _earlier_options(tmp_path, "ego", 1.0)  # no run scores above it
    done = _study(tmp_path, "options", "--options", "ego+res")
    assert done.returncode == 0, done.stderr
    entry = json.loads(path.read_text())["texas"]
    assert set(entry["scores"]) == {"ego", "ego+res"}
    assert entry["scores"]["ego"]["val"]["mean"] == 1.0
    assert 0 < entry["scores"]["ego+res"]["val"]["mean"] < 1.0
    assert entry["chosen_by_val"] == "ego" and entry["options"]["ego_head"] is True


def test_a_new_combination_that_wins_changes_the_choice_only_when_asked(tmp_path):
    path = _earlier_options(tmp_path, "ego", 0.0)  # every run scores above it
    before = path.read_bytes()
    done = _study(tmp_path, "options", "--options", "ego+res")
    assert done.returncode == 2 and "--overwrite" in done.stderr.strip().splitlines()[-1]
    assert path.read_bytes() == before
    done = _study(tmp_path, "options", "--options", "ego+res", "--overwrite")
    assert done.returncode == 0, done.stderr
    entry = json.loads(path.read_text())["texas"]
    assert entry["chosen_by_val"] == "ego+res" and set(entry["scores"]) == {"ego", "ego+res"}
    assert entry["options"] == {"ego_head": True, "layer_norm": False, "teleport": 0.5}


def test_scores_made_with_other_seeds_are_not_candidates(tmp_path):
    _earlier_options(tmp_path, "ego", 1.0, seeds=3)
    done = _study(tmp_path, "options", "--options", "ego+res")
    assert done.returncode == 2
    assert "at least two different combinations" in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "edit",
    [
        lambda e: e["scores"]["ego"]["val"].update(mean=float("nan")),
        lambda e: e["scores"]["ego"]["val"].update(mean=True),
        lambda e: e["scores"]["ego"]["val"].update(mean="0.99"),
        lambda e: e["scores"]["ego"]["val"].pop("mean"),
        lambda e: e["scores"]["ego"]["val"].update(per_split=None),
        lambda e: e["scores"].update(ego=0.99),
        lambda e: e["scores"]["ego"].update(val=None),
        lambda e: e["scores"]["ego"]["val"].update(mean=5.0, per_split=[5.0]),
        lambda e: e["scores"]["ego"]["val"].update(mean=0.99),  # its one split says 0.9
        lambda e: e.update(scores="x"),
    ],
    ids=[
        "nan",
        "bool",
        "str",
        "no mean",
        "per_split None",
        "a number",
        "val None",
        "above 1",
        "not its splits' mean",
        "scores not a dict",
    ],  # fmt: skip
)
def test_a_kept_score_that_is_not_a_score_is_one_error_before_training(tmp_path, edit):
    """Before: a NaN or True mean won the choice (and NaN was written, which no JSON reader
    takes); other types ended in a traceback, some after the training."""
    path = _earlier_options(tmp_path, "ego", 0.9)
    entry = json.loads(path.read_text())
    edit(entry["texas"])
    path.write_text(json.dumps(entry))  # NaN as JSON's NaN: what a hand edit or an old file has
    before = path.read_bytes()
    done = _study(tmp_path, "options", "--options", "ego+res")
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "texas" in last and "not" in last and "validation score" in last, last
    assert path.read_bytes() == before and not (tmp_path / "runs").exists()


def test_overwrite_drops_a_kept_score_that_is_not_a_score_and_says_so(tmp_path):
    """The error above says --overwrite replaces the entry: it does, with a warning."""
    path = _earlier_options(tmp_path, "ego", 0.9)
    entry = json.loads(path.read_text())
    entry["texas"]["scores"]["ego"]["val"]["mean"] = float("nan")
    entry["texas"]["scores"]["plain"] = entry["texas"]["scores"]["ego"]
    path.write_text(json.dumps(entry))
    done = _study(tmp_path, "options", "--options", "ego+res", "ego", "--overwrite")
    assert done.returncode == 0, done.stderr
    assert "plain" in done.stderr and "not a candidate" in done.stderr
    written = json.loads(path.read_text())["texas"]
    assert set(written["scores"]) == {"ego", "ego+res"}


def test_a_score_of_another_definition_is_not_kept_and_is_said(tmp_path):
    """A combination's score is kept only where the file's record of its fields is this
    version's: one made with other fields would compete under a name it no longer means."""
    path = _earlier_options(tmp_path, "ego", 1.0)
    entry = json.loads(path.read_text())
    entry["texas"]["scores"]["ego"]["options"] = {"ego_head": True, "layer_norm": True}
    path.write_text(json.dumps(entry))
    done = _study(tmp_path, "options", "--options", "ego+res")
    assert done.returncode == 2
    assert "at least two different combinations" in done.stderr.strip().splitlines()[-1]
    assert "ego" in done.stderr and "not a candidate" in done.stderr


def test_the_study_refuses_options_whose_fields_are_not_the_chosen_ones(tmp_path):
    """Before: a file whose `options` said layer norm and teleport 0.5 beside `chosen_by_val:
    ego` ran ego without a word."""
    path = _earlier_options(tmp_path, "ego", 0.9)
    entry = json.loads(path.read_text())
    entry["texas"]["options"] = {"ego_head": False, "layer_norm": True, "teleport": 0.5}
    path.write_text(json.dumps(entry))
    done = _study(tmp_path, "study", *NO_POLICIES)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2 and "texas" in last and "ego" in last, done.stderr
    assert not (tmp_path / "runs").exists()
