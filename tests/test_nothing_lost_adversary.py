"""Findings of an adversarial pass over the output, lock and manifest handling: each a test that
failed before its fix."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from test_nothing_lost import _run, _toy  # the same tiny run and toy graph

import policy_gnn_jax as pg
from policy_gnn_jax import cli
from policy_gnn_jax.runtime import outputs


@pytest.fixture(scope="module")
def fits():
    ds = _toy()
    config = pg.Config.tiny(epochs=3)
    return ds, [pg.fit(ds, config, method="gcn", seeds=1, seed=s, progress=False) for s in (0, 1)]


def test_overwrite_replaces_the_result_and_keeps_every_other_file(tmp_path):
    """Before: the whole folder was renamed aside and deleted (a thesis, a checkpoint, the cwd)."""
    out = tmp_path / "w"
    assert _run("--out", str(out)) == 0
    (out / "thesis.tex").write_text("mine")
    (out / "src").mkdir()
    (out / "src" / "main.py").write_text("code")
    assert _run("--out", str(out), "--seed", "1", "--overwrite") == 0
    assert (out / "thesis.tex").read_text() == "mine"
    assert (out / "src" / "main.py").read_text() == "code"
    assert json.loads((out / "results.json").read_text())["seed"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w"]  # nothing left beside it
    hidden = [p.name for p in out.iterdir() if p.name.startswith(".")]
    assert hidden == [], hidden


def test_a_folder_with_a_file_of_a_result_name_is_not_written_without_overwrite(fits, tmp_path):
    """Before: a user's own dataset.npz was replaced (no results.json there, so "no result")."""
    (tmp_path / "dataset.npz").write_bytes(b"mine")
    assert _run("--out", str(tmp_path)) == 2
    assert (tmp_path / "dataset.npz").read_bytes() == b"mine"
    with pytest.raises(pg.CheckpointError, match="overwrite"):
        fits[1][0].save(tmp_path)
    assert (tmp_path / "dataset.npz").read_bytes() == b"mine"


def test_save_into_a_symlinked_folder(fits, tmp_path):
    """Before: NotADirectoryError after training (the folder swap renamed over a symlink)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    fits[1][0].save(tmp_path / "link")
    assert (tmp_path / "real" / "fit.json").exists()
    fits[1][1].save(tmp_path / "link", overwrite=True)
    assert pg.load(tmp_path / "real").record["seed"] == 1
    assert (tmp_path / "link").is_symlink()


def test_overwrite_must_be_a_bool(fits, tmp_path):
    """Before: overwrite="False" replaced a saved fit (a non-empty string is true)."""
    fits[1][0].save(tmp_path / "f")
    with pytest.raises(pg.ConfigError, match="overwrite"):
        fits[1][1].save(tmp_path / "f", overwrite="False")
    assert pg.load(tmp_path / "f").record["seed"] == 0


HOLDER = textwrap.dedent(
    """
    import sys, time
    from policy_gnn_jax.runtime import outputs
    with outputs.FolderLock(sys.argv[1]):
        print("held", flush=True)
        time.sleep(60)
    """
)


def _holder(folder):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"held"
    return proc


def test_a_lock_is_one_per_folder_through_a_symlink_and_dies_with_its_owner(tmp_path, capsys):
    """Before: a symlinked path had a lock of its own, and a lock read as stale was deleted
    whoever had taken it since (two holders at once)."""
    (tmp_path / "ck").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "ck")
    holder = _holder(tmp_path / "ck")
    try:
        with pytest.raises(pg.CheckpointError, match=f"process {holder.pid}"):
            with outputs.FolderLock(tmp_path / "link"):
                pass
    finally:
        holder.kill()
        holder.wait()
    with outputs.FolderLock(tmp_path / "link"):  # its owner died: free at once
        pass


def test_locks_raced_by_many_processes_have_one_holder_at_a_time(tmp_path):
    """Eight processes take one lock in turn, each recording when it held it; no two spans
    overlap."""
    code = textwrap.dedent(
        """
        import sys, time
        from policy_gnn_jax.runtime import outputs
        for _ in range(200):
            try:
                with outputs.FolderLock(sys.argv[1]):
                    start = time.time(); time.sleep(0.02); end = time.time()
                print(start, end); break
            except Exception:
                time.sleep(0.005)
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "x")], stdout=subprocess.PIPE)
        for _ in range(8)
    ]
    spans = sorted(tuple(map(float, p.communicate()[0].split())) for p in procs)
    assert len(spans) == 8
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans


def test_labels_are_range_checked_when_num_classes_is_given():
    """Before: with num_classes=2 a label 2**32 + 1 was stored as 1."""
    labels = np.arange(60, dtype=np.int64) % 2
    labels[3] = 2**32 + 1
    with pytest.raises(pg.InvalidDatasetError, match=str(2**32 + 1)):
        pg.from_arrays(np.ones((60, 2)), [[0, 1, 2], [1, 2, 3]], labels, [0, 1], [2, 3],
                       [4, 5], num_classes=2)  # fmt: skip
    labels = labels.astype(np.uint64)
    labels[3] = 2**64 - 2
    with pytest.raises(pg.InvalidDatasetError, match=str(2**64 - 2)):
        pg.from_arrays(np.ones((60, 2)), [[0, 1, 2], [1, 2, 3]], labels, [0, 1], [2, 3],
                       [4, 5], num_classes=2)  # fmt: skip


@pytest.mark.parametrize("files", [{}, [], {"results.json": "0" * 64}])
def test_a_manifest_that_lists_less_is_refused(fits, tmp_path, files):
    """Before: "files": {} made load trust any snapshots.npz."""
    fits[1][0].save(tmp_path / "f")
    meta = json.loads((tmp_path / "f" / "fit.json").read_text())
    meta["files"] = files
    (tmp_path / "f" / "fit.json").write_text(json.dumps(meta))
    with pytest.raises(pg.CheckpointError, match="fit.json"):
        pg.load(tmp_path / "f")


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m.update(num_leaves="3"),
        lambda m: m.update(num_leaves=m["num_leaves"] + 1),  # was blamed on snapshots.npz
        lambda m: m.update(num_leaves=m["num_leaves"] - 1),
        lambda m: m.pop("dataset_fingerprint"),
        lambda m: m.update(config=5),
        lambda m: m.update(custom="backbone"),
        lambda m: m["config"].update(q_hidden="32"),
    ],
)
def test_a_hand_edited_fit_json_is_named(fits, tmp_path, change):
    fits[1][0].save(tmp_path / "f")
    meta = json.loads((tmp_path / "f" / "fit.json").read_text())
    change(meta)
    (tmp_path / "f" / "fit.json").write_text(json.dumps(meta))
    with pytest.raises(pg.CheckpointError, match="fit.json") as err:
        pg.load(tmp_path / "f")
    assert "snapshots.npz is damaged" not in str(err.value)


def test_load_of_something_not_a_path_is_one_error():
    with pytest.raises(pg.CheckpointError, match="folder"):
        pg.load(5)


def test_a_checkpoint_resumes_only_in_its_seed_mode(tmp_path, capsys):
    """Before: a vmapped run's checkpoint resumed under --seed-mode map."""
    argv = ["--dataset", "csbm", "--csbm-nodes", "1600", "--seeds", "2", "--episodes", "4"]
    argv += ["--set", "episodes_per_call=2", "--checkpoint-every", "1", "--no-progress"]
    argv += ["--checkpoint-dir", str(tmp_path / "ck")]
    assert cli.main([*argv, "--out", str(tmp_path / "a")]) == 0
    code = cli.main([*argv, "--seed-mode", "map", "--out", str(tmp_path / "b")])
    assert code == 2 and "different run" in capsys.readouterr().err


def test_set_backbone_gets_that_backbones_preset():
    """Before: --set backbone=decoupled kept the gcn preset (hidden 16, depths 2-5)."""
    flag = cli.config_from_args(cli.build_parser().parse_args(["--backbone", "decoupled"]))
    via_set = cli.config_from_args(cli.build_parser().parse_args(["--set", "backbone=decoupled"]))
    assert via_set == flag


@pytest.mark.parametrize("names", [["2019", "2020"], ["2020.csv", "1.txt"]])
def test_a_folder_of_numbered_things_is_not_a_checkpoint(tmp_path, capsys, names):
    """Before: numbered folders or files passed as checkpoint steps (and the error said to
    delete the folder)."""
    folder = tmp_path / "years"
    folder.mkdir()
    for name in names:
        (folder / name).mkdir() if "." not in name else (folder / name).write_text("x")
    assert _run("--out", str(tmp_path / "o"), "--checkpoint-dir", str(folder)) == 2
    err = capsys.readouterr().err
    assert "not a policy-gnn checkpoint" in err and "Delete" not in err


def test_a_data_variable_naming_no_folder_is_an_error(monkeypatch, tmp_path):
    """Before: POLICY_GNN_DATA=/no/such/dir fell back to the cache without a word."""
    monkeypatch.setenv("POLICY_GNN_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(pg.DataError, match="POLICY_GNN_DATA"):
        pg.load_dataset("cora")


@pytest.mark.parametrize("flag", ["--out", "--checkpoint-dir", "--data-dir"])
def test_an_empty_path_is_refused(flag, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [flag, ""] + (["--out", str(tmp_path / "o")] if flag != "--out" else [])
    assert _run(*argv) == 2
    assert flag in capsys.readouterr().err


def test_out_and_checkpoint_dir_must_differ(tmp_path, capsys):
    assert _run("--out", str(tmp_path / "x"), "--checkpoint-dir", str(tmp_path / "x")) == 2
    assert "--checkpoint-dir" in capsys.readouterr().err


def test_huge_seed_counts_and_class_counts_are_one_error(tmp_path, capsys):
    assert _run("--seeds", str(10**20), "--out", str(tmp_path / "o")) == 2
    assert not (tmp_path / "o").exists()
    with pytest.raises(pg.InvalidDatasetError, match="num_classes"):
        pg.from_arrays(np.ones((6, 2)), [[0, 1, 2], [1, 2, 3]], np.arange(6) % 2, [0, 1], [2, 3],
                       [4, 5], num_classes=2**40)  # fmt: skip


def test_numpy_scalars_are_accepted_in_a_config():
    assert pg.Config(hidden=np.int64(32), gamma=np.float32(0.5)).hidden == 32
    assert type(pg.Config(hidden=np.int64(32)).hidden) is int


def test_a_float_beyond_float32_is_refused_in_a_config():
    with pytest.raises(pg.ConfigError, match="reward_scale"):
        pg.Config(reward_scale=1e39)


@pytest.mark.parametrize("value", ["nan", "inf", "0"])
def test_csbm_degree_is_named(value, tmp_path, capsys):
    code = cli.main(["--dataset", "csbm", "--csbm-degree", value, "--out", str(tmp_path / "o")])
    assert code == 2 and "--csbm-degree" in capsys.readouterr().err


def test_show_config_needs_no_device(tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="bogus")
    done = subprocess.run(
        [sys.executable, "-m", "policy_gnn_jax.cli", "--dataset", "csbm", "--show-config"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_predict_of_no_nodes(fits):
    ds, (first, _) = fits
    assert first.predict([]).shape == (1, 0)


def test_int_features_that_float32_rounds_are_counted():
    features = np.ones((60, 2), dtype=np.int64)
    features[0, 0] = 2**24 + 1
    with pytest.warns(UserWarning, match="1 feature value"):
        pg.from_arrays(features, [[0, 1, 2], [1, 2, 3]], np.arange(60) % 2, [0, 1], [2, 3], [4, 5])
