"""Seeds sharded over 8 host CPU devices give the same bits as on one device."""

import json
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import policy_gnn_jax as pg
from policy_gnn_jax.runtime import memory, runner, seed_axis

SCRIPT = pathlib.Path(__file__).with_name("sharded_sweep.py")


@pytest.fixture(scope="module")
def sweeps():
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    env = {**os.environ, "XLA_FLAGS": flags.strip()}
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "variant", ["policy-gnn/full", "policy-gnn/subgraph", "gcn/full", "policy-gnn/sparse"]
)
def test_mapped_seeds_on_eight_devices_are_bit_identical_to_one_device(sweeps, variant):
    """The backbone's parameters, the policy (the Q-network and the normaliser's statistics)
    and the record; "sparse": features as sparse as Planetoid's, so the DQN's sparse forms."""
    assert sweeps["sharded_over"] == 8
    runs = sweeps[f"{variant}/map"]
    assert runs["8"]["record"] == runs["1"]["record"]
    assert runs["8"]["params"] == runs["1"]["params"]
    assert runs["8"]["policy"] == runs["1"]["policy"]


def test_vmapped_seeds_on_eight_devices_agree_to_rounding(sweeps):
    # Under vmap a seed's bits depend on the seeds per device (XLA's batched reductions round
    # differently for other batch sizes: seed_axis.over_seeds), so only closeness is promised.
    runs = sweeps["policy-gnn/full/vmap"]
    for a, b in zip(runs["8"]["params"], runs["1"]["params"]):
        np.testing.assert_allclose(_floats(a), _floats(b), rtol=1e-3, atol=1e-5)


def _floats(hex_bytes):
    return np.frombuffer(bytes.fromhex(hex_bytes), np.float32)


def test_device_count_is_checked_and_seeds_split_evenly():
    with pytest.raises(runner.ResourceError, match="devices must be in"):
        seed_axis.seed_sharding(4, devices=0)
    assert seed_axis.seed_sharding(4, devices=1) is None
    with pytest.raises(runner.ResourceError, match="seed mode"):
        seed_axis.over_seeds(len, "loop", None)


def test_the_default_seed_mode_is_map_on_a_cpu_and_vmap_on_an_accelerator(monkeypatch):
    # Measured in benchmarks/bench.py (docs/performance.md): on a CPU a mapped seed is the
    # cheaper, as it skips the backbone on the steps where it does not train.
    assert seed_axis.seed_mode_for(None) == "map"
    monkeypatch.setattr(runner.jax, "default_backend", lambda: "gpu")
    assert seed_axis.seed_mode_for(None) == "vmap"
    assert seed_axis.seed_mode_for("map") == "map"
    with pytest.raises(runner.ResourceError, match="seed mode"):
        seed_axis.seed_mode_for("loop")


def test_a_fit_by_default_gives_one_seed_the_bits_it_has_among_three(small_dataset):
    config = pg.Config.tiny(num_episodes=4, episodes_per_call=2)
    one = pg.fit(small_dataset, config, seeds=1, progress=False)
    three = pg.fit(small_dataset, config, seeds=3, progress=False)
    assert one.record["seed_mode"] == three.record["seed_mode"] == "map"
    for field in ("test_metric", "val_metric"):
        assert one.record[field]["per_seed"] == three.record[field]["per_seed"][:1]
    for a, b in zip(jax.tree.leaves(one.params), jax.tree.leaves(three.params), strict=True):
        np.testing.assert_array_equal(np.asarray(a)[0], np.asarray(b)[0])


def test_one_mapped_seed_runs_its_computation_once():
    # A loop XLA knows runs once would be removed (other rounding); one run twice costs double.
    runs = []

    def one_seed(data, x):
        jax.debug.callback(lambda: runs.append(1))
        return x * data

    out = jax.jit(seed_axis.over_seeds(one_seed, "map", None))(2.0, jnp.ones((1, 3)))
    jax.block_until_ready(out)
    jax.effects_barrier()
    assert len(runs) == 1 and out.shape == (1, 3)


def test_the_command_makes_one_host_device_per_core_unless_told(monkeypatch):
    from policy_gnn_jax import cli

    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=0")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    monkeypatch.setattr(cli, "CGROUP", cli.pathlib.Path("/nonexistent"))  # no CPU quota
    cli.use_every_core()
    assert os.environ["XLA_FLAGS"].endswith("--xla_force_host_platform_device_count=3")
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=1")
    cli.use_every_core()
    assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=1"


@pytest.mark.parametrize(
    "files, cores",
    [
        ({"cpu.max": "200000 100000\n"}, 2),  # cgroup v2: docker --cpus=2
        ({"cpu.max": "150000 100000\n"}, 2),  # 1.5 CPUs: two devices, each partly busy
        ({"cpu.max": "max 100000\n"}, 8),  # no quota
        ({"cpu/cpu.cfs_quota_us": "100000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1),  # v1
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, 8),
        ({}, 8),  # no cgroup files: the affinity alone
        ({"cpu.max": "200000 0\n"}, 8),  # a period no kernel writes: no quota read
        ({"cpu.max": "200000 -100000\n"}, 8),
    ],
)
def test_the_host_devices_follow_a_containers_cpu_quota(monkeypatch, tmp_path, files, cores):
    """A container limited to 2 CPUs on an 8-core host sees all 8 in its affinity: one host
    device per core there would run 8 programs on 2 CPUs' time."""
    from policy_gnn_jax import cli

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(cli, "CGROUP", tmp_path)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setenv("XLA_FLAGS", "")
    cli.use_every_core()
    flag = f"--xla_force_host_platform_device_count={cores}"
    assert os.environ["XLA_FLAGS"] == (flag if cores > 1 else "")


RESEARCH_SCRIPTS = ("reproduce", "heterophily", "adaptive_depth", "tune_decoupled")


def test_the_research_scripts_use_every_core_too():
    """Each research script asks for one host device per core before JAX starts its backend,
    and none of their imports starts it first (which would leave the flag unread)."""
    check = f"""
import os, runpy, sys
for name in {RESEARCH_SCRIPTS!r}:
    os.environ["XLA_FLAGS"] = ""
    sys.argv = [f"experiments/{{name}}.py", "--help"]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit:
        pass
    assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=3", name
import jax
print(len(jax.devices()))
"""
    prelude = (
        "import os, policy_gnn_jax.cli as cli; os.sched_getaffinity = lambda pid: {0, 1, 2}; "
        "cli.CGROUP = cli.pathlib.Path('/nonexistent'); "
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", prelude + check], capture_output=True,
                          text=True, timeout=300, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "3"


def test_the_commands_seeds_over_every_core_have_the_bits_of_one_device(tmp_path):
    """The command's default on a CPU (mapped seeds split over one host device per core) gives
    every record field and snapshot array of the same command on one device."""
    command = [sys.executable, "experiments/run.py", "--dataset", "csbm", "--csbm-nodes", "1600",
               "--seeds", "2", "--episodes", "2", "--episodes-per-call", "1",
               "--steps-per-episode", "3", "--buffer-size", "16", "--no-progress"]  # fmt: skip
    flags = os.environ["XLA_FLAGS"].replace("--xla_force_host_platform_device_count=1", "")
    env = {**os.environ, "XLA_FLAGS": flags}
    for name, extra in (("cores", []), ("one", ["--devices", "1"])):
        done = subprocess.run([*command, *extra, "--out", str(tmp_path / name)], env=env,
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
    from policy_gnn_jax import cli

    cores = cli.usable_cores()
    records = [json.loads((tmp_path / n / "results.json").read_text()) for n in ("cores", "one")]
    if cores > 1:
        assert f"device_count={cores}" in records[0]["versions"]["xla_flags"]
    for field in ("test_metric", "val_metric", "val_metric_curve", "best_step",
                  "test_depths", "train_action_share"):  # fmt: skip
        assert records[0][field] == records[1][field], field
    with np.load(tmp_path / "cores" / "snapshots.npz") as a, np.load(
        tmp_path / "one" / "snapshots.npz"
    ) as b:
        assert all(np.array_equal(a[k], b[k]) for k in a.files)


def test_host_devices_sharing_one_memory_are_counted_together():
    """XLA's memory analysis of a sharded program is per device; host CPU devices all take
    from the host's memory, so a run over two needs twice what one device's analysis says."""
    from types import SimpleNamespace

    analysis = SimpleNamespace(argument_size_in_bytes=0, output_size_in_bytes=60,
                               alias_size_in_bytes=0, temp_size_in_bytes=0)  # fmt: skip
    compiled = SimpleNamespace(memory_analysis=lambda: analysis)
    memory.check_memory(compiled, 4, available=100, copies=1)
    with pytest.raises(memory.ResourceError, match="4 seeds need"):
        memory.check_memory(compiled, 4, available=100, copies=2)


def test_host_devices_are_as_many_as_the_graphs_copies_leave_memory_for(monkeypatch):
    """Every host device holds its own copy of the graph in the one host memory: a graph of a
    tenth of the free memory gets 2 of 8 devices (a quarter of the memory), a small one all 8."""
    monkeypatch.setattr(jax, "local_devices", lambda: list(range(8)))
    monkeypatch.setattr(memory, "host_memory_bytes", lambda: 1000)
    assert memory.host_devices_for({"a": np.zeros(100, np.uint8)}, "map") == 2
    assert memory.host_devices_for({"a": np.zeros(10, np.uint8)}, "map") == 8
    assert memory.host_devices_for({"a": np.zeros(900, np.uint8)}, "map") == 1
    assert memory.host_devices_for({"a": np.zeros(10, np.uint8)}, "vmap") == 1


TIGHT_MEMORY = """
import json
import policy_gnn_jax as pg
from policy_gnn_jax import data
from policy_gnn_jax.runtime import runner
real, seen = runner.check_memory, []
def tight(compiled, num_seeds, available, resident=0, copies=1):
    seen.append(copies)
    if copies > 1:
        raise runner.ResourceError("not enough memory for two")
    return real(compiled, num_seeds, available, resident, copies)
runner.check_memory = tight
ds = data.make_csbm(num_nodes=300, num_classes=3, num_features=16, seed=1,
                    num_train_per_class=5, num_val=60, num_test=100)
pg.fit(ds, pg.Config.tiny(epochs=2), method="gcn", seeds=2, progress=False)
try:
    pg.fit(ds, pg.Config.tiny(epochs=2), method="gcn", seeds=2, progress=False, devices=2)
    asked = "ran"
except runner.ResourceError:
    asked = "refused"
print(json.dumps({"seen": seen, "asked": asked}))
"""


def test_host_devices_that_do_not_fit_together_fall_back_to_one():
    """Host devices the runner chose share one memory: where two do not fit, the run goes on
    one device (as it would have without them); devices asked for are refused as before."""
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    env = {**os.environ, "XLA_FLAGS": flags}
    done = subprocess.run(
        [sys.executable, "-c", TIGHT_MEMORY], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said == {"seen": [2, 1, 2], "asked": "refused"}


OTHER_DEVICES = """
import sys
import policy_gnn_jax as pg
from policy_gnn_jax import data
ds = data.make_csbm(num_nodes=300, num_classes=3, num_features=16, seed=1,
                    num_train_per_class=5, num_val=60, num_test=100)
run = dict(method="gcn", seeds=2, progress=False, seed_mode="vmap", checkpoint_dir=sys.argv[1])
pg.fit(ds, pg.Config.tiny(epochs=2), devices=2, **run)
try:
    pg.fit(ds, pg.Config.tiny(epochs=2), devices=1, **run)
    print("resumed")
except pg.CheckpointError as err:
    print("refused:", err)
"""


def test_a_batched_run_resumes_only_over_the_devices_that_wrote_it(tmp_path):
    """Under vmap a seed's bits depend on the seeds each device batches: a checkpoint written
    over 2 devices and resumed over 1 would end matching neither run, so it is refused, naming
    the counts (under map the count is free: the sharded test above)."""
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    done = subprocess.run(
        [sys.executable, "-c", OTHER_DEVICES, str(tmp_path / "ck")],
        env={**os.environ, "XLA_FLAGS": flags.strip()}, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("refused:") and "over 2 device(s), this run over 1" in last, last
