"""`experiments/reproduce.py table` end to end on a PubMed stand-in (the real `ind.pubmed.allx` is
not on this machine), with a dataset that cannot be loaded listed as skipped."""

import argparse
import json

import pytest

import policy_gnn_jax as pg
from policy_gnn_jax import data


def test_table_runs_pubmed_and_lists_a_missing_dataset_as_skipped(
    pubmed_stand_in, tmp_path, monkeypatch, reproduce_module
):
    folder, allx_sha = pubmed_stand_in
    monkeypatch.setitem(data.PLANETOID_SHA256, "ind.pubmed.allx", allx_sha)
    # CiteSeer is in none of the folders searched, and downloads are off (conftest).
    monkeypatch.setenv("POLICY_GNN_DATA", str(folder))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "out"
    args = argparse.Namespace(
        datasets=["pubmed", "citeseer"],
        seeds=2,
        episodes=2,  # the code path is what is tested: the tiny preset's 4 episodes halved
        preset="tiny",
        backbone="gcn",
        audit=True,
        seed_mode="vmap",
        data_dir=str(folder),
        out=str(out),
        overwrite=False,
    )
    reproduce_module.table(args)

    table = json.loads((out / "table3.json").read_text())
    assert set(table["skipped"]) == {"citeseer"}
    assert "Missing raw file ind.citeseer" in table["skipped"]["citeseer"]
    rows = table["rows"]
    for key in ("gcn-d2", "best-fixed", "random", "policy-gnn", "random-audit", "policy-gnn-audit"):
        acc = rows[key]["pubmed"]
        assert len(acc["per_seed"]) == 2 and 0.0 <= acc["mean"] <= 1.0, key
    # The policy ran on PubMed's full graph.
    policy = json.loads((out / "pubmed/policy-gnn/results.json").read_text())
    assert policy["dataset_summary"].startswith("pubmed: 19717 nodes, 500 features, 3 classes")
    assert policy["config"]["audit"] and "audit" in policy
    assert policy["seed_mode"] == "vmap"
    # The best fixed depth is the validation argmax, and its row is that run's test result.
    fixed = {
        d: json.loads((out / f"pubmed/gcn-d{d}/results.json").read_text())
        for d in range(1, policy["config"]["max_depth"] + 1)
    }
    best = max(fixed, key=lambda d: fixed[d]["val_metric"]["mean"])
    assert rows["best-fixed"]["pubmed"]["depth"] == best
    assert rows["best-fixed"]["pubmed"]["per_seed"] == fixed[best]["test_metric"]["per_seed"]

    text = (out / "table3.md").read_text()
    assert text.startswith("| Method | pubmed | citeseer |")
    assert "| Policy-GNN | " in text and "| skipped |" in text
    assert "- citeseer skipped: Missing raw file ind.citeseer" in text
    assert "*audit*" in text and "NOT results" in text


def test_a_saved_run_is_reused_only_in_the_seed_mode_it_was_made_in(
    small_dataset, tiny_config, tmp_path, reproduce_module
):
    import dataclasses

    cfg = dataclasses.replace(tiny_config, depth=1, epochs=3)
    first = reproduce_module.run_or_load(tmp_path, small_dataset, cfg, "gcn", 2, "vmap")
    path = tmp_path / "results.json"
    # Marked so that a reuse (which returns the saved record as it is) can be told from a rerun.
    saved = json.loads(path.read_text())
    saved["wall_time_s"] = -1.0
    path.write_text(json.dumps(saved))
    reused = reproduce_module.run_or_load(tmp_path, small_dataset, cfg, "gcn", 2, "vmap")
    assert reused["wall_time_s"] == -1.0
    with pytest.raises(pg.CheckpointError, match="seed mode"):  # never replaced unasked
        reproduce_module.run_or_load(tmp_path, small_dataset, cfg, "gcn", 2, "map")
    assert json.loads(path.read_text())["wall_time_s"] == -1.0
    rerun = reproduce_module.run_or_load(
        tmp_path, small_dataset, cfg, "gcn", 2, "map", replace=True
    )
    assert rerun["seed_mode"] == "map" and rerun["wall_time_s"] >= 0.0
    assert json.loads(path.read_text())["seed_mode"] == "map"
    assert first["seed_mode"] == "vmap"


def test_a_saved_config_matches_only_with_every_field_equal(tiny_config, reproduce_module):
    import dataclasses

    saved = json.loads(json.dumps(dataclasses.asdict(tiny_config)))
    assert reproduce_module.configs_match(saved, tiny_config)
    del saved["engine"]  # a config of another version, without the field
    assert not reproduce_module.configs_match(saved, tiny_config)
    saved = json.loads(json.dumps(dataclasses.asdict(tiny_config)))
    saved["no_such_field"] = 1  # a field this code does not know: never a match
    assert not reproduce_module.configs_match(saved, tiny_config)
    changed = json.loads(json.dumps(dataclasses.asdict(tiny_config)))
    changed["hidden"] += 1
    assert not reproduce_module.configs_match(changed, tiny_config)


@pytest.mark.parametrize(
    "damage",
    [
        lambda r: r.update(test_accuracy=r.pop("test_metric")),  # another version's names
        lambda r: r.update(test_metric=None),
        lambda r: r.update(config=[1]),
        lambda r: r.pop("val_metric"),
    ],
)
def test_a_run_saved_by_another_version_is_refused_then_replaced_when_asked(
    small_dataset, tiny_config, tmp_path, reproduce_module, damage
):
    """A results.json of another version (scores named otherwise), or a damaged one, is never
    reused, which would end in a traceback: it is refused in one line, and run again under
    --overwrite."""
    import dataclasses

    cfg = dataclasses.replace(tiny_config, depth=1, epochs=3)
    reproduce_module.run_or_load(tmp_path, small_dataset, cfg, "gcn", 2, "vmap")
    path = tmp_path / "results.json"
    saved = json.loads(path.read_text())
    damage(saved)
    path.write_text(json.dumps(saved))
    with pytest.raises(pg.CheckpointError, match="not the results.json of a run of this version"):
        reproduce_module.run_or_load(tmp_path, small_dataset, cfg, "gcn", 2, "vmap")
    assert json.loads(path.read_text()) == saved  # untouched
    rerun = reproduce_module.run_or_load(tmp_path, small_dataset, cfg, "gcn", 2, "vmap",
                                         replace=True)  # fmt: skip
    assert "test_metric" in rerun and "test_metric" in json.loads(path.read_text())


def test_the_table_refuses_the_audit_on_a_two_class_graph_before_any_run(
    tmp_path, capsys, reproduce_module
):
    """The audit is the released code's accuracy: on a graph scored by ROC AUC the table says to
    pass --no-audit (the flag reproduce.py has) before the fixed depths train, not after."""
    from test_splits import _benchmark_file

    graph = _benchmark_file(tmp_path / "two_classes.npz", n=90, classes=2)
    argv = ["table", "--datasets", str(graph), "--preset", "tiny", "--seeds", "1",
            "--out", str(tmp_path / "o")]  # fmt: skip
    assert reproduce_module.main(argv) == 2
    assert "pass --no-audit" in capsys.readouterr().err
    assert not list((tmp_path / "o").rglob("results.json"))
