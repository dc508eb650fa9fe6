"""Exactness and compilation: two processes give the same bits, every program takes the graph
as an argument (no graph-sized constant compiled in), the GPU's compile options work on every
program the package compiles, and the matmul precision is what the config says."""

import functools
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import policy_gnn_jax as pg
from policy_gnn_jax import graph, methods
from policy_gnn_jax.runtime import compilation, runner, seed_axis

MiB = 2**20
ITEM_BYTES = {"f32": 4, "i32": 4, "ui32": 4, "f64": 8, "i64": 8, "ui64": 8, "f16": 2, "bf16": 2,
              "i16": 2, "i8": 1, "ui8": 1, "i1": 1}  # fmt: skip


def largest_constant_bytes(hlo_text: str) -> int:
    """Bytes of the largest non-splat constant in StableHLO text. A splat (`dense<0.0>`) is one
    value broadcast: it holds no data of the graph, so it is not counted."""
    largest = 0
    for line in hlo_text.splitlines():
        if "stablehlo.constant" not in line:
            continue
        literal = line.split("stablehlo.constant", 1)[1]
        if re.match(r"\s*dense<[^\[\"]*>", literal):  # splat: no list, no hex blob
            continue
        dims, dtype = re.findall(r"tensor<((?:\d+x)*)(\w+)>", line)[-1]
        size = int(np.prod([int(d) for d in dims.split("x") if d])) if dims else 1
        largest = max(largest, size * ITEM_BYTES.get(dtype, 8))
    return largest


def test_largest_constant_finds_a_closed_over_array():
    table = jnp.arange(300_000, dtype=jnp.float32) + 0  # 1.1 MiB, concrete: not a splat
    text = jax.jit(lambda i: table[i]).lower(jnp.int32(0)).as_text()
    assert largest_constant_bytes(text) == table.nbytes
    splat = np.zeros(300_000, np.float32)
    assert largest_constant_bytes(jax.jit(lambda x: x + splat).lower(splat).as_text()) == 0


def _cora_programs(cora, method, graph_as_argument=True, **overrides):
    config = methods.get(method).prepare(pg.Config.paper(num_episodes=2, epochs=2, **overrides))
    g = graph.from_dataset(cora)
    trainer = methods.get(method).make_trainer(config, cora, g, None, None)
    if not graph_as_argument:  # the graph closed over: jit compiles it in as constants
        t, d = trainer, trainer.data
        trainer = t._replace(
            init=lambda _, key: t.init(d, key),
            train_chunk=lambda _, state, length: t.train_chunk(d, state, length),
            evaluate=lambda _, state: t.evaluate(d, state),
            data=(),
        )
    keys = seed_axis.seed_keys(0, 1)
    seeds = functools.partial(seed_axis.over_seeds, mode="vmap", sharding=None)
    programs = runner.build_programs(trainer, keys, seeds, None, [trainer.per_call])
    state_like, data = programs["state_like"], trainer.data
    return {
        "init": programs["init"].lower(data, keys).as_text(),
        "chunk": programs["chunks"][trainer.per_call].lower(data, state_like).as_text(),
        "evaluate": programs["evaluate"].lower(data, state_like).as_text(),
    }


@pytest.mark.parametrize(
    "method, overrides",
    [("policy-gnn", {}), ("gcn", {}), ("policy-gnn", {"engine": "subgraph"})],
    ids=["policy-gnn", "fixed-depth", "subgraph-engine"],
)
def test_no_program_compiles_in_a_constant_over_1_mib(cora, method, overrides):
    for name, text in _cora_programs(cora, method, **overrides).items():
        assert largest_constant_bytes(text) <= MiB, name


def test_the_constant_check_fails_when_the_graph_is_compiled_in(cora):
    # Cora's dense features alone are 2708 x 1433 float32 = 14.8 MiB.
    texts = _cora_programs(cora, "gcn", graph_as_argument=False)
    assert largest_constant_bytes(texts["chunk"]) > MiB


def test_gpu_compile_options_are_accepted_by_every_program(monkeypatch, tmp_path, small_dataset):
    """On a GPU every program gets compiler options, which JAX accepts only on an outermost jit;
    forcing them here (XLA accepts the GPU options on a CPU and ignores them) runs every path:
    training, resuming a checkpoint, prediction and a loaded fit."""
    options = {**compilation.AUTOTUNE_OFF, **compilation.DETERMINISTIC_SCATTER}
    monkeypatch.setattr(compilation, "compiler_options", lambda *a, **k: dict(options))
    config = pg.Config.tiny(num_episodes=2, episodes_per_call=1, epochs=2)
    ckpt = tmp_path / "ckpt"
    for method in ("policy-gnn", "gcn"):
        fit = pg.fit(small_dataset, config, method=method, seeds=2, progress=False,
                     checkpoint_dir=ckpt / method)  # fmt: skip
        again = pg.fit(
            small_dataset,
            config,
            method=method,
            seeds=2,
            progress=False,
            checkpoint_dir=ckpt / method,
        )  # fmt: skip  (resumes the finished run)
        assert again.record["test_metric"] == fit.record["test_metric"]
        fit.predict(small_dataset.test_index)
        fit.save(tmp_path / method)
        pg.load(tmp_path / method).predict(small_dataset.test_index)


def test_matmul_precision_is_fixed_into_the_program():
    x = jnp.ones((4, 4), jnp.float32)
    for precision, full in (("highest", True), ("default", False)):
        traced = compilation.with_matmul_precision(lambda a: a @ a, precision)
        assert ("Precision.HIGHEST" in str(jax.make_jaxpr(traced)(x))) is full


def test_matmul_precision_is_checked_and_recorded(small_dataset):
    with pytest.raises(pg.ConfigError, match="matmul_precision must be one of"):
        pg.Config.tiny(matmul_precision="tf32")
    fit = pg.fit(small_dataset, pg.Config.tiny(epochs=2, matmul_precision="default"),
                 method="gcn", progress=False)  # fmt: skip
    assert fit.record["config"]["matmul_precision"] == "default"
    assert fit.record["config"]["reproducible"] is True


def test_gpu_options_turn_autotuning_off_and_sort_scatter_adds_only_where_there_are_any():
    options = compilation.compiler_options
    assert options(True, scatter_adds=False, backend="gpu") == {"xla_gpu_autotune_level": 0}
    assert options(True, scatter_adds=True, backend="cuda") == {
        "xla_gpu_autotune_level": 0, "xla_gpu_deterministic_ops": True}  # fmt: skip
    assert options(False, scatter_adds=True, backend="gpu") is None  # the opt-out
    assert options(True, backend="cpu") is None and options(True, backend="tpu") is None
    assert compilation.float_scatter_adds("gather", "subgraph")
    assert compilation.float_scatter_adds("scatter", "full")
    assert not compilation.float_scatter_adds("gather", "full")


def test_bit_identical_is_claimed_only_where_shown():
    claim = compilation.bit_identical_across_processes
    both = {**compilation.AUTOTUNE_OFF, **compilation.DETERMINISTIC_SCATTER}
    assert claim(None, "scatter", "full", backend="cpu")
    assert not claim(None, "gather", "full", backend="gpu")  # the fast path: autotuned
    assert not claim(both, "gather", "full", backend="tpu")  # never checked on a TPU
    assert claim(both, "gather", "full", backend="gpu")  # the GPU check, on an H100
    assert not claim(both, "gather", "subgraph", backend="gpu")  # not shown yet
    assert claim(compilation.AUTOTUNE_OFF, "gather", "full", backend="gpu")  # on an H200


def test_two_processes_give_the_same_bits(tmp_path):
    """The README command (shortened) twice, each in its own process: every field of
    results.json equal except the wall time."""
    records = []
    # Each process compiles its own programs: none is read from the suite's cache (conftest).
    env = dict(os.environ, JAX_ENABLE_COMPILATION_CACHE="false")
    for name in ("a", "b"):
        argv = ["--dataset", "csbm", "--csbm-nodes", "1600", "--seeds", "2", "--episodes", "3",
                "--no-progress", "--out", str(tmp_path / name)]  # fmt: skip
        done = subprocess.run([sys.executable, "-m", "policy_gnn_jax.cli", *argv],
                              capture_output=True, text=True, env=env)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        record = json.loads((tmp_path / name / "results.json").read_text())
        record.pop("wall_time_s")
        records.append(record)
    assert records[0] == records[1]
    claim = compilation.bit_identical_across_processes(
        records[0]["compiler_options"], records[0]["kernels"], records[0]["engine"]
    )
    assert records[0]["bit_identical_across_processes"] is claim
    assert claim or jax.default_backend() != "cpu"  # on a CPU the claim is made, and holds


ROOT = pathlib.Path(__file__).resolve().parents[1]


def _gpu_check_module():
    spec = importlib.util.spec_from_file_location(
        "gpu_check", ROOT / "experiments" / "gpu_check.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_gpu_check_compares_every_field():
    differing = _gpu_check_module().differing_fields
    a = {"x": 1, "y": {"z": [1, 2], "w": 0.5}, "wall_time_s": 3.0}
    b = {"x": 1, "y": {"z": [1, 3], "w": 0.5}, "wall_time_s": 4.0, "new": True}
    assert differing(a, b) == ["new", "wall_time_s", "y.z"]
    assert differing(a, a) == []


def test_the_gpu_check_runs_on_a_cpu_and_keeps_its_report(tmp_path):
    out = tmp_path / "check.json"
    argv = [sys.executable, "experiments/gpu_check.py", "--out", str(out), "--steps",
            "readme_twice", "--dataset", "csbm", "--seeds", "1", "--episodes", "2"]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["backend"] == "cpu"
    step = report["steps"]["readme_twice"]
    assert step["identical"] is True and step["claimed_bit_identical"] is True
    first, second = step["compilation_caches"]  # cold, and one of its own per process
    assert first and second and first != second
    again = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert again.returncode == 2 and "--overwrite" in again.stderr
    assert json.loads(out.read_text()) == report


def test_the_gpu_check_names_the_size_from_which_the_subgraph_engine_is_faster():
    rows = [{"engine": e, "nodes": n, "step_ms": ms} for e, n, ms in
            [("full", 10**4, 1.0), ("subgraph", 10**4, 5.0), ("full", 10**5, 9.0),
             ("subgraph", 10**5, 6.0), ("full", 10**6, 90.0), ("subgraph", 10**6, 7.0),
             ("host", 10**6, 8.0)]]  # fmt: skip
    crossover = _gpu_check_module().crossover
    assert crossover({"json": {"rows": rows}})["subgraph_faster_from_nodes"] == 10**5
    assert crossover({"json": {"rows": rows[:2]}})["subgraph_faster_from_nodes"] is None
    assert crossover({"rc": "timeout"})["subgraph_faster_from_nodes"] is None


def _shown_on_a_gpu() -> set:
    """(engine, kernels, option names) that a committed GPU check ran in two processes and
    found identical in every field: the evidence GPU_VERIFIED must rest on."""
    engine_of_step = {"readme_twice": "full", "readme_tf32_twice": "full",
                      "subgraph_twice": "subgraph"}  # fmt: skip
    shown = set()
    for path in sorted((ROOT / "docs" / "results").glob("gpu_check_*.json")):
        report = json.loads(path.read_text())
        for name, step in report["steps"].items():
            if name in engine_of_step and step.get("identical") is True:
                engine = step.get("engine", engine_of_step[name])
                options = tuple(sorted(step["compiler_options"] or ()))
                shown.add((engine, step["kernels"], options))
    return shown


def test_a_gpu_claims_bit_identity_exactly_where_a_committed_gpu_check_showed_it():
    assert compilation.GPU_VERIFIED == _shown_on_a_gpu()
