"""Checkpoint folders: a run resumes only from its own checkpoints and refuses, in one line,
what is not one of them."""

import dataclasses
import pathlib
import subprocess

import pytest
from conftest import dies_after_first_save, split_graph_gcn
from reliability_helpers import TINY_RUN, run_python, run_quick, toy_fits, toy_graph
from test_processes import COMMAND, _flags, _launch

import policy_gnn_jax as pg
from policy_gnn_jax import cli
from policy_gnn_jax.cli import command


@pytest.fixture(scope="module")
def one_seed_fits():
    """The toy graph and two one-seed fits of it, seeds 0 and 1."""
    return toy_fits(seeds=1)


@pytest.fixture(scope="module")
def checkpointed(small_dataset, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt")
    config = pg.Config.tiny(num_episodes=4, episodes_per_call=2)
    fit = pg.fit(small_dataset, config, seeds=2, progress=False, checkpoint_dir=folder,
                 checkpoint_every=1)  # fmt: skip
    return folder, config, fit


def _last_error(capsys) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def fitted():
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    return pg.fit(ds, pg.Config.tiny(epochs=2), method="gcn", seeds=1, progress=False)


def _loop(tmp_path) -> pathlib.Path:
    (tmp_path / "loopA").symlink_to(tmp_path / "loopB")
    (tmp_path / "loopB").symlink_to(tmp_path / "loopA")
    return tmp_path / "loopA"


def test_a_user_folder_given_as_checkpoint_dir_is_not_a_checkpoint(tmp_path, capsys):
    """A user's folder given as --checkpoint-dir is said not to be a checkpoint, without "written by
    another version of policy-gnn-jax ... Delete <folder>", advice that would delete a user's
    files."""
    folder = tmp_path / "my_notes"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    assert run_quick("--out", str(tmp_path / "out"), "--checkpoint-dir", str(folder)) == 2
    err = capsys.readouterr().err
    assert "not a policy-gnn checkpoint" in err and "Delete" not in err
    assert (folder / "notes.txt").read_text() == "mine"


def test_a_checkpoint_resumes_only_in_its_seed_mode(tmp_path, capsys):
    """A vmapped run's checkpoint is refused under --seed-mode map."""
    argv = ["--dataset", "csbm", "--csbm-nodes", "1600", "--seeds", "2", "--episodes", "4"]
    argv += ["--set", "episodes_per_call=2", "--checkpoint-every", "1", "--no-progress"]
    argv += ["--checkpoint-dir", str(tmp_path / "ck")]
    assert cli.main([*argv, "--seed-mode", "vmap", "--out", str(tmp_path / "a")]) == 0
    code = cli.main([*argv, "--seed-mode", "map", "--out", str(tmp_path / "b")])
    assert code == 2 and "different run" in capsys.readouterr().err


@pytest.mark.parametrize("names", [["2019", "2020"], ["2020.csv", "1.txt"]])
def test_a_folder_of_numbered_things_is_not_a_checkpoint(tmp_path, capsys, names):
    """Numbered folders or files do not pass as checkpoint steps, and the error does not say to
    delete the folder."""
    folder = tmp_path / "years"
    folder.mkdir()
    for name in names:
        (folder / name).mkdir() if "." not in name else (folder / name).write_text("x")
    assert run_quick("--out", str(tmp_path / "o"), "--checkpoint-dir", str(folder)) == 2
    err = capsys.readouterr().err
    assert "not a policy-gnn checkpoint" in err and "Delete" not in err


def test_out_and_checkpoint_dir_must_differ(tmp_path, capsys):
    assert run_quick("--out", str(tmp_path / "x"), "--checkpoint-dir", str(tmp_path / "x")) == 2
    assert "--checkpoint-dir" in capsys.readouterr().err


def test_fit_save_refuses_a_checkpoint_folder(one_seed_fits, tmp_path):
    (tmp_path / "ck" / "3").mkdir(parents=True)
    (tmp_path / "ck" / "3" / "meta.json").write_text("{}")
    with pytest.raises(pg.CheckpointError, match="checkpoint"):
        one_seed_fits[1][0].save(tmp_path / "ck")


def test_a_checkpoint_of_another_class_count_is_refused_in_one_line(tmp_path, capsys):
    """num_classes is in the fingerprint: a checkpoint of another class count is refused in one
    line, not with a traceback per array."""
    ds = toy_graph()
    import dataclasses

    other = dataclasses.replace(ds, num_classes=3)
    config = pg.Config.tiny(num_episodes=2, episodes_per_call=1)
    pg.fit(ds, config, seeds=1, progress=False, checkpoint_dir=tmp_path / "ck")
    with pytest.raises(pg.CheckpointError, match="different run"):
        pg.fit(other, config, seeds=1, progress=False, checkpoint_dir=tmp_path / "ck")


def test_an_api_checkpoint_folder_of_other_files_is_named_in_the_apis_words(tmp_path):
    """`fit(..., checkpoint_dir=)` is told about `checkpoint_dir`, not about `--checkpoint-dir`
    only."""
    import policy_gnn_jax as pg

    (tmp_path / "mine.txt").write_text("x")
    ds = pg.load_dataset("csbm", num_nodes=1600)
    with pytest.raises(pg.CheckpointError, match="checkpoint_dir") as err:
        pg.fit(ds, pg.Config.tiny(epochs=1), method="gcn", seeds=1, progress=False,
               checkpoint_dir=tmp_path)  # fmt: skip
    assert str(tmp_path) in str(err.value) and "mine.txt" in str(err.value)


def test_a_checkpoint_of_the_former_format_is_refused_and_kept(tmp_path, capsys):
    """orbax's step folders (what policy-gnn-jax 0.2 wrote) are refused naming the version, and
    the folder is left as it was: neither resumed nor replaced by the new format's steps."""
    step = tmp_path / "ck" / "5"
    step.mkdir(parents=True)
    (step / "_CHECKPOINT_METADATA").write_text("{}")
    assert run_quick("--out", str(tmp_path / "o"), "--checkpoint-dir", str(tmp_path / "ck")) == 2
    err = capsys.readouterr().err
    assert "0.2" in err and "orbax" in err and err.count("error:") == 1
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == ["5"]


def test_a_resumed_run_says_so_and_counts_the_earlier_time(checkpointed, small_dataset):
    """A resumed run's record says it resumed, and its wall_time_s counts the processes it resumed
    from too: otherwise it looks like a fresh run that took only the last process's time."""
    folder, config, first = checkpointed
    assert first.record["resumed"] is None
    again = pg.fit(small_dataset, config, seeds=2, progress=False, checkpoint_dir=folder)
    resumed = again.record["resumed"]
    assert resumed["units_done_before"] == 4
    assert 0 < resumed["wall_time_s_before"] <= first.record["wall_time_s"] + 1.0
    total = resumed["wall_time_s_before"] + again.record["wall_time_s"]
    assert resumed["wall_time_s_total"] == pytest.approx(total)


def test_a_refused_checkpoint_names_what_changed(checkpointed, small_dataset):
    """A refused checkpoint names what changed, not "a different run (another dataset, config,
    method, ...)", whichever it is."""
    folder, config, _ = checkpointed
    with pytest.raises(pg.CheckpointError, match=r"seeds: 2 there, 3 here"):
        pg.fit(small_dataset, config, seeds=3, progress=False, checkpoint_dir=folder)
    other = dataclasses.replace(config, hidden=config.hidden + 1)
    with pytest.raises(pg.CheckpointError, match=rf"hidden: {config.hidden} there"):
        pg.fit(small_dataset, other, seeds=2, progress=False, checkpoint_dir=folder)


def test_a_sweeps_checkpoint_folder_is_recognised(tmp_path, capsys):
    """A sweep's checkpoint folder is recognised, not called one that "holds files that are not a
    policy-gnn checkpoint (split-0, split-1)"."""
    from policy_gnn_jax import cli

    ckpt = tmp_path / "ck"
    (ckpt / "split-0").mkdir(parents=True)
    (ckpt / "split-1").mkdir()
    argv = [
        *split_graph_gcn(tmp_path),
        "--epochs",
        "2",
        "--out",
        str(tmp_path / "o"),
        "--checkpoint-dir",
        str(ckpt),
    ]
    assert cli.main(argv) == 2
    assert "a --splits sweep's checkpoints" in _last_error(capsys)


def test_a_one_process_checkpoint_is_not_ignored_by_a_run_over_two(tmp_path):
    """A run over two processes refuses the one-process checkpoint rather than train from scratch
    beside it, which would leave that checkpoint never to be resumed."""
    ckpt = tmp_path / "ckpt"
    flags = ["--checkpoint-dir", str(ckpt), "--checkpoint-every", "1"]
    argv = [*COMMAND, *flags]
    dies = [*dies_after_first_save(COMMAND), *flags, "--out", str(tmp_path / "one")]
    killed = subprocess.run(dies, capture_output=True, text=True, timeout=300)
    assert killed.returncode != 0 and any(p.name.isdigit() for p in ckpt.iterdir())
    done = _launch(lambda i, port: [*argv, "--out", str(tmp_path / "two"),
                                    *_flags(i, port, 2)], 2)  # fmt: skip
    for p in done:
        assert p.returncode == 2, p.stderr[-2000:]
    assert "checkpoints of a run in one process" in done[0].stderr.strip().splitlines()[-1]
    assert not list(ckpt.glob("process-*"))


@pytest.mark.parametrize("path", ["", "  "])
def test_an_empty_checkpoint_dir_is_refused(tmp_path, monkeypatch, path):
    """checkpoint_dir="" is refused: it would write the checkpoints into the current folder."""
    monkeypatch.chdir(tmp_path)
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    with pytest.raises(pg.CheckpointError, match="checkpoint folder is an empty path"):
        pg.fit(ds, pg.Config.tiny(num_episodes=1), seeds=1, checkpoint_dir=path, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_a_fit_is_not_saved_over_a_sweeps_checkpoint_folder(tmp_path, small_dataset):
    """A `--splits` sweep's `--checkpoint-dir` holds one checkpoint folder per split (`split-K/`),
    and `Fit.save` into the folder above them is refused: it would mix a result into the checkpoints
    a resumed sweep reads."""
    import policy_gnn_jax as pg

    config = pg.Config.tiny(num_episodes=2)
    fitted = pg.fit(small_dataset, config, seeds=1, progress=False,
                    checkpoint_dir=tmp_path / "ckpt" / "split-0")  # fmt: skip
    with pytest.raises(pg.CheckpointError, match="checkpoint"):
        fitted.save(tmp_path / "ckpt")
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["split-0"]


def test_a_checkpoint_whose_arrays_are_damaged_ends_in_one_error_line(tmp_path):
    """The run says in one error line which step folder to delete."""
    run = [*TINY_RUN[:-4], "--episodes", "2", "--set", "steps_per_episode=2",
           "--set", "episodes_per_call=1", "--checkpoint-every", "1"]  # fmt: skip
    ckpt = tmp_path / "ck"
    first = run_python(*run, "--out", str(tmp_path / "o1"), "--checkpoint-dir", str(ckpt))
    assert first.returncode == 0, first.stderr[-2000:]
    chunks = list(ckpt.rglob("run.npz"))
    assert chunks
    for path in chunks:
        path.write_bytes(path.read_bytes()[:100])
    again = run_python(*run, "--out", str(tmp_path / "o2"), "--checkpoint-dir", str(ckpt))
    assert again.returncode == 2, again.stderr[-3000:]
    said = [line for line in again.stderr.splitlines() if "error: the checkpoint" in line]
    assert len(said) == 1 and "Delete that step folder" in said[0], again.stderr[-3000:]


def test_a_loop_of_links_as_the_checkpoint_folder_is_one_error(tmp_path, capsys):

    loop = _loop(tmp_path)
    argv = ["--dataset", "csbm", "--seeds", "1", "--method", "gcn", "--epochs", "1"]
    assert command.main([*argv, "--out", str(tmp_path / "o"), "--checkpoint-dir", str(loop)]) == 2
    assert "loop" in capsys.readouterr().err
