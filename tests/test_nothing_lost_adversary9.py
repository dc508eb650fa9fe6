"""Findings of the tenth adversarial pass (processes' checkpoints and launchers, generators'
keyword arguments, JAX_DISABLE_JIT, the heterophily script's splits and options): each a test
that failed before its fix."""

import os
import subprocess
import sys

import jax
import pytest
from test_heterophily import HETEROPHILY_DIR, _need
from test_processes import COMMAND, _flags, _launch

import policy_gnn_jax as pg
from policy_gnn_jax.runtime import checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize(
    "name, kwargs, message",
    [
        ("csbm", dict(num_nodes=1600, split=3), "csbm takes no split"),  # before: a TypeError
        ("planted", dict(num_nodes=500), "planted takes no num_nodes"),  # before: a TypeError
        ("cora", dict(download="no"), "download must be True or False"),  # before: truthy
    ],
)
def test_load_datasets_arguments_are_named(name, kwargs, message):
    with pytest.raises(pg.DataError, match=message):
        pg.load_dataset(name, **kwargs)


def test_disabled_jit_is_named(small_dataset):
    """Before: JAX's own "Disable jit is not supported in the AOT path"."""
    jax.config.update("jax_disable_jit", True)
    try:
        with pytest.raises(pg.ConfigError, match="JAX_DISABLE_JIT"):
            pg.fit(small_dataset, pg.Config.tiny(epochs=2), method="gcn", seeds=1, progress=False)
    finally:
        jax.config.update("jax_disable_jit", False)


def test_a_launcher_variable_without_an_address_is_named(tmp_path):
    """Before: "could not join ... within 300 s (coordinator_address should be defined.)", naming
    neither the variable that made the command join nor what failed at once."""
    env = {**os.environ, "SLURM_NTASKS": "2"}
    done = subprocess.run([*COMMAND, "--out", str(tmp_path / "o")], env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "SLURM_NTASKS=2" in last and "300 s" not in last, last
    assert not (tmp_path / "o").exists()


def test_a_one_process_checkpoint_is_not_ignored_by_a_run_over_two(tmp_path):
    """Before: the run over two processes trained from scratch beside the one-process
    checkpoint, which could then never be resumed."""
    ckpt = tmp_path / "ckpt"
    env = {**os.environ, checkpoint.KILL_AFTER_SAVES_ENV: "1"}
    argv = [*COMMAND, "--checkpoint-dir", str(ckpt), "--checkpoint-every", "1"]
    killed = subprocess.run([*argv, "--out", str(tmp_path / "one")], env=env,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert killed.returncode != 0 and any(p.name.isdigit() for p in ckpt.iterdir())
    done = _launch(lambda i, port: [*argv, "--out", str(tmp_path / "two"),
                                    *_flags(i, port, 2)], 2)  # fmt: skip
    for p in done:
        assert p.returncode == 2, p.stderr[-2000:]
    assert "checkpoints of a run in one process" in done[0].stderr.strip().splitlines()[-1]
    assert not list(ckpt.glob("process-*"))


def _heterophily(tmp_path, what, *extra):
    argv = [sys.executable, "experiments/heterophily.py", what, "--datasets", "texas",
            "--data-dir", str(HETEROPHILY_DIR), "--seeds", "1", "--max-depth", "0",
            "--num-splits", "1", "--out", str(tmp_path / "runs"),
            "--options-json", str(tmp_path / "options.json"),
            "--results-json", str(tmp_path / "results.json"),
            "--figure", str(tmp_path / "depths.png"), *extra]  # fmt: skip
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_more_splits_than_the_benchmark_has_are_refused(tmp_path):
    """Before: --num-splits 11 ran the ten there were, without a word."""
    _need("texas.npz")
    done = _heterophily(tmp_path, "options", "--num-splits", "11")
    assert done.returncode == 2
    assert "--num-splits 11: texas has 10 splits" in done.stderr.strip().splitlines()[-1]


def test_a_study_without_chosen_options_says_so(tmp_path):
    """Before: a missing --options-json silently meant the plain options."""
    _need("texas.npz")
    done = _heterophily(tmp_path, "study", "--skip", "policy-gnn", "random", "policy-gnn-plus")
    assert done.returncode == 0, done.stderr
    assert "holds no options chosen for texas" in done.stderr
