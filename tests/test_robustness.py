"""Results that cannot be silently wrong: one test per defect an adversarial pass found, and bad
input.

Every bad input must end in a clear error (the scripts: one `error:` line, exit status 2) before
any training where it can be known then, never in a traceback or a plausible wrong number.
"""

import dataclasses
import functools
import os

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import policy_gnn_jax as pg
from policy_gnn_jax import cli, fixed_depth, graph
from policy_gnn_jax.agents import dqn
from policy_gnn_jax.agents.base import Transition
from policy_gnn_jax.mdp import audit, env, loop, policy_gnn
from policy_gnn_jax.runtime import outputs, runner, seed_axis

# A generated graph the CLI can build quickly: 1600 nodes covers csbm's default splits.
CSBM = ["--dataset", "csbm", "--csbm-nodes", "1600", "--seeds", "1", "--no-progress"]
SMALL_RUN = ["--episodes", "1", "--steps-per-episode", "2", "--buffer-size", "16"]


def _cli(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- divergence -------------------------------------------------------------------------------


def test_gcn_divergence_is_an_error_naming_the_episode_and_the_learning_rate(small_dataset):
    """NaN GCN parameters with a finite validation accuracy are a divergence error, not a reported,
    plausible accuracy of 0.25."""
    with pytest.raises(pg.DivergenceError, match=r"episode 1 .*backbone.*--gcn-lr.*1e\+30"):
        pg.fit(small_dataset, pg.Config.tiny(gcn_lr=1e30), seeds=1, progress=False)


def test_q_network_divergence_names_the_q_learning_rate(small_dataset):
    with pytest.raises(pg.DivergenceError, match=r"agent.*--q-lr"):
        pg.fit(small_dataset, pg.Config.tiny(q_lr=1e30, num_episodes=4), seeds=1, progress=False)


def test_fixed_depth_divergence_is_caught(small_dataset):
    config = pg.Config.tiny(gcn_lr=1e30, epochs=20)
    with pytest.raises(pg.DivergenceError, match=r"epoch \d+ .*backbone.*--gcn-lr"):
        pg.fit(small_dataset, config, method="gcn", seeds=1, progress=False)


def test_cli_divergence_exits_2_with_one_error_line(capsys, tmp_path):
    code, _, err = _cli(capsys, *CSBM, *SMALL_RUN, "--gcn-lr", "1e30", "--out", str(tmp_path))
    assert code == 2
    assert err.startswith("error: training diverged in episode 1") and "Traceback" not in err
    assert not (tmp_path / "results.json").exists()


# --- exactly what was asked --------------------------------------------------------------------


def test_exactly_the_episodes_and_epochs_asked(small_dataset, small_graph):
    """Exactly the episodes and epochs asked run: the last chunk run whole would turn 2 asked into
    10 run, and 30 epochs into a curve of 40."""
    cfg = pg.Config.tiny(num_episodes=3, episodes_per_call=2)
    hops = graph.train_hop_distances(small_dataset, cfg.max_depth)
    _, metrics, results = runner.run_trainer(
        policy_gnn.make_trainer(cfg, small_graph, hops), seed_axis.seed_keys(0, 2), progress=False
    )
    chex.assert_shape(metrics["val_metric"], (2, 3))
    assert np.all(results["best_step"] < cfg.num_steps)
    b = fixed_depth.make_baseline(pg.Config.tiny(epochs=30), small_graph, epochs_per_chunk=20)
    _, metrics, results = runner.run_trainer(b, seed_axis.seed_keys(0, 2), progress=False)
    chex.assert_shape(metrics["loss"], (2, 30))
    assert np.all(results["best_epoch"] < 30)


# --- outputs -----------------------------------------------------------------------------------


def test_unwritable_output_is_refused_before_loading_or_training(capsys, tmp_path):
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    for out in (a_file, a_file / "below"):
        code, stdout, err = _cli(capsys, *CSBM, *SMALL_RUN, "--out", str(out))
        assert code == 2 and err.startswith("error: ") and str(a_file) in err
        assert "nodes" not in stdout  # refused before the dataset was even built


def test_an_interrupted_write_leaves_the_previous_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    outputs.atomic_write_json(path, {"old": 1})

    def crash(fd):
        raise KeyboardInterrupt  # as if the process died mid-write

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(KeyboardInterrupt):
        outputs.atomic_write_json(path, {"new": 2})
    assert outputs.read_json(path) == {"old": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]  # no temp left


def test_a_truncated_results_file_is_named_with_the_fix(tmp_path, capsys, cora, reproduce_module):
    """A truncated results file is named with the fix: otherwise every later `reproduce.py table`
    crashes with a bare JSONDecodeError."""
    bad = tmp_path / "cora" / "gcn-d1" / "results.json"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"dataset": "cora", "test_acc')
    code = reproduce_module.main(
        ["table", "--datasets", "cora", "--preset", "tiny", "--seeds", "1", "--out", str(tmp_path)]
    )
    err = capsys.readouterr().err
    assert (
        code == 2
        and str(bad) in err
        and "corrupt or truncated" in err
        and "delete it" in err.lower()
    )


def test_load_of_a_damaged_fit_is_a_clear_error(tmp_path):
    with pytest.raises(pg.CheckpointError, match="no saved fit"):
        pg.load(tmp_path)
    (tmp_path / "fit.json").write_text("{")
    with pytest.raises(pg.CheckpointError, match="corrupt or truncated"):
        pg.load(tmp_path)


# --- bad input to the scripts -------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--seed", str(2**64)], "--seed must be in 0..4294967295"),
        (["--seed", "-1"], "--seed must be in"),
        (["--seeds", "0"], "--seeds must be in 1.."),
        (["--depths", "2-"], "--depths must look like"),
        (["--depths", "5-2"], "min_depth <= max_depth"),
        (["--dataset", "coraa"], "Unknown dataset 'coraa'"),
        (["--dataset", "cora", "--data-dir", "/no/such/dir"], "does not exist"),
        (["--episodes", "0"], "num_episodes must be >= 1"),
        (["--csbm-homophily", "1.5"], "homophily must be in [0, 1]"),
        (["--csbm-nodes", "100"], "csbm splits need"),
        (["--checkpoint-every", "0"], "--checkpoint-every must be >= 1"),
        (["--q-lr", "inf"], "q_lr must be a finite number"),
        (["--gcn-lr", "nan"], "gcn_lr must be a finite number"),
        (["--depths", "0-4"], "Depth 0 exists only in the decoupled backbone"),
        (["--depths", "2-12"], "above the 10 the gcn backbone supports"),
        (["--backbone", "decoupled", "--depths", "0-65"], "above the 64 the decoupled"),
        (["--backbone", "decoupled", "--teleport", "1"], "teleport must be in [0, 1)"),
        (["--backbone", "decoupled", "--hidden", "0"], "hidden must be >= 1"),
        (["--method", "gcn", "--depth", "0"], "depth must be in 1..10 for the gcn backbone"),
    ],
)
def test_cli_bad_input_is_one_error_line_and_exit_2(capsys, tmp_path, argv, message):
    base = ["--dataset", "csbm", "--csbm-nodes", "1600", "--no-progress", "--out", str(tmp_path)]
    code, _, err = _cli(capsys, *base, *argv)
    assert code == 2, err
    # one error line; a warning may precede it (e.g. the base's --csbm-nodes where argv names
    # another dataset)
    lines = [line for line in err.splitlines() if not line.startswith("warning: ")]
    assert lines[0].startswith("error: ") and message in err and "Traceback" not in err


def test_too_many_seeds_are_refused_with_a_memory_estimate(small_dataset):
    """--seeds 1000000 is refused with a memory estimate, not an XLA out-of-memory traceback."""
    with pytest.raises(pg.ResourceError, match=r"seeds need about .* GiB .* use at most \d+ seeds"):
        pg.fit(small_dataset, pg.Config.tiny(), seeds=10**8, progress=False)


def test_reproduce_unknown_dataset_is_an_error_not_an_empty_table(
    tmp_path, capsys, reproduce_module
):
    """`--datasets coraa` is an error, not exit 0 as "skipped" with table3 overwritten with
    nothing."""
    (tmp_path / "table3.md").write_text("the previous table")
    code = reproduce_module.main(["table", "--datasets", "coraa", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "Unknown dataset 'coraa'" in err
    assert (tmp_path / "table3.md").read_text() == "the previous table"


def test_reproduce_missing_data_dir_exits_2(tmp_path, capsys, reproduce_module):
    code = reproduce_module.main(
        ["table", "--datasets", "cora", "--data-dir", "/no/such/dir", "--out", str(tmp_path)]
    )
    assert code == 2 and "does not exist" in capsys.readouterr().err


def test_a_missing_input_json_is_an_error_naming_it(tmp_path, capsys, adaptive_depth_module):
    """`adaptive_depth.py results` run outside the repository root names the missing input JSON, not
    a FileNotFoundError traceback for docs/results/plus_ablation.json."""
    missing = tmp_path / "no_such_ablation.json"
    argv = ["results", "--ablation-json", str(missing), "--out", str(tmp_path / "out")]
    code = adaptive_depth_module.main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and str(missing) in err
    assert "does not exist" in err


def test_adaptive_depth_ablate_refuses_the_backbones_it_would_ignore(
    tmp_path, capsys, adaptive_depth_module
):
    """`ablate --backbones foo` is refused: ablate would run (exit 0) on --backbone's default,
    ignoring --backbones."""
    argv = ["ablate", "--backbones", "gcn", "--out", str(tmp_path / "out")]
    code = adaptive_depth_module.main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ablate runs one backbone: pass --backbone")


@pytest.mark.parametrize(
    "what, flag", [("results", "--results-json"), ("ablate", "--ablation-json")]
)
def test_adaptive_depth_refuses_an_unwritable_json_before_any_run(
    tmp_path, capsys, adaptive_depth_module, what, flag
):
    folder = tmp_path / "a_file"
    folder.write_text("not a folder")
    argv = [what, "--datasets", "cora", flag, str(folder / "x.json")]
    code = adaptive_depth_module.main([*argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "x.json" in err


def test_reproduce_headroom_refuses_an_unwritable_json_before_any_run(
    tmp_path, capsys, reproduce_module
):
    """An unwritable --headroom-json is refused ahead of any run: written only after every
    fixed-depth sweep, it would end the whole computation in a traceback."""
    (tmp_path / "a_file").write_text("not a folder")
    target = tmp_path / "a_file" / "headroom.json"
    argv = ["headroom", "--datasets", "cora", "--headroom-json", str(target)]
    code = reproduce_module.main([*argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "headroom.json" in err
    assert not (tmp_path / "out" / "cora").exists()  # refused before any sweep


@pytest.mark.parametrize(
    "script, argv, message",
    [
        ("bench", ["--datasets", "coraa"], "Unknown dataset 'coraa'"),
        ("bench", ["--datasets", "cora", "--seeds", "0"], "--seeds must be >= 1"),
        ("bench", ["--datasets", "cora", "--repeats", "0"], "--repeats must be >= 1"),
        ("bench_gcn", ["--dataset", "coraa"], "Unknown dataset 'coraa'"),
        ("bench_gcn", ["--hidden", "0"], "--hidden must be >= 1"),
        ("bench_scale", ["--sizes", "0"], "--sizes must be >= 1"),
        ("bench_scale", ["--sizes", "100"], "--sizes 100: a csbm graph's splits need"),
        ("bench_scale", ["--sizes", "2000", "--episodes", "0"], "--episodes must be >= 1"),
        ("bench_scale", ["--sizes", "2000", "--degree", "nan"], "--degree must be a number > 0"),
        ("bench_scale", ["--sizes", "2000", "--data-dir", "/proc/x"], "--data-dir /proc/x cannot"),
    ],
)
def test_benchmarks_refuse_bad_input_with_an_error_line(experiment, capsys, script, argv, message):
    """Bad input is an error line: not tracebacks (unknown names, a too-small graph), nor a
    benchmark of zero seeds or a zero-wide layer that prints meaningless ratios and exits 0."""
    code = experiment(script).main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and message in err
    assert "Traceback" not in err


# --- the loop's parts, alone --------------------------------------------------------------------


@pytest.fixture(scope="module")
def random_audit_context(small_dataset, small_graph):
    cfg = pg.Config.tiny(random_policy=True, audit=True)
    hops = graph.train_hop_distances(small_dataset, cfg.max_depth)
    return policy_gnn.make_context(cfg, small_graph), policy_gnn.mdp_data(small_graph, hops)


def test_one_mdp_step_alone(random_audit_context):
    ctx, data = random_audit_context
    state = policy_gnn.init(ctx, data, jax.random.key(0))
    new, (metrics, _, _) = jax.jit(lambda d, s: loop.mdp_step(ctx, d, s))(data, state)
    assert int(new.step) == 1 and float(new.best.val_metric) == float(metrics["val_metric"])
    assert int(metrics["action_counts"].sum()) == ctx.env.num_walkers
    chex.assert_trees_all_equal_shapes(new, state)


def test_the_audit_key_is_independent_of_every_other(random_audit_context):
    """The audit key is independent of every other: drawn with the validation key, the random
    policy's audit depths would equal its validation depths element for element."""
    ctx, data = random_audit_context
    seen = {}

    def spy_observe(key, g, params, policy):
        seen["audit"] = jax.random.key_data(key)
        return {}

    spy = audit.Observer(observe=spy_observe, summarise=lambda m: {}, evaluate=lambda g, p, d: {})
    ctx = ctx._replace(observer=spy)
    state = policy_gnn.init(ctx, data, jax.random.key(3))
    loop.mdp_step(ctx, data, state)  # not jitted: the spy sees a concrete key
    others = jax.random.key_data(jax.random.split(state.key, 5))  # key, act, val, env, learn
    assert not np.any(np.all(np.asarray(others) == np.asarray(seen["audit"]), axis=1))
    # And so the random policy's audit depths differ from its validation depths.
    g = data.graph
    val = ctx.agent.depths(jax.random.wrap_key_data(others[2]), (), g, g.val_index)
    audit_depths = ctx.agent.depths(jax.random.wrap_key_data(seen["audit"]), (), g, g.val_index)
    assert not np.array_equal(val, audit_depths)


def test_replay_and_buffers_check_dtypes_at_entry():
    """dqn.replay_add checks dtypes at entry rather than cast whatever it gets (float node ids would
    become ints silently)."""
    memory = dqn.replay_init(8)
    ints, floats = jnp.arange(3), jnp.zeros(3)
    with pytest.raises(AssertionError):
        dqn.replay_add(memory, Transition(floats, ints, floats, ints))
    with pytest.raises(AssertionError):
        dqn.replay_add(memory, Transition(ints, ints, ints, ints))  # int rewards
    buffers = env.init_buffers(2, 4)
    with pytest.raises(AssertionError):
        env.add_to_buffers(buffers, ints, ints, ints)  # valid must be bool
    with pytest.raises(AssertionError):
        env.add_to_buffers(buffers, ints, jnp.arange(4), jnp.ones(3, bool))


def test_backbone_too_shallow_for_the_policy_is_refused(small_dataset, small_graph):
    cfg = pg.Config.tiny()
    shallow = pg.gcn_backbone(cfg, small_graph, max_depth=cfg.max_depth - 1)
    hops = graph.train_hop_distances(small_dataset, cfg.max_depth)
    with pytest.raises(pg.ConfigError, match=r"the backbone computes depths 1\.\.2 but the policy"):
        policy_gnn.make_trainer(cfg, small_graph, hops, backbone=shallow)
    # A backbone that starts above the policy's lowest depth is refused too.
    high = pg.gcn_backbone(cfg, small_graph, min_depth=cfg.min_depth + 1)
    with pytest.raises(pg.ConfigError, match="min_depth <= config.min_depth"):
        policy_gnn.make_trainer(cfg, small_graph, hops, backbone=high)


def test_config_replace_is_validated():
    with pytest.raises(pg.ConfigError):
        dataclasses.replace(pg.Config.tiny(), dropout=1.0)


def test_the_adaptive_depth_table_takes_only_runs_of_its_backbone_and_seed_count(
    adaptive_depth_module, small_dataset
):
    """`results` takes only runs of its backbone and seed count, not whatever preset or seed count
    ran last in the cache."""
    mismatch = functools.partial(adaptive_depth_module._mismatch, ds=small_dataset)
    score = {"mean": 0.5, "std": 0.0, "per_seed": [0.5] * 10}
    record = {"config": {"backbone": "gcn"}, "seeds": 10, "method": "gcn", "seed_mode": "map",
              "test_metric": score, "val_metric": score,
              "dataset_fingerprint": small_dataset.fingerprint()}  # fmt: skip
    assert mismatch(record, "gcn", 10) is None
    another_version = {k: v for k, v in record.items() if k != "test_metric"}
    assert "this version" in mismatch({**another_version, "test_accuracy": {}}, "gcn", 10)
    assert "3 seeds, not 10" in mismatch({**record, "seeds": 3}, "gcn", 10)
    assert "gcn-readout backbone" in mismatch(
        {**record, "config": {"backbone": "gcn-readout"}}, "gcn", 10
    )
