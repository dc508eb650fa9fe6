"""A run's output folder: never replaced or mixed by accident, refused in one line when it
cannot be a folder of results, and left as found when the run fails."""

import json
import os
import pathlib

import pytest
from reliability_helpers import run_quick, toy_fits

import policy_gnn_jax as pg
from policy_gnn_jax.runtime import locks, outputs


@pytest.fixture(scope="module")
def two_seed_fits():
    """The toy graph and two two-seed fits of it, seeds 0 and 1."""
    return toy_fits(seeds=2)


@pytest.fixture(scope="module")
def one_seed_fits():
    """The toy graph and two one-seed fits of it, seeds 0 and 1."""
    return toy_fits(seeds=1)


def _last_error(capsys) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_default_output_folders_are_new_and_distinct(tmp_path):
    """Default output folders are new and distinct: with a name of one-second resolution and an
    existing folder reused, runs started in the same second would write into one folder."""
    made = [outputs.new_folder(tmp_path / "results", "cora-policy-gnn") for _ in range(20)]
    assert len(set(made)) == 20 and all(folder.is_dir() for folder in made)
    assert all(str(os.getpid()) in folder.name for folder in made)


def test_two_runs_without_out_keep_both_results(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run_quick("--seed", "0") == 0 and run_quick("--seed", "1") == 0
    found = sorted((tmp_path / "results").glob("*/results.json"))
    assert len(found) == 2
    assert {json.loads(p.read_text())["seed"] for p in found} == {0, 1}


def test_an_out_holding_a_result_is_refused_unless_overwrite(tmp_path, capsys):
    out = tmp_path / "out"
    assert run_quick("--out", str(out), "--seed", "0") == 0
    before = (out / "results.json").read_bytes()
    capsys.readouterr()
    assert run_quick("--out", str(out), "--seed", "1") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "--overwrite" in err and str(out) in err
    assert (out / "results.json").read_bytes() == before
    assert run_quick("--out", str(out), "--seed", "1", "--overwrite") == 0
    assert json.loads((out / "results.json").read_text())["seed"] == 1
    assert pg.load(out).record["seed"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing left beside it
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # nor inside it


def test_output_files_follow_the_umask(two_seed_fits, tmp_path):
    """Output files follow the umask: every file 0600 whatever the umask would make a shared results
    folder unreadable."""
    old = os.umask(0o022)
    try:
        two_seed_fits[1][0].save(tmp_path / "a")
    finally:
        os.umask(old)
    for name in ("results.json", "fit.json", "snapshots.npz", "dataset.npz"):
        assert (tmp_path / "a" / name).stat().st_mode & 0o777 == 0o644, name


def test_new_folder_is_exclusive(tmp_path):
    """Two processes asking in the same microsecond still get two folders (mkdir is atomic)."""
    first = outputs.new_folder(tmp_path, "x")
    assert pathlib.Path(first).is_dir()
    assert outputs.new_folder(tmp_path, "x") != first


def test_overwrite_replaces_the_result_and_keeps_every_other_file(tmp_path):
    """--overwrite replaces the result and keeps every other file: renaming the whole folder aside
    and deleting it would lose a thesis, a checkpoint, the cwd."""
    out = tmp_path / "w"
    assert run_quick("--out", str(out)) == 0
    (out / "thesis.tex").write_text("mine")
    (out / "src").mkdir()
    (out / "src" / "main.py").write_text("code")
    assert run_quick("--out", str(out), "--seed", "1", "--overwrite") == 0
    assert (out / "thesis.tex").read_text() == "mine"
    assert (out / "src" / "main.py").read_text() == "code"
    assert json.loads((out / "results.json").read_text())["seed"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w"]  # nothing left beside it
    hidden = [p.name for p in out.iterdir() if p.name.startswith(".")]
    assert hidden == [], hidden


def test_a_folder_with_a_file_of_a_result_name_is_not_written_without_overwrite(
    one_seed_fits, tmp_path
):
    """A user's own dataset.npz is not replaced without --overwrite, though with no results.json
    there the folder holds "no result"."""
    (tmp_path / "dataset.npz").write_bytes(b"mine")
    assert run_quick("--out", str(tmp_path)) == 2
    assert (tmp_path / "dataset.npz").read_bytes() == b"mine"
    with pytest.raises(pg.CheckpointError, match="overwrite"):
        one_seed_fits[1][0].save(tmp_path)
    assert (tmp_path / "dataset.npz").read_bytes() == b"mine"


def test_save_into_a_symlinked_folder(one_seed_fits, tmp_path):
    """Saving into a symlinked folder works: a folder swap that renames over the symlink would fail
    with NotADirectoryError after training."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    one_seed_fits[1][0].save(tmp_path / "link")
    assert (tmp_path / "real" / "fit.json").exists()
    one_seed_fits[1][1].save(tmp_path / "link", overwrite=True)
    assert pg.load(tmp_path / "real").record["seed"] == 1
    assert (tmp_path / "link").is_symlink()


@pytest.mark.parametrize("flag", ["--out", "--checkpoint-dir", "--data-dir"])
def test_an_empty_path_is_refused(flag, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [flag, ""] + (["--out", str(tmp_path / "o")] if flag != "--out" else [])
    assert run_quick(*argv) == 2
    assert flag in capsys.readouterr().err


def test_overwrite_refuses_a_result_name_that_is_a_folder_before_training(tmp_path, capsys):
    out = tmp_path / "o"
    assert run_quick("--out", str(out)) == 0
    (out / "results.json").unlink()
    (out / "results.json").mkdir()
    assert run_quick("--out", str(out), "--overwrite") == 2
    assert "results.json" in capsys.readouterr().err
    assert (out / "fit.json").exists()  # nothing was removed


def test_overwrite_keeps_a_users_folder_named_like_staging(tmp_path):
    out = tmp_path / "o"
    assert run_quick("--out", str(out)) == 0
    (out / ".staging-notes").mkdir()
    (out / ".staging-notes" / "a.txt").write_text("mine")
    assert run_quick("--out", str(out), "--overwrite") == 0
    assert (out / ".staging-notes" / "a.txt").read_text() == "mine"


def test_a_checkpoint_folder_that_is_a_file_is_named(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    argv = ["--out", str(tmp_path / "o1"), "--checkpoint-dir", str(tmp_path / "afile")]
    assert run_quick(*argv) == 2
    assert "is an existing file, not a folder" in _last_error(capsys)


def test_an_out_ending_in_a_slash_names_a_folder_and_is_refused(tmp_path):
    """`--out dir8/` names a folder and is refused, not written as a file named `dir8`."""
    with pytest.raises(pg.CheckpointError, match="folder"):
        locks.claim_output_file(f"{tmp_path}/dir8/", overwrite=False)
    assert not (tmp_path / "dir8").exists()


def test_a_new_out_can_be_written_again_by_its_run(tmp_path):
    out = tmp_path / "r.json"
    locks.claim_output_file(out, overwrite=False)
    try:
        outputs.atomic_write_text(out, "first")
        outputs.atomic_write_text(out, "second")  # a script that saves as it goes
    finally:
        locks.release_output_locks()
    assert out.read_text() == "second"


def test_a_link_to_nowhere_in_place_of_a_result_is_a_result(tmp_path):
    """A dangling results.json link in --out is a result, not replaced without --overwrite: exists()
    follows the link, and its result may be on a disk that is not mounted."""
    from policy_gnn_jax.runtime import outputs

    (tmp_path / "results.json").symlink_to("/nonexistent/old_results.json")
    with pytest.raises(pg.CheckpointError, match="--overwrite"):
        outputs.check_no_result(tmp_path, False, "--overwrite")
