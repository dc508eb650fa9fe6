"""JAX's persistent compilation cache, on by default: a second run reads its programs back
instead of compiling them, and computes the same bits as with a cold cache or none."""

import json
import os
import subprocess
import sys

COMMAND = [
    sys.executable, "-m", "policy_gnn_jax.cli", "--dataset", "csbm", "--csbm-nodes", "1600",
    "--seeds", "2", "--episodes", "2", "--episodes-per-call", "2", "--steps-per-episode", "2",
    "--buffer-size", "16", "--no-progress",
]  # fmt: skip
COMPARED = ("test_metric", "val_metric", "val_metric_curve", "best_step", "test_depths",
            "train_action_share", "gcn_updates_per_step")  # fmt: skip


def _run(out, cache: str):
    # The suite's own shared cache is left out: this test chooses the cache of each run.
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PERSISTENT_CACHE")}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env["POLICY_GNN_COMPILATION_CACHE"] = cache
    done = subprocess.run([*COMMAND, "--out", str(out)], env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((out / "results.json").read_text())


def _entries(folder):
    return sorted(p.name for p in folder.rglob("*") if p.is_file())


def test_a_warm_cache_gives_the_bits_of_a_cold_one_and_of_none(tmp_path):
    cache = tmp_path / "cache"
    cold = _run(tmp_path / "cold", str(cache))
    written = _entries(cache)
    assert written and cold["compilation_cache"] == str(cache)
    warm = _run(tmp_path / "warm", str(cache))
    assert _entries(cache) == written  # every program read back: nothing compiled again
    off = _run(tmp_path / "off", "off")
    assert off["compilation_cache"] is None
    for field in COMPARED:
        assert warm[field] == cold[field] == off[field], field


def _folder_in_use(value: str, tmp_path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env.update(POLICY_GNN_COMPILATION_CACHE=value, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    code = "from policy_gnn_jax.runtime import compilation as c; print(c.use_persistent_cache())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def test_the_switch_reads_on_and_off_words_and_refuses_a_file(tmp_path):
    default = str(tmp_path / "xdg" / "policy_gnn_jax" / "compiled")
    for word, folder in (("on", default), ("yes", default), ("1", default), ("Off", "None")):
        done = _folder_in_use(word, tmp_path)
        assert done.stdout.strip() == folder, (word, done.stderr[-1000:])
    (tmp_path / "a_file").write_text("")
    done = _folder_in_use(str(tmp_path / "a_file"), tmp_path)
    assert done.returncode != 0 and "POLICY_GNN_COMPILATION_CACHE" in done.stderr
