"""What several reliability test files share: the cheapest run as a command line (in this
process or as a script), a toy graph and two fits of it, Policy-GNN's cheapest config, a path
graph as arrays, a one-split copy of Texas, a Python subprocess run from the repository root, and
locks held or occupied as another run or a user would."""

import fcntl
import os
import pathlib
import subprocess
import sys
import warnings

import numpy as np

import policy_gnn_jax as pg
from policy_gnn_jax import cli

# Found from here, not from conftest: a subprocess imports this module on its own.
ROOT = pathlib.Path(__file__).resolve().parents[2]

# A tiny generated graph and the cheapest method: each run takes a few seconds. Tests slice both
# forms by position (QUICK[:-5], TINY_RUN[:-4] drop the method and its epochs): keep the order.
QUICK = ["--dataset", "csbm", "--csbm-nodes", "1600", "--seeds", "1", "--method", "gcn"]
QUICK += ["--epochs", "2", "--no-progress"]
# The same run as a script's command line, for a subprocess.
TINY_RUN = ["experiments/run.py", "--dataset", "csbm", "--csbm-nodes", "1600", "--seeds", "1",
            "--no-progress", "--method", "gcn", "--epochs", "2"]  # fmt: skip

HOLDER = (
    "import sys, time\n"
    "from policy_gnn_jax.runtime import locks\n"
    "with locks.FolderLock(sys.argv[1]):\n"
    "    print('held', flush=True)\n"
    "    time.sleep(60)\n"
)


def run_quick(*argv) -> int:
    """The `policy-gnn` command in this process on QUICK's run, with `argv` added."""
    return cli.main([*QUICK, *argv])


def toy_graph(seed=0):
    """A 60-node path graph of two classes whose features say the class, split 10/20/30."""
    rng = np.random.default_rng(seed)
    n = 60
    labels = np.arange(n) % 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pg.from_arrays(
            rng.normal(size=(n, 4)) + labels[:, None],
            np.stack([np.arange(n - 1), np.arange(1, n)]),
            labels,
            np.arange(10),
            np.arange(10, 30),
            np.arange(30, 60),
        )


def run_python(*argv, stdout=subprocess.PIPE, env=None, cwd=ROOT):
    """`python argv...` from `cwd` (the repository root), importing this checkout's library."""
    return subprocess.run(
        [sys.executable, *argv], cwd=cwd, stdout=stdout, stderr=subprocess.PIPE, text=True,
        timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )  # fmt: skip


def hold_lock(folder):
    """Another process that holds `folder`'s lock until killed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"held"
    return proc


def toy_fits(seeds: int):
    """The toy graph and two fixed-depth fits of it of `seeds` seeds each, seed 0 and seed 1."""
    ds = toy_graph()
    config = pg.Config.tiny(epochs=3)
    return ds, [
        pg.fit(ds, config, method="gcn", seeds=seeds, seed=s, progress=False) for s in (0, 1)
    ]


# Policy-GNN's cheapest run: two episodes in one compiled call.
TWO_EPISODE_CONFIG = pg.Config.tiny(num_episodes=2, episodes_per_call=2)


def path_graph_arrays(n=60):
    """A path graph's features (an n x 8 identity: the first eight rows one-hot, the rest zero),
    edges, two alternating classes and 20/20/20 splits, as arrays for
    `pg.from_arrays(features, edges, labels, **splits)`."""
    features = np.eye(n, 8, dtype=np.float32)
    edges = np.stack([np.arange(n - 1), np.arange(1, n)])
    labels = np.arange(n) % 2
    splits = dict(train_index=np.arange(0, 20), val_index=np.arange(20, 40),
                  test_index=np.arange(40, 60))  # fmt: skip
    return features, edges, labels, splits


def hold_output_file_lock(path: pathlib.Path) -> int:
    """Locks `<path>.lock` as a running script holds it; returns the descriptor."""
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT)
    os.write(fd, b"424242")  # a process id, as a script writes its own: the refusal names it
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def texas_split_with_boundary(folder: pathlib.Path, name: str, train_end: int) -> pathlib.Path:
    """A one-split copy of Texas at `folder/name`: train 0..train_end-1, val train_end..139,
    test 140..182."""
    from test_heterophily import HETEROPHILY_DIR  # here: a subprocess imports this module alone

    with np.load(HETEROPHILY_DIR / "texas.npz") as z:
        arrays = {k: z[k] for k in ("node_features", "node_labels", "edges")}
    n = len(arrays["node_labels"])
    masks = {part: np.zeros((1, n), bool) for part in ("train", "val", "test")}
    masks["train"][0, :train_end], masks["val"][0, train_end:140] = True, True
    masks["test"][0, 140:] = True
    np.savez(folder / name, **arrays, **{f"{k}_masks": m for k, m in masks.items()})
    return folder / name
