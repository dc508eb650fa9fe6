"""Seeds sharded over 8 host CPU devices give the same bits as on one device."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from policy_gnn_jax.runtime import runner

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


@pytest.mark.parametrize("variant", ["policy-gnn/full", "policy-gnn/subgraph", "gcn/full"])
def test_mapped_seeds_on_eight_devices_are_bit_identical_to_one_device(sweeps, variant):
    assert sweeps["sharded_over"] == 8
    runs = sweeps[f"{variant}/map"]
    assert runs["8"]["record"] == runs["1"]["record"]
    assert runs["8"]["params"] == runs["1"]["params"]


def test_vmapped_seeds_on_eight_devices_agree_to_rounding(sweeps):
    # Under vmap a seed's bits depend on the seeds per device (XLA's batched reductions round
    # differently for other batch sizes: runner.over_seeds), so only closeness is promised.
    runs = sweeps["policy-gnn/full/vmap"]
    for a, b in zip(runs["8"]["params"], runs["1"]["params"]):
        np.testing.assert_allclose(_floats(a), _floats(b), rtol=1e-3, atol=1e-5)


def _floats(hex_bytes):
    return np.frombuffer(bytes.fromhex(hex_bytes), np.float32)


def test_device_count_is_checked_and_seeds_split_evenly():
    with pytest.raises(runner.ResourceError, match="devices must be in"):
        runner.seed_sharding(4, devices=0)
    assert runner.seed_sharding(4, devices=1) is None
    with pytest.raises(runner.ResourceError, match="seed mode"):
        runner.over_seeds(len, "loop", None)
