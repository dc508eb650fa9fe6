"""The probe table's Python snippets against the API (`probes.py` holds the command lines).

Each snippet runs after `API_PRELUDE` (a 60-node path graph: x, e, labels, tr, va, te) and must
raise one ValueError, FloatingPointError or DataError whose message names the problem.
"""

API_PRELUDE = """
import warnings, numpy as np, policy_gnn_jax as pg
from policy_gnn_jax.contrib.adaptive_depth.plus_config import PlusConfig
warnings.simplefilter("ignore")
rng = np.random.default_rng(0)
n = 60
labels = np.arange(n) % 2
x = rng.normal(size=(n, 4))
e = np.stack([np.arange(n - 1), np.arange(1, n)])
tr, va, te = np.arange(0, 10), np.arange(10, 30), np.arange(30, 60)
"""
API_CATCH = """
try:
    {body}
except (ValueError, FloatingPointError, pg.DataError) as err:
    print(f"error: {{type(err).__name__}}: {{err}}", file=__import__("sys").stderr)
    raise SystemExit(2)
"""


API_PROBES = [
    ("API: NaN feature", "x[3, 1] = np.nan; pg.from_arrays(x, e, labels, tr, va, te)"),
    (
        "API: directed, symmetrise=False",
        "pg.from_arrays(x, e, labels, tr, va, te, symmetrise=False)",
    ),
    (
        "API: hand-built Dataset with directed edges",
        "import scipy.sparse as sp; pg.Dataset('d', sp.csr_matrix(x, dtype=np.float32), "
        "labels.astype(np.int32), e.astype(np.int32), tr.astype(np.int32), "
        "va.astype(np.int32), te.astype(np.int32), 2)",
    ),
    ("API: edges as floats", "pg.from_arrays(x, e + 0.5, labels, tr, va, te)"),
    ("API: edge id out of range", "pg.from_arrays(x, e + 1, labels, tr, va, te)"),
    ("API: overlapping splits", "pg.from_arrays(x, e, labels, tr, tr, te)"),
    ("API: unlabelled test node", "labels[40] = -1; pg.from_arrays(x, e, labels, tr, va, te)"),
    ("API: boolean mask as split", "pg.from_arrays(x, e, labels, np.arange(n) < 10, va, te)"),
    ("API: labels of the wrong length", "pg.from_arrays(x, e, labels[:10], tr, va, te)"),
    (
        "API: unknown method",
        "ds = pg.from_arrays(x, e, labels, tr, va, te); pg.fit(ds, pg.Config.tiny(), method='gat')",
    ),
    (
        "API: seeds=0",
        "ds = pg.from_arrays(x, e, labels, tr, va, te); pg.fit(ds, pg.Config.tiny(), seeds=0)",
    ),
    ("API: load a folder with no fit", "pg.load('/tmp')"),
    (
        "API: two graphs in a GraphsTuple",
        "import jraph; g = pg.from_arrays(x, e, labels, tr, "
        "va, te).to_jraph(); pg.from_jraph(jraph.batch([g, g]), labels, tr, va, te)",
    ),
    ("API: Config(dropout=1.0)", "pg.Config(dropout=1.0)"),
    ("API: depth 0 on the GCN backbone", "pg.Config(min_depth=0)"),
    ("API: unknown backbone", "pg.Config(backbone='gat')"),
    ("API: Policy-GNN+ switch misspelt", "PlusConfig(plus_train_depths='some')"),
    ("API: Policy-GNN+ policy half of 100%", "PlusConfig(plus_policy_fraction=1.0)"),
    (
        "API: predict node out of range",
        "ds = pg.from_arrays(x, e, labels, tr, va, te); "
        "f = pg.fit(ds, pg.Config.tiny(num_episodes=1), seeds=1, progress=False); "
        "f.predict([0, 10**6])",
    ),
    ("API: split id beyond int32", "pg.from_arrays(x, e, labels, [0, 2**32 + 5], va, te)"),
    ("API: split id below int32", "pg.from_arrays(x, e, labels, tr, [10, -(2**31) - 1], te)"),
    (
        "API: label beyond int32",
        "labels = labels.astype(np.int64); labels[3] = 2**32 + 1; "
        "pg.from_arrays(x, e, labels, tr, va, te)",
    ),
    (
        "API: stray label on a node in no split",
        "labels = labels.astype(np.int64); "
        "labels[59] = 10**9; pg.from_arrays(x, e, labels, tr, va, te[:-1])",
    ),
    ("API: features beyond float32", "x[5, 1] = 1e39; pg.from_arrays(x, e, labels, tr, va, te)"),
    ("API: complex features", "pg.from_arrays(x + 1j, e, labels, tr, va, te)"),
    ("API: a 2x2 edge array", "pg.from_arrays(x, [[0, 1], [2, 3]], labels, tr, va, te)"),
    ("API: edges as [E, 2]", "pg.from_arrays(x, e.T, labels, tr, va, te)"),
    ("API: num_classes 2.7", "pg.from_arrays(x, e, labels, tr, va, te, num_classes=2.7)"),
    ("API: num_classes '2'", "pg.from_arrays(x, e, labels, tr, va, te, num_classes='2')"),
    (
        "API: an empty graph",
        "pg.from_arrays(np.zeros((0, 4)), np.zeros((2, 0), int), np.zeros(0, int), [], [], [])",
    ),
    (
        "API: GraphsTuple n_node disagrees with its rows",
        "g = pg.from_arrays(x, e, labels, tr, va, te).to_jraph(); "
        "pg.from_jraph(g._replace(n_node=np.array([n + 5])), labels, tr, va, te)",
    ),
    (
        "API: GraphsTuple senders and receivers of two lengths",
        "g = pg.from_arrays(x, e, labels, tr, va, te).to_jraph(); "
        "pg.from_jraph(g._replace(senders=g.senders[:-1]), labels, tr, va, te)",
    ),
    ("API: Config(hidden=16.5)", "pg.Config(hidden=16.5)"),
    ("API: Config(hidden='16')", "pg.Config(hidden='16')"),
    ("API: Config(num_episodes=1.5)", "pg.Config(num_episodes=1.5)"),
    ("API: Config(replay_capacity=10**12)", "pg.Config(replay_capacity=10**12)"),
    ("API: fit(None)", "pg.fit(None)"),
    (
        "API: fit with a dict config",
        "pg.fit(pg.from_arrays(x, e, labels, tr, va, te), config=dict(hidden=8))",
    ),
    ("API: fit(seeds=True)", "pg.fit(pg.from_arrays(x, e, labels, tr, va, te), seeds=True)"),
    (
        "API: checkpoint_every=0",
        "pg.fit(pg.from_arrays(x, e, labels, tr, va, te), "
        "pg.Config.tiny(), checkpoint_dir='/tmp/never', checkpoint_every=0)",
    ),
    (
        "API: Fit.save into a folder holding a fit",
        "import tempfile; d = tempfile.mkdtemp(); "
        "f = pg.fit(pg.from_arrays(x, e, labels, tr, va, te), pg.Config.tiny(epochs=2), "
        "method='gcn', seeds=1, progress=False); f.save(d + '/f'); f.save(d + '/f')",
    ),
    ("API: data_dir as bytes", "pg.load_dataset('texas', data_dir=b'/tmp')"),
    ("API: a folder of arrays as a number", "pg.data.load_arrays(123)"),
    (
        "API: checkpoint_dir as bytes",
        "pg.fit(pg.from_arrays(x, e, labels, tr, va, te), pg.Config.tiny(), "
        "checkpoint_dir=b'/tmp/never')",
    ),
    ("API: Config(q_hidden=[16, 16])", "pg.Config.tiny(q_hidden=[16, 16])"),
    ("API: fit_splits of no datasets", "pg.split_sweep.fit_splits([], pg.Config.tiny())"),
    (
        "API: fit_splits with an unknown split_map",
        "d = pg.from_arrays(x, e, labels, tr, va, te); "
        "pg.split_sweep.fit_splits([d, d], pg.Config.tiny(), split_map='batched')",
    ),
]
