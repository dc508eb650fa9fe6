"""The probe table (tools/probes.py): every bad input and fault an adversarial user tried ends in
one clear error. Run in process, so the table costs seconds, not a JAX import per probe."""

import subprocess
import sys

import pytest
from conftest import PLANETOID_DIR, ROOT, _experiment, benchmark_available

import policy_gnn_jax as pg
from policy_gnn_jax import cli
from policy_gnn_jax.contrib.reproduction import command as reproduce_command

sys.path.insert(0, str(ROOT / "tools"))  # the table lives beside the script that prints it
import probes  # noqa: E402


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    cora = str(PLANETOID_DIR) if benchmark_available("cora") else None
    return probes.prepare(tmp_path_factory.mktemp("probes"), cora)


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """As the table runs: offline, an empty cache, no data folder from the environment."""
    monkeypatch.setenv("POLICY_GNN_OFFLINE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("POLICY_GNN_DATA", raising=False)


def _main(target: str):
    if target == "@cli":
        return lambda argv: cli.main(["--no-progress", *argv])
    if target == "@reproduce":
        return reproduce_command.main
    return _experiment(target[1:]).main


def _exit_code(main, argv) -> int:
    try:
        return main(argv)
    except SystemExit as stop:  # argparse refuses a flag this way
        return stop.code


COMMAND_PROBES = [
    pytest.param(
        name,
        command,
        id=name,
        marks=[pytest.mark.benchmark_data("cora")] if probes.needs_cora(command) else [],
    )
    for name, command in probes.CLI_PROBES + probes.SCRIPT_PROBES
]


@pytest.mark.parametrize("name, command", COMMAND_PROBES)
def test_a_bad_command_line_is_one_clear_error(name, command, paths, offline, capsys):
    target, *argv = probes.expand(command, paths)
    code = _exit_code(_main(target), argv)
    err = capsys.readouterr().err.strip()
    last = err.splitlines()[-1] if err else ""
    assert code not in (0, None), f"{name}: exit 0"
    assert "Traceback" not in err
    assert last.startswith("error:") or ": error:" in last, f"{name}: {last!r}"


@pytest.mark.parametrize("name, body", probes.API_PROBES, ids=[n for n, _ in probes.API_PROBES])
def test_a_bad_api_call_is_one_clear_exception(name, body, offline):
    scope = {}
    exec(probes.API_PRELUDE, scope)  # noqa: S102
    with pytest.raises((ValueError, FloatingPointError, pg.DataError)) as caught:
        exec(body, scope)  # noqa: S102
    assert str(caught.value).strip(), f"{name}: an empty message"


def test_the_table_classifies_a_traceback_and_a_success_as_failures():
    """The fresh-process classifier (tools/probe_bad_inputs.py) must be able to fail."""
    crash = subprocess.run([sys.executable, "-c", "1/0"], capture_output=True, text=True)
    fine = subprocess.run([sys.executable, "-c", "print('ok')"], capture_output=True, text=True)
    clear = subprocess.run(
        [sys.executable, "-c", "import sys; print('error: bad', file=sys.stderr); sys.exit(2)"],
        capture_output=True,
        text=True,
    )
    assert probes.classify(crash)[0] == "TRACEBACK"
    assert probes.classify(fine)[0] == "EXIT 0 (wrong)"
    assert probes.classify(clear)[0] == "clear error"


def test_the_table_refuses_an_only_that_names_no_probe(tmp_path, capsys):
    """`--only` that matches no probe's name is a typo, not an empty table (found by an
    independent tester): one error line, exit 2, nothing written."""
    import probe_bad_inputs

    argv = ["--data-dir", str(tmp_path), "--out", str(tmp_path / "out"), "--only", "zzzz_no_probe"]
    assert probe_bad_inputs.main(argv) == 2
    assert "error: --only zzzz_no_probe matches no probe" in capsys.readouterr().err
    assert not (tmp_path / "out" / "probes.md").exists()
