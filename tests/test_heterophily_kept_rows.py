"""`heterophily_table.keep_skipped_rows`, the study's `--skip` keeping a policy's row from the
results file: a row is kept only when the file says it was made the same way; anything else is
not kept and said, never a row relabelled."""

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


def test_a_setting_the_entry_lacks_is_said_as_not_recorded_not_as_none():
    old = {k: v for k, v in SETTINGS.items() if k != "seeds"}
    merged = {"datasets": {"texas": {**old, "rows": {"policy-gnn": ROW}}}}
    kept, said = _keep(merged["datasets"]["texas"])
    assert "seeds not recorded" in said[0] and "None" not in said[0]


def test_an_entry_made_on_another_backend_does_not_keep_its_rows():
    kept, said = _keep({**SETTINGS, "backend": "gpu", "rows": {"policy-gnn": ROW}})
    assert "policy-gnn" not in kept["rows"] and "backend gpu, not cpu" in said[0]
