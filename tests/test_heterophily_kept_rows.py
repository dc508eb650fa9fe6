"""`heterophily_table.keep_skipped_rows`, the study's `--skip` keeping a policy's row from the
results file, against what a hand-edited or older file can hold: a row is kept only when the
file says it was made the same way and it is a row the study writes; anything else is not kept
and said, never a traceback and never a row relabelled."""

import pytest

from policy_gnn_jax.contrib.adaptive_depth import heterophily_table

SETTINGS = {"backbone_options": "ego", "metric": "accuracy", "seeds": 1, "max_depth": 1,
            "episodes": 2, "xla_flags": None, "backend": "cpu"}  # fmt: skip
ROW = {"val": {"mean": 0.5, "std": 0.0, "per_split": [0.5]},
       "test": {"mean": 0.4, "std": 0.0, "per_split": [0.4]}}  # fmt: skip
NEW = {**SETTINGS, "rows": {"best fixed depth (val)": ROW}}
POLICIES = ("policy-gnn", "random")


def _keep(old):
    said = []
    kept = heterophily_table.keep_skipped_rows(old, NEW, ["policy-gnn"], POLICIES, "texas",
                                               "r.json", said)  # fmt: skip
    return kept, said


def test_a_row_made_the_same_way_is_kept():
    kept, said = _keep({**SETTINGS, "rows": {"policy-gnn": ROW}})
    assert kept["rows"]["policy-gnn"] == ROW and "kept from r.json" in said[0]


def test_an_entry_that_does_not_record_its_xla_flags_is_not_taken_as_made_without():
    """A missing "xla_flags" is not read as None: rows made under flags (an entry written before the
    flags were recorded) would be kept and relabelled as made without any."""
    old = {k: v for k, v in SETTINGS.items() if k != "xla_flags"}
    kept, said = _keep({**old, "rows": {"policy-gnn": ROW}})
    assert "policy-gnn" not in kept["rows"]
    assert "xla_flags not recorded" in said[0] and "not kept" in said[0]


@pytest.mark.parametrize(
    "rows",
    [
        {"policy-gnn": {"val": ROW["val"], "test": {"mean": 0.4, "std": 0.0}}},
        {"policy-gnn": {"test": 0.7}},
        "policy-gnn",
        {"policy-gnn": {"test": {"mean": 0.4, "std": 0.0, "per_split": 5}}},
        {"policy-gnn": None},
        {"policy-gnn": {"test": {"per_split": ["x"]}}},
        {"policy-gnn": {"test": {"mean": True, "std": 0.0, "per_split": [0.4]}}},
        {"policy-gnn": {"test": {"mean": float("nan"), "std": 0.0, "per_split": [0.4]}}},
    ],
)
def test_a_row_that_is_not_one_the_study_writes_is_not_kept_and_is_said(rows):
    """A row that is not one the study writes is not kept, and is said: otherwise each raises from
    deep inside (KeyError, TypeError) after the policies have trained, or is kept and breaks the
    table."""
    kept, said = _keep({**SETTINGS, "rows": rows})
    assert "policy-gnn" not in kept["rows"]
    assert len(said) == 1 and "not kept" in said[0]


def test_a_file_written_before_seeds_and_depths_were_per_dataset_keeps_its_rows():
    """The entry is read with the file's top-level "seeds" and "max_depth": without them its rows
    would be said to be made with "seeds None" and dropped."""
    entry = {k: v for k, v in SETTINGS.items() if k not in ("seeds", "max_depth")}
    merged = {
        "seeds": 1,
        "max_depth": 1,
        "datasets": {"texas": {**entry, "rows": {"policy-gnn": ROW}}},
    }
    known = heterophily_table.entries_of(merged)
    kept, said = _keep(known["texas"])
    assert kept["rows"]["policy-gnn"] == ROW, said


def test_a_results_file_whose_entry_has_no_rows_or_metric_is_refused_before_training(tmp_path):
    """Such a file is refused ahead of training: it would pass a check of every entry being a dict,
    and the study would train, rewrite the JSON, and break on the table (KeyError: 'rows'), leaving
    the table out of step."""
    from policy_gnn_jax.contrib.study_shapes import heterophily_shape

    good = {"datasets": {"texas": {**SETTINGS, "rows": {"policy-gnn": ROW}}}}
    assert heterophily_shape(good)
    for bad in ({"note": "hand"}, {**SETTINGS, "rows": None}, {"rows": {"policy-gnn": ROW}},
                {**SETTINGS, "rows": {"policy-gnn": "x"}}):  # fmt: skip
        assert not heterophily_shape({"datasets": {**good["datasets"], "cornell": bad}})


@pytest.mark.parametrize(
    "row",
    [
        {"test": {"mean": 0.99, "std": 0.0, "per_split": [0.1]}},
        {
            "val": {"mean": 0.5, "std": 0.0, "per_split": [0.5] * 5},
            "test": {"mean": 0.4, "std": 0.0, "per_split": [0.4]},
        },
    ],
)
def test_a_row_whose_mean_is_not_its_splits_or_whose_parts_differ_in_length_is_not_kept(row):
    kept, said = _keep({**SETTINGS, "rows": {"policy-gnn": row}})
    assert "policy-gnn" not in kept["rows"] and "not kept" in said[0]


def test_a_setting_the_entry_lacks_is_said_as_not_recorded_not_as_none():
    old = {k: v for k, v in SETTINGS.items() if k != "seeds"}
    merged = {"datasets": {"texas": {**old, "rows": {"policy-gnn": ROW}}}}
    kept, said = _keep(heterophily_table.entries_of(merged)["texas"])
    assert "seeds not recorded" in said[0] and "None" not in said[0]


def test_rows_null_is_said():
    kept, said = _keep({**SETTINGS, "rows": None})
    assert said and "not kept" in said[0]


def test_an_entry_made_on_another_backend_does_not_keep_its_rows():
    kept, said = _keep({**SETTINGS, "backend": "gpu", "rows": {"policy-gnn": ROW}})
    assert "policy-gnn" not in kept["rows"] and "backend gpu, not cpu" in said[0]
