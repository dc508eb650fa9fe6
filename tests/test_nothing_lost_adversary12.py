"""Findings of the fifteenth adversarial pass: the studies' merged JSON files (a saved fit's
results.json or any JSON taken for one, two runs merging at once, a malformed headroom file),
repeated names, runs reused on other data, settings a method never reads, paths of the wrong
type, JAX's strict modes, an input graph inside --out, and the backend variable named. Each a
test that failed before its fix."""

import json
import threading
import time

import jax
import pytest
from test_heterophily import HETEROPHILY_DIR

import policy_gnn_jax as pg
from policy_gnn_jax.runtime import study_files


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


@pytest.mark.parametrize(("script", "what", "flag"), STUDY_FILES)
def test_a_saved_fits_results_json_is_never_merged_into(
    saved, experiment, reproduce_module, tmp_path, capsys, script, what, flag
):
    """Before: exit 0, the record replaced or mixed with the study's entries, and the fit no
    longer loaded (its SHA-256 differed)."""
    before = (saved / "results.json").read_bytes()
    code = _run(script, experiment, reproduce_module, tmp_path, what, flag, saved / "results.json")
    assert code == 2
    assert "is a file of the saved fit" in capsys.readouterr().err
    assert (saved / "results.json").read_bytes() == before
    pg.load(saved)


@pytest.mark.parametrize(("script", "what", "flag"), STUDY_FILES)
@pytest.mark.parametrize("held", [{"dataset": "cora", "config": {}}, [1, 2], {"gcn": [1]}])
def test_a_json_of_another_shape_is_refused_before_any_sweep(
    experiment, reproduce_module, tmp_path, capsys, script, what, flag, held
):
    """Before: any JSON object was merged into (a list, or an object of lists, failed with a
    traceback after the sweeps)."""
    path = tmp_path / "other.json"
    path.write_text(json.dumps(held))
    code = _run(script, experiment, reproduce_module, tmp_path, what, flag, path)
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and str(path) in err and "Traceback" not in err
    assert json.loads(path.read_text()) == held


def test_two_runs_merging_at_once_both_keep_their_entries(tmp_path):
    """Before: each run read the file, merged, and wrote it back: the slower one's write lost
    the other's entry."""
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


@pytest.mark.parametrize("flag", ["--datasets", "--backbones"])
def test_a_name_given_twice_to_adaptive_depth_is_refused(experiment, tmp_path, capsys, flag):
    """Before: every record was written twice."""
    values = ["cora", "cora"] if flag == "--datasets" else ["decoupled", "decoupled"]
    argv = ["results", flag, *values, "--out", str(tmp_path / "runs"),
            "--results-json", str(tmp_path / "r.json")]  # fmt: skip
    assert experiment("adaptive_depth").main(argv) == 2
    assert "is named twice" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [b"/tmp", 123])
def test_a_path_of_the_wrong_type_is_the_librarys_error(tmp_path, bad):
    """Before: pathlib's own TypeError from deep inside (bytes, an int)."""
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    with pytest.raises(pg.DataError, match="data_dir must be a folder's path"):
        pg.load_dataset("texas", data_dir=bad)
    with pytest.raises(pg.DataError, match="must be a folder's path"):
        pg.data.load_arrays(bad)
    with pytest.raises(pg.CheckpointError, match="checkpoint folder must be a path"):
        pg.fit(ds, pg.Config.tiny(epochs=2), method="gcn", seeds=1, checkpoint_dir=bad)


def test_reproduce_does_not_reuse_a_run_made_on_other_data(reproduce_module, tmp_path, capsys):
    """Before: a dataset given as a path whose file now holds another graph got the saved run's
    numbers (the saved data fingerprint was not compared)."""
    first = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100, seed=0)
    other = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100, seed=1)
    cfg = pg.Config.tiny(epochs=2)
    out = tmp_path / "run"
    reproduce_module.run_or_load(out, first, cfg, "gcn", 1)
    with pytest.raises(pg.CheckpointError, match="its data differ"):
        reproduce_module.run_or_load(out, other, cfg, "gcn", 1)
    reproduce_module.run_or_load(out, first, cfg, "gcn", 1)
    assert "reusing" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("method", "switch"),
    [("policy-gnn", "random_policy"), ("gcn", "audit"), ("policy-gnn-plus", "audit")],
)
def test_a_switch_the_method_never_reads_is_said(method, switch):
    """Before: random_policy=True with policy-gnn trained the DQN (the record said False), and
    audit=True with gcn did no audit, both without a word."""
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    cfg = pg.Config.tiny(num_episodes=2, epochs=2, **{switch: True})
    with pytest.warns(UserWarning, match=f"Config.{switch}=True is not used by method"):
        pg.fit(ds, cfg, method=method, seeds=1, progress=False)


@pytest.mark.parametrize("method", ["random", "policy-gnn"])
def test_a_switch_the_method_reads_is_not_warned_about(method, recwarn):
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    cfg = pg.Config.tiny(num_episodes=2, random_policy=method == "random", audit=True)
    pg.fit(ds, cfg, method=method, seeds=1, progress=False)
    assert not [w for w in recwarn if "is not used by method" in str(w.message)]


@pytest.mark.parametrize(
    ("name", "value", "variable"),
    [
        ("jax_numpy_rank_promotion", "raise", "JAX_NUMPY_RANK_PROMOTION"),
        ("jax_numpy_dtype_promotion", "strict", "JAX_NUMPY_DTYPE_PROMOTION"),
    ],
)
def test_jaxs_strict_numpy_modes_are_refused_up_front(name, value, variable):
    """Before: a broadcasting error from deep inside the agent, naming no fix."""
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    cfg = pg.Config.tiny(num_episodes=2)  # built before the mode is set
    old = getattr(jax.config, name)
    jax.config.update(name, value)
    try:
        with pytest.raises(pg.ConfigError, match=f"{variable}={value}"):
            pg.fit(ds, cfg, method="policy-gnn", seeds=1, progress=False)
    finally:
        jax.config.update(name, old)


@pytest.mark.parametrize("extra", [[], ["--overwrite"], ["--splits", "0-1", "--overwrite"]])
def test_an_input_graph_that_a_result_would_replace_is_refused(tmp_path, capsys, extra):
    """Before: refused with advice to pass --overwrite, which then replaced the user's graph
    (DIR/dataset.npz) with the fit's own dataset file."""
    out = tmp_path / "o"
    out.mkdir()
    graph = out / "dataset.npz"
    graph.write_bytes((HETEROPHILY_DIR / "texas.npz").read_bytes())
    before = graph.read_bytes()
    argv = ["--dataset", str(graph), "--method", "gcn", "--epochs", "2", "--seeds", "1",
            "--no-progress", "--out", str(out), *extra]  # fmt: skip
    assert pg.cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "would be replaced" in err and "--overwrite" not in err.split("would be replaced")[1]
    assert graph.read_bytes() == before


def test_the_backend_variable_that_was_set_is_the_one_named(tmp_path):
    """Before: JAX_PLATFORM_NAME=cuda was answered with "Unset JAX_PLATFORMS", a variable that
    was not set."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    env["JAX_PLATFORM_NAME"] = "cuda"
    argv = [sys.executable, "-m", "policy_gnn_jax.cli", "--dataset", "texas", "--data-dir",
            str(HETEROPHILY_DIR), "--method", "gcn", "--epochs", "2", "--seeds", "1",
            "--no-progress", "--out", str(tmp_path / "o")]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "Unset JAX_PLATFORM_NAME" in done.stderr and "JAX_PLATFORMS" not in done.stderr


@pytest.mark.parametrize("value", [[16, 16], "16,16"])
def test_a_config_field_of_the_wrong_type_is_refused_in_pythons_words(value):
    """Before: `Config(q_hidden=[16, 16])` was told to pass "whole numbers separated by commas",
    the command line's form."""
    with pytest.raises(pg.ConfigError, match=r"q_hidden must be a tuple of whole numbers, e\.g\. "):
        pg.Config.tiny(q_hidden=value)


@pytest.mark.parametrize("script", ["experiments/reproduce.py", "experiments/heterophily.py"])
@pytest.mark.parametrize(("signum", "code"), [(2, 130), (15, 143)])
def test_a_stop_while_a_script_starts_is_one_line(tmp_path, script, signum, code):
    """Before: a KeyboardInterrupt traceback from inside JAX's imports for Ctrl-C, and no line
    at all for SIGTERM (the process died of the signal)."""
    import signal
    import subprocess
    import sys

    from conftest import ROOT

    what, name = ("table", "cora") if "reproduce" in script else ("study", "texas")
    argv = [sys.executable, script, what, "--datasets", name, "--out", str(tmp_path / "o")]
    child = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    time.sleep(0.4)  # the package is imported, JAX is loading
    child.send_signal(signum)
    out, err = child.communicate(timeout=120)
    assert child.returncode == code, err
    assert err.strip() == "error: interrupted while starting; nothing was run."
    assert out == "" and not (tmp_path / "o").exists()
