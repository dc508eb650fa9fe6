"""The studies' merged results files: entries of other datasets or settings are kept, two runs
merging at once both land, and a file of another shape is refused before any work."""

import argparse
import json
import pathlib
import threading
import time

import numpy as np
import pytest
from conftest import HETEROPHILY_DIR, _experiment, need
from reliability_helpers import run_python

import policy_gnn_jax as pg
from policy_gnn_jax.contrib.adaptive_depth import heterophily_table
from policy_gnn_jax.runtime import outputs, records, study_files


def _row(dataset, backbone, method, test):
    return {"dataset": dataset, "backbone": backbone, "method": method, "test_metric": test}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A saved fit's folder (its results.json must never be merged into)."""
    folder = tmp_path_factory.mktemp("saved") / "fit"
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    pg.fit(ds, pg.Config.tiny(epochs=2), method="gcn", seeds=1, progress=False).save(folder)
    return folder


def _heterophily(experiment, tmp_path, what, flag, path):
    files = {"--options-json": tmp_path / "o.json", "--results-json": tmp_path / "r.json"}
    files[flag] = path
    argv = [what, "--datasets", "texas", "--data-dir", str(HETEROPHILY_DIR), "--seeds", "1",
            "--max-depth", "1", "--num-splits", "1", "--out", str(tmp_path / "runs"),
            "--figure", str(tmp_path / "f.png"),
            *(str(x) for kv in files.items() for x in kv)]  # fmt: skip
    return experiment("heterophily").main(argv)


def _adaptive(experiment, tmp_path, what, flag, path):
    argv = [what, "--datasets", "cora", "--out", str(tmp_path / "runs"), flag, str(path)]
    return experiment("adaptive_depth").main(argv)


def _headroom(reproduce_module, tmp_path, what, flag, path):
    argv = [what, "--datasets", "cora", "--out", str(tmp_path / "runs"), flag, str(path)]
    return reproduce_module.main(argv)


STUDY_FILES = [
    ("heterophily", "study", "--results-json"),
    ("heterophily", "options", "--options-json"),
    ("adaptive", "results", "--results-json"),
    ("adaptive", "ablate", "--ablation-json"),
    ("headroom", "headroom", "--headroom-json"),
]


def _run(script, experiment, reproduce_module, tmp_path, what, flag, path):
    if script == "headroom":
        return _headroom(reproduce_module, tmp_path, what, flag, path)
    runner = {"heterophily": _heterophily, "adaptive": _adaptive}[script]
    return runner(experiment, tmp_path, what, flag, path)


def _table_argv(out: pathlib.Path) -> list[str]:
    return ["table", "--datasets", "csbm", "--seeds", "1", "--preset", "tiny", "--out", str(out)]


def _loop(tmp_path) -> pathlib.Path:
    (tmp_path / "loopA").symlink_to(tmp_path / "loopB")
    (tmp_path / "loopB").symlink_to(tmp_path / "loopA")
    return tmp_path / "loopA"


def test_an_ablation_file_that_is_no_object_is_refused_before_the_sweeps(tmp_path):
    """An ablation file that is no object is refused ahead of the sweeps: otherwise the whole sweep
    runs, then `AttributeError: 'list' object has no attribute 'update'`."""
    path = tmp_path / "a.json"
    path.write_text("[1]")
    done = run_python("experiments/adaptive_depth.py", "ablate", "--datasets", "csbm", "--seeds",
                   "1", "--ablation-json", str(path), "--out", str(tmp_path / "o"))  # fmt: skip
    assert done.returncode == 2 and "a.json" in done.stderr, done.stderr
    assert not (tmp_path / "o" / "csbm").exists()


def test_a_merged_entry_is_replaced_only_by_the_same_or_when_asked(tmp_path):
    old = {"texas": {"seeds": 3, "rows": [0.85, (1, 2)]}, "actor": {"seeds": 3}}
    same = {"texas": {"seeds": 3, "rows": [0.85, [1, 2]]}, "cornell": {"seeds": 1}}
    records.check_replaced_entries(old, same, "r.json", overwrite=False)  # as JSON: the same
    other = {"texas": {"seeds": 1, "rows": [0.9]}}
    with pytest.raises(pg.CheckpointError, match="r.json already holds texas from another run"):
        records.check_replaced_entries(old, other, "r.json", overwrite=False)
    records.check_replaced_entries(old, other, "r.json", overwrite=True)


def test_adaptive_depth_results_keep_the_other_datasets_records(tmp_path):
    """`results --datasets cora --backbones decoupled` keeps the other datasets' records, rather
    than rewrite the whole file from 20 records to 3."""
    script = _experiment("adaptive_depth")
    old = {"records": [_row("cora", "gcn", "random", 0.78), _row("cora", "decoupled", "random",
                       0.80), _row("citeseer", "gcn", "random", 0.65)],
           "missing": ["citeseer/decoupled: no headroom analysis"]}  # fmt: skip
    args = argparse.Namespace(datasets=["cora"], backbones=["decoupled"], overwrite=False)
    new = [_row("cora", "decoupled", "random", 0.80)]
    merged = script.merged_records(old, new, [], tmp_path / "a.json", args)
    assert sorted(merged["records"], key=str) == sorted(old["records"], key=str)
    assert merged["missing"] == old["missing"]
    other = [_row("cora", "decoupled", "random", 0.70)]
    with pytest.raises(pg.CheckpointError, match="cora/decoupled from another run"):
        script.merged_records(old, other, [], tmp_path / "a.json", args)
    args.overwrite = True
    merged = script.merged_records(old, other, [], tmp_path / "a.json", args)
    assert len(merged["records"]) == 3 and other[0] in merged["records"]


@pytest.mark.parametrize(("script", "what", "flag"), STUDY_FILES)
def test_a_saved_fits_results_json_is_never_merged_into(
    saved, experiment, reproduce_module, tmp_path, capsys, script, what, flag
):
    """A saved fit's results.json is never merged into: that would exit 0 with the record replaced
    or mixed with the study's entries, and the fit would not load (its SHA-256 differs)."""
    before = (saved / "results.json").read_bytes()
    code = _run(script, experiment, reproduce_module, tmp_path, what, flag, saved / "results.json")
    assert code == 2
    assert "is a file of the saved fit" in capsys.readouterr().err
    assert (saved / "results.json").read_bytes() == before
    pg.load(saved)


# The last: a headroom file whose rows are named as run records, not as the accuracies they are.
OTHER_NAMES = {"gcn": {"cora": {"best_fixed_depth_by_val": {"test_metric": {}, "val_metric": {}}}}}


@pytest.mark.parametrize(("script", "what", "flag"), STUDY_FILES)
@pytest.mark.parametrize("held", [{"dataset": "cora", "config": {}}, [1, 2], {"gcn": [1]},
                                  OTHER_NAMES])  # fmt: skip
def test_a_json_of_another_shape_is_refused_before_any_sweep(
    experiment, reproduce_module, tmp_path, capsys, script, what, flag, held
):
    """Only a JSON of the expected shape is merged into: one of another shape is refused ahead of
    any sweep, not left to fail with a traceback after the sweeps (a list, or an object of
    lists)."""
    path = tmp_path / "other.json"
    path.write_text(json.dumps(held))
    code = _run(script, experiment, reproduce_module, tmp_path, what, flag, path)
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and str(path) in err and "Traceback" not in err
    assert json.loads(path.read_text()) == held


def test_two_runs_merging_at_once_both_keep_their_entries(tmp_path):
    """Two runs merging at once both keep their entries: if each read the file, merged, and wrote it
    back, the slower one's write would lose the other's entry."""
    path = tmp_path / "merged.json"

    def add(key, delay):
        def update(old):
            time.sleep(delay)  # a run between its read and its write
            return {**old, key: {"from": key}}

        study_files.merge(path, "a test file", lambda v: isinstance(v, dict), update)

    slow = threading.Thread(target=add, args=("slow", 0.5))
    slow.start()
    time.sleep(0.1)
    add("fast", 0)
    slow.join()
    assert set(json.loads(path.read_text())) == {"slow", "fast"}


def test_a_headroom_file_that_is_the_runs_own_output_is_refused(reproduce_module, tmp_path, capsys):
    """A headroom file that is the run's own output is refused: the run would write its own
    headroom.json over the merged file, then refuse it, with the entries it held gone."""
    out = tmp_path / "o"
    out.mkdir()
    merged = out / "headroom.json"
    merged.write_text(json.dumps({"gcn": {"citeseer": {"note": "earlier"}}}))
    before = merged.read_bytes()
    argv = ["headroom", "--datasets", "cora", "--seeds", "1", "--preset", "tiny",
            "--out", str(out), "--headroom-json", str(merged)]  # fmt: skip
    assert reproduce_module.main(argv) == 2
    assert "is this run's own headroom.json" in capsys.readouterr().err
    assert merged.read_bytes() == before


def test_a_merged_json_that_is_a_link_updates_its_target(tmp_path):
    """A merged JSON that is a link updates its target, rather than replace the link by a regular
    file and leave the file it points to unchanged."""
    target = tmp_path / "real" / "merged.json"
    target.parent.mkdir()
    target.write_text(json.dumps({"a": {}}))
    link = tmp_path / "link.json"
    link.symlink_to(target)
    study_files.merge(link, "a test file", lambda v: isinstance(v, dict),
                      lambda old: {**old, "b": {}})  # fmt: skip
    assert link.is_symlink()
    assert set(json.loads(target.read_text())) == {"a", "b"}


def test_a_replaced_entry_leaves_no_depth_points_of_the_run_it_replaced(experiment, tmp_path):
    """A replaced entry leaves no depth points of the run it replaced: a study of texas without
    Policy-GNN (its entry replaced with --overwrite) would keep the replaced run's depth points, and
    the figure would still draw them."""

    results = tmp_path / "r.json"
    heterophily_table.merge_points(results, {"texas": np.ones((4, 3)), "actor": np.ones((2, 3))})
    kept = heterophily_table.merge_points(results, {"texas": np.zeros((0, 3))})
    assert set(kept) == {"actor"}
    with np.load(results.with_suffix(".depths.npz")) as z:
        assert set(z.files) == {"actor"}


def test_the_adaptive_depth_table_takes_no_run_of_another_graph_of_the_same_name(
    experiment, small_dataset
):
    """`results --datasets g2/cora` does not read results/reproduce/cora, the built-in Cora's runs,
    as that graph's rows: the data fingerprint is compared."""
    adaptive = experiment("adaptive_depth")
    score = {"mean": 0.5, "std": 0.0, "per_seed": [0.5]}
    record = {"config": {"backbone": "gcn"}, "seeds": 1, "dataset_fingerprint": "0" * 64,
              "method": "gcn", "seed_mode": "map",
              "test_metric": score, "val_metric": score}  # fmt: skip
    assert "data" in adaptive._mismatch(record, "gcn", 1, small_dataset)
    record["dataset_fingerprint"] = small_dataset.fingerprint()
    assert adaptive._mismatch(record, "gcn", 1, small_dataset) is None


@pytest.mark.parametrize("command, report", [("table", "table3"), ("ablations", "ablations")])
def test_a_report_of_other_datasets_is_not_replaced_unasked(reproduce_module, tmp_path, capsys,
                                                            command, report):  # fmt: skip
    """`table --datasets A` then `table --datasets B` on one --out does not leave a table of B alone
    without a word (the same for ablations)."""
    out = tmp_path / "o"
    out.mkdir()
    held = {"table3": {"rows": {}, "best_fixed_depth_by_val": {"citeseer": 2}, "skipped": {}},
            "ablations": {"policy-gnn": {"citeseer": {}}}}[report]  # fmt: skip
    (out / f"{report}.json").write_text(json.dumps(held))
    (out / f"{report}.md").write_text("the earlier table\n")
    argv = [command, "--datasets", "csbm", "--seeds", "1", "--preset", "tiny", "--out", str(out)]
    assert reproduce_module.main(argv) == 2
    err = capsys.readouterr().err
    assert "citeseer" in err and "--overwrite" in err, err
    assert (out / f"{report}.md").read_text() == "the earlier table\n"
    assert sorted(p.name for p in out.iterdir()) == [f"{report}.json", f"{report}.md"]


def test_a_damaged_input_json_is_not_said_to_be_remade_by_deleting_it(tmp_path):
    """An empty --ablation-json read by `results` is not said to be remade by deleting it ("Delete
    it ... to recreate it"), which only `ablate` can do."""
    path = tmp_path / "ablation.json"
    path.write_text("")
    with pytest.raises(pg.CheckpointError) as err:
        outputs.read_json(path, made_by="adaptive_depth.py ablate")
    assert "adaptive_depth.py ablate" in str(err.value) and "Delete it" not in str(err.value)


def test_a_table_report_of_another_shape_is_one_error(reproduce_module, tmp_path, capsys):
    """A table report of another shape (`{}`) is one error naming --overwrite, not a KeyError
    traceback, and is kept."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "table3.json").write_text("{}")
    argv = ["table", "--datasets", "csbm", "--seeds", "1", "--preset", "tiny", "--out", str(out)]
    assert reproduce_module.main(argv) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert json.loads((out / "table3.json").read_text()) == {}


def test_a_table_with_rows_of_other_datasets_is_kept(reproduce_module, tmp_path, capsys):
    """A row added by hand for cornell is kept in table3.json, not dropped unasked."""
    out = tmp_path / "o"
    out.mkdir()
    held = {"rows": {"gcn-d2": {"cornell": {"mean": 0.5, "std": 0.0}}},
            "best_fixed_depth_by_val": {}, "skipped": {}}  # fmt: skip
    (out / "table3.json").write_text(json.dumps(held))
    assert reproduce_module.main(_table_argv(out)) == 2
    assert "cornell" in capsys.readouterr().err
    assert json.loads((out / "table3.json").read_text()) == held


def test_a_table_md_without_its_json_is_kept(reproduce_module, tmp_path, capsys):
    """With table3.json gone, table3.md (which may hold more rows) is kept, not rewritten."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "table3.md").write_text("| my | table |\n")
    assert reproduce_module.main(_table_argv(out)) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "table3.md").read_text() == "| my | table |\n"


def test_a_table_json_that_is_a_folder_is_refused_before_any_run(reproduce_module, tmp_path,
                                                                 capsys):  # fmt: skip
    """A table3.json that is a folder is refused ahead of any run, not after the runs with "free
    some space" as the fix."""
    out = tmp_path / "o"
    (out / "table3.json").mkdir(parents=True)
    assert reproduce_module.main(_table_argv(out)) == 2
    err = capsys.readouterr().err
    assert "folder" in err and "space" not in err, err
    assert sorted(p.name for p in out.iterdir()) == ["table3.json"]  # no run folder made


def test_a_loop_of_links_under_a_merged_file_is_one_error(experiment, reproduce_module, tmp_path,
                                                          capsys):  # fmt: skip
    need("texas")
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


def test_a_users_file_read_as_a_merged_json_is_not_called_corrupt(tmp_path):
    """A user's file read as a merged JSON is said not to be JSON, not "notes.md is corrupt or
    truncated ... Delete it", a fix that would delete a user's file."""

    notes = tmp_path / "notes.md"
    notes.write_text("# my notes\n")
    with pytest.raises(pg.CheckpointError) as err:
        outputs.read_json(notes)
    assert "Delete it" not in str(err.value) and "not JSON" in str(err.value)


def test_the_headroom_json_refusal_names_the_file_given(reproduce_module, tmp_path, capsys):
    out = tmp_path / "rh"
    argv = ["headroom", "--datasets", "csbm", "--preset", "tiny", "--seeds", "1", "--out",
            str(out), "--headroom-json", str(out / "headroom.md")]  # fmt: skip
    assert reproduce_module.main(argv) == 2
    assert "headroom.md" in capsys.readouterr().err.split("is this run's own")[-1]


def test_the_adaptive_depth_table_refuses_a_graph_not_scored_by_accuracy(tmp_path):
    """Its table sets runs beside headroom rows in accuracy: on a two-class graph (ROC AUC) that
    would compare two metrics under one name."""
    from test_splits import _benchmark_file

    graph = _benchmark_file(tmp_path / "two_classes.npz", n=90, classes=2)
    for name in ("a.json", "h.json"):
        (tmp_path / name).write_text("{}")
    done = run_python("experiments/adaptive_depth.py", "results", "--datasets", str(graph),
                      "--seeds", "1", "--ablation-json", str(tmp_path / "a.json"),
                      "--headroom-json", str(tmp_path / "h.json"), "--results-json",
                      str(tmp_path / "r.json"), "--out", str(tmp_path / "o"))  # fmt: skip
    assert done.returncode == 2 and "scored by roc_auc" in done.stderr, done.stderr[-1500:]
    assert not list((tmp_path / "o").rglob("results.json"))  # nothing trained
