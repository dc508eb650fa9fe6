"""Settings: a Config value, a --set or a flag that would break later, or that the method never
reads, is one clear error or warning up front."""

import dataclasses
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from conftest import split_graph_gcn
from reliability_helpers import TWO_EPISODE_CONFIG, path_graph_arrays, run_quick

import policy_gnn_jax as pg
from policy_gnn_jax import cli
from policy_gnn_jax.contrib.adaptive_depth import plus


def _warnings(capsys, *argv):
    cli.warn_unused_flags(cli.build_parser().parse_args(list(argv)))
    return capsys.readouterr().err


@pytest.fixture(scope="module")
def path_graph():
    features, edges, labels, splits = path_graph_arrays()
    return pg.from_arrays(features, edges, labels, **splits, symmetrise=True)


def test_set_backbone_gets_that_backbones_preset():
    """--set backbone=decoupled gets the decoupled preset, as --backbone does, not the gcn preset
    (hidden 16, depths 2-5)."""
    flag = cli.config_from_args(cli.build_parser().parse_args(["--backbone", "decoupled"]))
    via_set = cli.config_from_args(cli.build_parser().parse_args(["--set", "backbone=decoupled"]))
    assert via_set == flag


def test_huge_seed_counts_and_class_counts_are_one_error(tmp_path, capsys):
    assert run_quick("--seeds", str(10**20), "--out", str(tmp_path / "o")) == 2
    assert not (tmp_path / "o").exists()
    with pytest.raises(pg.InvalidDatasetError, match="num_classes"):
        pg.from_arrays(np.ones((6, 2)), [[0, 1, 2], [1, 2, 3]], np.arange(6) % 2, [0, 1], [2, 3],
                       [4, 5], num_classes=2**40)  # fmt: skip


def test_a_float_beyond_float32_is_refused_in_a_config():
    with pytest.raises(pg.ConfigError, match="reward_scale"):
        pg.Config(reward_scale=1e39)


def test_show_config_needs_no_device(tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="bogus")
    done = subprocess.run(
        [sys.executable, "-m", "policy_gnn_jax.cli", "--dataset", "csbm", "--show-config"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_a_set_that_replaces_a_flag_says_so(capsys):
    """`--episodes 3 --set num_episodes=5` says the --set replaces the 3, rather than run 5 episodes
    without a word."""
    assert "--set num_episodes=5 replaces --episodes 3." in _warnings(
        capsys, "--episodes", "3", "--set", "num_episodes=5"
    )
    assert "--set backbone=decoupled replaces --backbone gcn." in _warnings(
        capsys, "--backbone", "gcn", "--set", "backbone=decoupled"
    )
    assert "--set min_depth=3 replaces --depths 2-4." in _warnings(
        capsys, "--depths", "2-4", "--set", "min_depth=3"
    )
    assert _warnings(capsys, "--episodes", "3", "--set", "num_episodes=3") == ""  # agree


def test_a_set_that_replaces_a_flag_changes_the_config_as_before():
    args = cli.build_parser().parse_args(["--hidden", "8", "--set", "hidden=16"])
    assert cli.config_from_args(args).hidden == 16


def test_a_hidden_flag_the_method_never_reads_is_warned_about(capsys):
    """A flag the method never reads, such as `--q-lr`, is warned about as `--set q_lr=` is, not
    dropped silently."""
    err = _warnings(capsys, "--method", "gcn", "--q-lr", "0.5", "--fanouts", "5,5")
    assert "warning: --q-lr is not used by --method gcn." in err
    assert "warning: --fanouts is not used by --method gcn." in err
    err = _warnings(capsys, "--method", "random", "--q-lr", "0.5")
    assert "--q-lr is not used by --method random" in err


def test_a_set_replacing_either_end_of_depths_is_said(capsys):
    cli.warn_unused_flags(cli.build_parser().parse_args(["--depths", "2-4", "--set",
                                                          "max_depth=3"]))  # fmt: skip
    assert "--set max_depth=3 replaces --depths 2-4." in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--dataset", "cora", "--csbm-nodes", "5"], "--csbm-nodes is not used by --dataset cora"),
        (["--checkpoint-every", "2"], "--checkpoint-every is not used without --checkpoint-dir"),
        (["--dataset", "csbm", "--data-dir", "/tmp"], "--data-dir is not used by --dataset csbm"),
        # The same flags at their default values: given, so still said (before: silent).
        (["--dataset", "cora", "--csbm-nodes", "3000"], "--csbm-nodes is not used by --dataset"),
        (["--dataset", "planted", "--csbm-degree", "5"], "--csbm-degree is not used by --data"),
        (["--checkpoint-every", "5"], "--checkpoint-every is not used without --checkpoint-dir"),
    ],
)
def test_data_flags_that_are_not_used_are_said(capsys, argv, flag):
    cli.warn_unused_flags(cli.build_parser().parse_args(argv))
    assert flag in capsys.readouterr().err


def test_the_decoupled_options_message_fits_a_set_backbone():
    with pytest.raises(pg.ConfigError, match="with no --set backbone= naming another"):
        pg.Config(ego_head=True)


def test_the_selection_half_holds_both_classes_under_roc_auc():
    """Under ROC AUC, Policy-GNN+ splits the validation nodes so that each half holds both classes:
    split at random, a half of one class scores 0.5 at every epoch and the first snapshot is
    kept."""
    labels = jax.numpy.array([0] * 18 + [1] * 2)
    for seed in range(20):
        order = jax.random.permutation(jax.random.key(seed), 20)
        arranged = np.asarray(plus.stratified(order, labels, 2))
        assert sorted(arranged.tolist()) == list(range(20))
        for cut in (8, 10, 12):  # each half keeps a positive (its expected share is >= 0.8)
            assert labels[arranged[:cut]].sum() >= 1 and labels[arranged[cut:]].sum() >= 1


def test_devices_zero_names_the_flag(tmp_path):
    """--devices 0 names the flag, not "devices must be None or a whole number >= 1": None is not a
    flag's value."""
    done = subprocess.run(
        [sys.executable, "-m", "policy_gnn_jax.cli", "--dataset", "csbm", "--devices", "0",
         "--out", str(tmp_path / "o")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == "error: --devices must be >= 1, got 0."
    assert not (tmp_path / "o").exists()


def test_the_audit_is_refused_under_roc_auc(path_graph):
    """The audit is refused under ROC AUC: audit.honest_test_accuracy would hold the ROC AUC beside
    an accuracy."""
    two_class = dataclasses.replace(path_graph, metric="roc_auc")
    with pytest.raises(pg.ConfigError, match="audit reproduces the released code's accuracy"):
        pg.fit(
            two_class, dataclasses.replace(TWO_EPISODE_CONFIG, audit=True), seeds=1, progress=False
        )


def test_a_flag_the_method_ignores_is_warned_about_and_not_applied(tmp_path, capsys):
    """--depths 0-3 with --method gcn is warned about as unused and not applied, not warned about
    and then refused."""
    from policy_gnn_jax import cli

    argv = [*split_graph_gcn(tmp_path), "--epochs", "2", "--depths", "0-3"]
    assert cli.main([*argv, "--out", str(tmp_path / "o")]) == 0
    assert "--depths is not used by --method gcn" in capsys.readouterr().err


def test_too_many_walkers_for_the_replay_buffer_name_both_fields(small_dataset):
    """Too many walkers for the replay buffer name both fields, not "adding 1000 transitions at once
    exceeds capacity 256"."""
    config = dataclasses.replace(TWO_EPISODE_CONFIG, num_walkers=1000)
    with pytest.raises(ValueError, match="replay_capacity.*num_walkers"):
        pg.fit(small_dataset, config, seeds=1, progress=False)


@pytest.mark.parametrize("field", ["gcn_lr", "q_lr", "weight_decay", "teleport", "dropout"])
def test_a_value_float32_rounds_to_zero_is_refused(field):
    """gcn_lr=1e-50 is refused: it passes "> 0" and would train with a learning rate of 0."""
    with pytest.raises(pg.ConfigError, match=f"{field} is 1e-50, which float32 .* rounds to 0"):
        pg.Config(**{field: 1e-50})
    pg.Config(**{field: 1e-30})  # small, and still itself in float32


def test_one_field_set_twice_to_different_values_is_refused():
    """`--set hidden=8 --set hidden=32` is refused, not kept as 32 without a word."""
    with pytest.raises(pg.ConfigError, match="--set hidden is given twice, as 8 and as 32"):
        pg.config.parse_overrides(["hidden=8", "hidden=32"])
    assert pg.config.parse_overrides(["hidden=8", "hidden= 8"]) == {"hidden": 8}


def test_a_value_for_a_field_the_method_ignores_is_the_warning_alone(capsys):
    """A field the method ignores is not applied, so its value is neither refused nor recorded:
    the one line is the warning (a flag of an ignored field is treated alike); a refused value
    of a field the method reads is the one error line."""
    argv = ["--dataset", "csbm", "--method", "gcn", "--set", "episodes_per_call=0",
            "--show-config"]  # fmt: skip
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert err == ["warning: --set episodes_per_call is not used by --method gcn."]
    assert f"episodes_per_call = {pg.Config.episodes_per_call}" in captured.out
    argv = ["--dataset", "csbm", "--method", "gcn", "--set", "hidden=0", "--show-config"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "hidden" in err[0]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: pg.Config(hiden=32), "Config has no field 'hiden'. Did you mean hidden"),
        (lambda: pg.Config.tiny(hiden=32), "Config has no field 'hiden'. Did you mean hidden"),
        (lambda: pg.Config.paper(None), "takes keyword arguments only"),
        (lambda: pg.Config(reward_scale=-100.0), "reward_scale must be > 0"),
        (
            lambda: pg.Config(subgraph_nodes=2**31 - 1, subgraph_edges=2**31 - 1),
            "subgraph_nodes and subgraph_edges must be at most 1073741824",
        ),
        (
            lambda: pg.Config(num_episodes=2**30, steps_per_episode=4),
            "num_episodes x steps_per_episode",
        ),
    ],
)
def test_config_values_that_broke_later_are_refused_when_built(make, message):
    """Each value is refused when the Config is built, where it would otherwise give a bare
    TypeError without a hint, a negative reward scale that trains the agent toward the worst depths,
    or sizes that overflow int32 inside JAX."""
    with pytest.raises(pg.ConfigError, match=message):
        make()


@pytest.mark.parametrize(
    ("method", "switch"),
    [("policy-gnn", "random_policy"), ("gcn", "audit"), ("policy-gnn-plus", "audit")],
)
def test_a_switch_the_method_never_reads_is_said(method, switch):
    """A switch the method never reads is said: random_policy=True with policy-gnn trains the DQN
    (the record says False), and audit=True with gcn does no audit, which would otherwise pass
    without a word."""
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


def test_a_learning_rate_float32_flushes_to_zero_is_not_told_to_be_zero():
    """A learning rate float32 flushes to zero is not told to "pass 0, or at least 1.175e-38": 0 is
    refused too."""
    with pytest.raises(pg.ConfigError) as err:
        pg.Config(gcn_lr=1e-45)
    assert "pass 0" not in str(err.value) and "1.175e-38" in str(err.value)
