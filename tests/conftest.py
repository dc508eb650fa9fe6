"""Shared fixtures. Tests never download: the loader is forced offline. Every test runs on graphs
the tests make, except those marked `benchmark_data`, which read the real benchmark files from the
folders the loaders read ($POLICY_GNN_DATA for Planetoid, $POLICY_GNN_HETEROPHILY_DATA for the
heterophilous graphs) and skip, with one line saying so, where those are not set."""

import importlib.util
import os
import pathlib
import pickle
import shutil
import sys
import types

import jax
import numpy as np
import pytest
import scipy.sparse as sp

ROOT = pathlib.Path(__file__).resolve().parents[1]
COMPILED_CACHE_VARIABLE = "JAX_COMPILATION_CACHE_DIR"


# The suite's compilation cache is emptied when it grows past this: JAX's own size limit would
# scan the folder at every write (measured: a cold suite 11.2 min with it, against 9 without).
TEST_CACHE_MAX_BYTES = 2 * 2**30


def _share_compiled_programs() -> None:
    """Many tests (and the command-line runs they start) compile the same programs; JAX's
    persistent cache compiles each once, in this session and the next ones (a warm suite took
    5.7 min on two cores, a cold one 9). The folder is the project cache folder's
    `compiled-tests` (apart from the user's runs), named by the first process to load this file
    and inherited by its workers and every subprocess through the environment. Only on a CPU: a
    GPU's autotuning differs between processes, and a cache would hide that (the test that two
    processes give the same bits turns it off anyway)."""
    if jax.default_backend() != "cpu":
        return
    from policy_gnn_jax.runtime import compilation

    if COMPILED_CACHE_VARIABLE not in os.environ:
        folder = compilation.default_cache_folder().with_name("compiled-tests")
        held = sum(p.stat().st_size for p in folder.iterdir()) if folder.is_dir() else 0
        if held > TEST_CACHE_MAX_BYTES:
            shutil.rmtree(folder, ignore_errors=True)
        os.environ[COMPILED_CACHE_VARIABLE] = str(folder)
    # Every program, the suite's are small; here and in the subprocesses alike.
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    jax.config.update("jax_compilation_cache_dir", os.environ[COMPILED_CACHE_VARIABLE])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)


os.environ["POLICY_GNN_OFFLINE"] = "1"
# On a GPU, JAX takes 75 % of its memory at start; the CLI tests start further JAX processes
# beside this one, which would then find too little left. Allocate as needed instead.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# The suite is dominated by compiling many small programs, which this makes about a third faster
# (measured on tests/test_train.py: 116 s -> 79 s). It changes only how hard LLVM optimises the
# CPU code, not what is computed; subprocesses (the CLI tests) inherit it. Speed is measured by
# benchmarks/*.py, never here.
# One host device, as a process has by default: the command would otherwise make one per core
# (`cli.use_every_core`) in every test that starts it, at two cores' compile and run time each
# (the suite passes either way: 1223 tests with two host devices everywhere).
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + " --xla_backend_optimization_level=0 --xla_force_host_platform_device_count=1"
).strip()

# Every program the package compiles runs at `Config.matmul_precision` ("highest" unless told
# otherwise); tests that call its parts directly get the same full-float32 matmuls, so their
# float32 tolerances against NumPy hold on a GPU too (its default would be TF32).
jax.config.update("jax_default_matmul_precision", "highest")
_share_compiled_programs()  # after XLA_FLAGS: it starts the backend

from policy_gnn_jax import config as config_lib  # noqa: E402  (after the variables above)
from policy_gnn_jax import data, graph  # noqa: E402


def _data_folder(variable: str) -> pathlib.Path | None:
    value = os.environ.get(variable)
    return pathlib.Path(value) if value else None


PLANETOID_DIR = _data_folder("POLICY_GNN_DATA")
HETEROPHILY_DIR = _data_folder("POLICY_GNN_HETEROPHILY_DATA")
HETEROPHILY_FILES = {
    "actor": "actor.npz",
    "chameleon-filtered": "chameleon_filtered.npz",
    "cornell": "cornell.npz",
    "minesweeper": "minesweeper.npz",
    "texas": "texas.npz",
    "wisconsin": "wisconsin.npz",
}


def split_graph_gcn(folder: pathlib.Path) -> list[str]:
    """The command line of a one-seed fixed-depth run on a generated graph with three splits in
    the heterophilous benchmarks' file format, written into `folder`: what the sweep tests need
    of a benchmark, without its data."""
    from test_splits import _benchmark_file

    path = folder / "three_splits.npz"
    if not path.exists():
        _benchmark_file(path, num_splits=3, n=300)
    return ["--dataset", str(path), "--method", "gcn", "--seeds", "1", "--no-progress"]


def _benchmark_files(name: str) -> tuple[pathlib.Path | None, str, list[str]]:
    """(folder, its variable, file names) of a benchmark: a Planetoid name, "pubmed-seven"
    (PubMed without `allx`), or a heterophilous graph's name."""
    if name in HETEROPHILY_FILES:
        return HETEROPHILY_DIR, "POLICY_GNN_HETEROPHILY_DATA", [HETEROPHILY_FILES[name]]
    suffixes = data.RAW_SUFFIXES
    if name == "pubmed-seven":
        name, suffixes = "pubmed", [s for s in suffixes if s != "allx"]
    return PLANETOID_DIR, "POLICY_GNN_DATA", [f"ind.{name}.{s}" for s in suffixes]


def benchmark_available(name: str) -> bool:
    folder, _, files = _benchmark_files(name)
    return folder is not None and all((folder / f).is_file() for f in files)


def need(*names: str) -> None:
    """Skips the calling test, in one line naming the variable to set, unless every named
    benchmark's files are there."""
    for name in names:
        if not benchmark_available(name):
            folder, variable, _ = _benchmark_files(name)
            where = f"not in {folder}" if folder else f"${variable} is not set"
            pytest.skip(f"needs the {name} files ({where}): set {variable} to their folder")


def pytest_runtest_setup(item):
    for mark in item.iter_markers("benchmark_data"):
        need(*mark.args)


@pytest.fixture
def key():
    return jax.random.key(0)


@pytest.fixture(scope="session")
def small_dataset():
    """A 300-node generated graph with Planetoid-style splits (15 / 60 / 100)."""
    return data.make_csbm(
        num_nodes=300,
        num_classes=3,
        num_features=16,
        homophily=0.85,
        avg_degree=6,
        feature_signal=1.0,
        seed=1,
        num_train_per_class=5,
        num_val=60,
        num_test=100,
    )


@pytest.fixture(scope="session")
def small_graph(small_dataset):
    return graph.from_dataset(small_dataset)


@pytest.fixture(scope="session")
def tiny_config():
    return config_lib.Config.tiny()


@pytest.fixture(scope="session")
def cora():
    need("cora")
    return data.load_planetoid("cora", download=False)


@pytest.fixture(scope="session")
def citeseer():
    need("citeseer")
    return data.load_planetoid("citeseer", download=False)


@pytest.fixture(scope="session")
def pubmed_stand_in(tmp_path_factory):
    """A folder with the seven real PubMed files plus a generated `ind.pubmed.allx` (the real x as
    its first 60 rows, random sparse rows after), and that file's SHA-256. Only allx is missing
    here, so everything else PubMed's path does is real."""
    need("pubmed-seven")
    names = [f"ind.pubmed.{s}" for s in data.RAW_SUFFIXES if s != "allx"]
    folder = tmp_path_factory.mktemp("pubmed")
    for n in names:
        shutil.copy(PLANETOID_DIR / n, folder / n)
    with open(PLANETOID_DIR / "ind.pubmed.x", "rb") as f:
        x = sp.csr_matrix(pickle.load(f, encoding="latin1"))
    rng = np.random.default_rng(0)
    rest = sp.random(
        18717 - 60, 500, density=0.05, format="csr", random_state=rng, dtype=np.float32
    )
    with open(folder / "ind.pubmed.allx", "wb") as f:
        pickle.dump(sp.vstack([x, rest]).tocsr(), f)
    return folder, data.sha256_of(folder / "ind.pubmed.allx")


# The policy-gnn command's process that dies (SIGKILL, no clean-up) right after its first
# checkpoint is saved: a crash at the worst moment, for the resume tests.
_DIES_AFTER_FIRST_SAVE = """
import os, signal, sys
from policy_gnn_jax.runtime import checkpoint
save = checkpoint.Checkpointer.save
def save_then_die(self, *args):
    save(self, *args)
    os.kill(os.getpid(), signal.SIGKILL)
checkpoint.Checkpointer.save = save_then_die
from policy_gnn_jax.cli import launch
sys.exit(launch())
"""


def dies_after_first_save(command: list[str]) -> list[str]:
    """`command` (`python -m policy_gnn_jax.cli ...`) as a process that dies after its first
    checkpoint save."""
    assert command[1:3] == ["-m", "policy_gnn_jax.cli"], command
    return [command[0], "-c", _DIES_AFTER_FIRST_SAVE, *command[3:]]


def _experiment(name: str):
    """experiments/NAME.py or benchmarks/NAME.py as a module (the scripts are not part of the
    package); a script may import its siblings, as it does when run from its folder."""
    where = "benchmarks" if (ROOT / "benchmarks" / f"{name}.py").exists() else "experiments"
    folder = str(ROOT / where)
    spec = importlib.util.spec_from_file_location(name, f"{folder}/{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    return module


@pytest.fixture(scope="session")
def reproduce_module():
    """What `experiments/reproduce.py` runs: the library behind it, by the names tests use."""
    from policy_gnn_jax.contrib.reproduction import command, runs, tables

    return types.SimpleNamespace(
        main=command.main,
        table=tables.table,
        run_or_load=runs.run_or_load,
        configs_match=runs.configs_match,
    )


@pytest.fixture(scope="session")
def adaptive_depth_module():
    return _experiment("adaptive_depth")


@pytest.fixture(scope="session")
def experiment():
    """Loads any experiments/NAME.py or benchmarks/NAME.py: `experiment("bench")`."""
    return _experiment
