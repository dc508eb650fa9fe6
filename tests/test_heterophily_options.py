"""experiments/heterophily.py's `options` over an options file that scored combinations before:
the scores made the same way compete without a rerun, and a changed choice needs --overwrite."""

import json
import os
import pathlib

import pytest
from conftest import need
from test_heterophily_study import NO_POLICIES, _study

FLAGS = " ".join(os.environ.get("XLA_FLAGS", "").split()) or None  # the runs' (conftest's)


def _earlier_options(tmp_path, chosen: str, score: float, seeds: int = 1) -> pathlib.Path:
    """An options file that scored one combination on texas (one split, depths 0..1)."""
    val = {"mean": score, "std": 0.0, "per_split": [score]}
    entry = {
        "chosen_by_val": chosen,
        "options": {"ego_head": True, "layer_norm": False},
        "scores": {chosen: {"val": val, "xla_flags": FLAGS}},
        "seeds": seeds,
        "max_depth": 1,
        "num_splits": 1,
    }
    path = tmp_path / "options.json"
    path.write_text(json.dumps({"texas": entry}))
    return path


def test_options_scores_a_new_combination_beside_the_ones_scored_before(tmp_path):
    """`options --options ego+res` trains that combination alone: the combinations the file scored
    with the same seeds, depths and splits stay, and the choice is made over all of them, so no
    other combination has to be trained again."""
    need("texas")
    path = _earlier_options(tmp_path, "ego", 1.0)  # no run scores above it
    done = _study(tmp_path, "options", "--options", "ego+res")
    assert done.returncode == 0, done.stderr
    entry = json.loads(path.read_text())["texas"]
    assert set(entry["scores"]) == {"ego", "ego+res"}
    assert entry["scores"]["ego"]["val"]["mean"] == 1.0
    assert 0 < entry["scores"]["ego+res"]["val"]["mean"] < 1.0
    assert entry["chosen_by_val"] == "ego" and entry["options"]["ego_head"] is True


@pytest.mark.benchmark_data("texas")
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


def test_a_score_of_another_definition_is_not_kept(tmp_path):
    """A combination's score is kept only where the file's record of its fields is this
    version's: one made with other fields would compete under a name it no longer means."""
    path = _earlier_options(tmp_path, "ego", 1.0)
    entry = json.loads(path.read_text())
    entry["texas"]["scores"]["ego"]["options"] = {"ego_head": True, "layer_norm": True}
    path.write_text(json.dumps(entry))
    done = _study(tmp_path, "options", "--options", "ego+res")
    assert done.returncode == 2
    assert "at least two different combinations" in done.stderr.strip().splitlines()[-1]


def test_the_study_refuses_options_whose_fields_are_not_the_chosen_ones(tmp_path):
    """A file whose `options` say layer norm and teleport 0.5 beside `chosen_by_val: ego` is
    refused, not run as ego without a word."""
    path = _earlier_options(tmp_path, "ego", 0.9)
    entry = json.loads(path.read_text())
    entry["texas"]["options"] = {"ego_head": False, "layer_norm": True, "teleport": 0.5}
    path.write_text(json.dumps(entry))
    done = _study(tmp_path, "study", *NO_POLICIES)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2 and "texas" in last and "ego" in last, done.stderr


@pytest.mark.parametrize("flags", ["--xla_cpu_enable_fast_math=false", "unrecorded"])
def test_a_score_made_under_other_xla_flags_or_not_saying_them_is_not_kept(flags):
    """A score made under other XLA flags (the flags change the bits), or not saying its flags, is
    not kept: it would compete with this run's without a word."""
    from policy_gnn_jax.contrib.adaptive_depth import backbone_options

    score = {"val": {"mean": 0.8, "std": 0.0, "per_split": [0.8]}, "xla_flags": flags}
    if flags == "unrecorded":
        del score["xla_flags"]
    entry = {"chosen_by_val": "plain", "scores": {"plain": score}, "seeds": 1, "max_depth": 1,
             "num_splits": 1}  # fmt: skip
    kept = backbone_options.kept_scores(entry, rerun=["ego"], seeds=1, max_depth=1, num_splits=1)
    assert kept == {}
    score["xla_flags"] = FLAGS
    again = backbone_options.kept_scores(entry, rerun=["ego"], seeds=1, max_depth=1, num_splits=1)
    assert again == {"plain": score}
