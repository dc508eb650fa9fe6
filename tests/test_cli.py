"""The command line a newcomer reads: grouped flags, `--set FIELD=VALUE` for every Config field,
`--show-config`, and every earlier flag still accepted."""

import dataclasses
import json
import re

import pytest

from policy_gnn_jax import cli
from policy_gnn_jax import config as config_lib


def _config(*argv):
    return cli.config_from_args(cli.build_parser().parse_args(list(argv)))


def test_every_config_field_is_in_exactly_one_section():
    listed = [name for names in config_lib.SECTIONS.values() for name in names]
    fields = [f.name for f in dataclasses.fields(config_lib.Config)]
    assert sorted(listed) == sorted(fields)


def test_help_shows_at_most_twenty_flags_in_groups(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    shown = set(re.findall(r"^  (--[a-z-]+)", text, re.M))
    assert "--set" in shown and "--show-config" in shown
    assert len(shown - {"--set", "--show-config"}) <= 20, sorted(shown)
    for group in ("what to run:", "depths and length:", "how it runs:", "data and output:"):
        assert group in text
    assert "--q-lr" not in shown and "--csbm-nodes" not in shown  # hidden, still accepted


@pytest.mark.parametrize(
    "item, field, value",
    [
        ("hidden=32", "hidden", 32),
        ("q_lr=1e-3", "q_lr", 0.001),
        ("transition=walk", "transition", "walk"),
        ("audit=true", "audit", True),
        ("random_policy=0", "random_policy", False),
        ("fanouts=10,10,5", "fanouts", (10, 10, 5)),
        ("q_hidden=64", "q_hidden", (64,)),
    ],
)
def test_set_parses_each_field_by_its_type(item, field, value):
    assert getattr(_config("--set", item), field) == value


def test_set_wins_over_a_flag_and_old_flags_still_work():
    assert _config("--hidden", "32", "--set", "hidden=8").hidden == 8
    assert _config("--q-lr", "0.002").q_lr == 0.002
    assert _config("--fanouts", "3,2").fanouts == (3, 2)
    assert _config("--backbone", "decoupled", "--set", "teleport=0.2").teleport == 0.2


@pytest.mark.parametrize(
    "item, message",
    [
        ("qlr=1", "no field 'qlr'. Did you mean q_lr"),
        ("hidden=16.5", "hidden takes a whole number, got '16.5'"),
        ("hidden", "--set takes FIELD=VALUE"),
        ("=3", "--set takes FIELD=VALUE"),
        ("audit=maybe", "audit takes true or false"),
        ("fanouts=a,b", "fanouts takes whole numbers separated by commas"),
        ("dropout=1.5", "dropout must be in [0, 1)"),
    ],
)
def test_a_bad_set_is_one_error_line(item, message, capsys, tmp_path):
    code = cli.main(["--set", item, "--out", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and message in err
    assert not (tmp_path / "out").exists()


def test_show_config_prints_every_field_by_section_and_trains_nothing(capsys, tmp_path):
    code = cli.main(["--data-dir", str(tmp_path / "none"), "--set", "gamma=0.9", "--show-config"])
    out = capsys.readouterr().out
    assert code == 0
    assert [line.strip("[]") for line in out.splitlines() if line.startswith("[")] == list(
        config_lib.SECTIONS
    )
    assert "  gamma = 0.9" in out.splitlines()
    assert len([line for line in out.splitlines() if " = " in line]) == len(
        dataclasses.fields(config_lib.Config)
    )


def _warnings(capsys, *argv):
    cli.warn_unused_flags(cli.build_parser().parse_args(list(argv)))
    return capsys.readouterr().err


def test_a_set_field_the_method_never_reads_is_warned_about(capsys):
    err = _warnings(capsys, "--method", "gcn", "--set", "q_lr=0.1", "--set", "hidden=8")
    assert "warning: --set q_lr is not used by --method gcn." in err
    assert "hidden" not in err  # the fixed-depth GCN reads it
    err = _warnings(capsys, "--method", "policy-gnn", "--set", "epochs=3", "--set", "q_lr=0.1")
    assert "--set epochs is not used" in err and "q_lr" not in err
    # Not read, so not parsed either: warned about like another method's own field.
    err = _warnings(capsys, "--method", "gcn", "--set", "q_lr=oops")
    assert err.strip() == "warning: --set q_lr is not used by --method gcn."
    assert _warnings(capsys, "--method", "gcn", "--set", "hidden=oops") == ""  # refused later


def test_a_value_the_method_never_reads_is_not_parsed_either(capsys):
    """A field the method ignores is dropped before its value is read, as another method's own
    field is: an unreadable or repeated value there is the warning alone, not a refusal."""
    argv = ["--dataset", "csbm", "--method", "random", "--set", "replay_capacity=abc", "--set",
            "q_lr=1", "--set", "q_lr=2", "--show-config"]  # fmt: skip
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "--set replay_capacity is not used by --method random." in err
    assert "--set q_lr is not used by --method random." in err and "error" not in err


def test_a_set_field_the_method_never_reads_is_not_applied(capsys, tmp_path):
    """--set of a field the method ignores is not applied, as a flag of one is not: the random
    policy reads no replay memory, so a replay_capacity under the DQN's batch is no refusal, and
    the record holds no value that was never read."""
    argv = ["--dataset", "csbm", "--csbm-nodes", "1600", "--seeds", "1", "--episodes", "1",
            "--steps-per-episode", "2", "--method", "random", "--set", "replay_capacity=50",
            "--no-progress", "--out", str(tmp_path / "o")]  # fmt: skip
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "warning: --set replay_capacity is not used by --method random." in err
    record = json.loads((tmp_path / "o" / "results.json").read_text())
    assert record["config"]["replay_capacity"] == config_lib.Config.replay_capacity


def test_show_config_prints_the_config_the_method_runs(capsys):
    """--show-config prints what the run's record will hold: the random policy runs with
    random_policy on, which the method sets itself."""
    assert cli.main(["--dataset", "csbm", "--method", "random", "--show-config"]) == 0
    assert "  random_policy = True" in capsys.readouterr().out.splitlines()


def test_more_devices_than_exist_is_refused_before_the_data_is_read(capsys, tmp_path):
    """--devices above the local device count is refused before any data is read: here the
    data folder is empty, and the one error names --devices, not the missing files."""
    (tmp_path / "empty").mkdir()
    argv = ["--dataset", "cora", "--data-dir", str(tmp_path / "empty"), "--no-download",
            "--devices", "3", "--out", str(tmp_path / "o")]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--devices" in err[0] and "ind.cora" not in err[0], err


def test_the_fields_a_method_ignores_are_config_fields():
    from policy_gnn_jax import methods

    fields = {f.name for f in dataclasses.fields(config_lib.Config)}
    for name in methods.names():
        assert methods.get(name).ignores <= fields, name


def test_a_script_stopped_by_a_signal_says_so_in_one_line(capsys):
    """SIGTERM ends the benchmarks with a line too, and only a script that saves claims that runs
    "saved before it are kept", which benchmarks do not do."""
    from policy_gnn_jax.runtime import runner

    def stopped(error):
        raise error

    assert cli.exit_status(stopped, KeyboardInterrupt(), saves=False) == 130
    assert capsys.readouterr().err == "error: interrupted.\n"
    assert cli.exit_status(stopped, runner.Terminated()) == 143
    assert "kept and reused" in capsys.readouterr().err


def test_a_signal_inside_a_garbage_collection_callback_is_noted_not_raised():
    """Raised there, it would be printed as "Exception ignored in _xla_gc_callback" and
    dropped; noted instead, the runner raises it at its next check."""
    import signal
    import types

    from policy_gnn_jax.cli import process
    from policy_gnn_jax.runtime import runner

    frame = types.SimpleNamespace(f_code=types.SimpleNamespace(co_name="_xla_gc_callback"))
    try:
        process._stop(signal.SIGINT, frame)  # returns: nothing raised
        assert runner.stop_signal == [signal.SIGINT]
        with pytest.raises(KeyboardInterrupt):
            runner.raise_if_stopped()  # the runner's next check raises it
    finally:
        runner.stop_signal.clear()
