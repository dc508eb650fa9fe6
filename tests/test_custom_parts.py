"""Your own backbone and agent: checked on the dataset's graph before anything compiles (shapes
and types only), held to the config's depths while they run, checked against the record when a
fit is loaded with them, and copied with the fit that holds them."""

import copy
import warnings

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import policy_gnn_jax as pg
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.agents import base as agent_base
from policy_gnn_jax.graph import propagate

CONFIG = pg.Config.tiny(num_episodes=2)


class SGC(nn.Module):
    """Depth d: a linear layer over Â^d X (the extension example of docs/usage.md)."""

    num_classes: int
    min_depth: int
    max_depth: int

    @nn.compact
    def __call__(self, g, *, train):
        h, out = g.features, []
        for depth in range(1, self.max_depth + 1):
            h = propagate(g, h)
            if depth >= self.min_depth:
                out.append(nn.Dense(self.num_classes, name=f"depth_{depth}")(h))
        return jnp.stack(out)


@pytest.fixture(scope="module")
def ds():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 120)
    features = rng.normal(size=(120, 8)) + labels[:, None]
    edges = rng.integers(0, 120, (2, 480))
    ids = rng.permutation(120)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pg.from_arrays(features, edges, labels, ids[:20], ids[20:50], ids[50:])


def _sgc(lo=1, hi=3, rows=None, lr=0.01):
    """An SGC backbone claiming depths lo..hi, computing `rows` = (lo, hi) unless given."""
    first, last = rows or (lo, hi)
    return pg.flax_backbone(SGC(2, first, last), optax.adam(lr), lo, hi)


def _random(**changes):
    return pg.random_agent(1, 3)._replace(**changes)


def _fit(ds, **kwargs):
    kwargs = {"seeds": 1, "progress": False, **kwargs}
    return pg.fit(ds, kwargs.pop("config", CONFIG), **kwargs)


@pytest.mark.parametrize(
    "backbone, message",
    [
        (_sgc(rows=(1, 2)), r"logits\(\) returned float32 \(2, 120, 2\).*\[3, 120, 2\]"),
        (_sgc()._replace(optimizer=None), "optimizer must be an optax"),
        (_sgc()._replace(min_depth=1.0), "min_depth and max_depth must be ints"),
        (_sgc()._replace(min_depth=3, max_depth=1), "min_depth 3 is above its max_depth 1"),
        (
            _sgc()._replace(loss=lambda p, g, k, n, d: _sgc().logits(p, g, k)[d - 1, n]),
            r"loss\(\) returned float32 \(3, 2\) for nodes of shape \(3,\)",
        ),
        (
            _sgc()._replace(init=lambda key, g: {"w": jnp.zeros(3, jnp.int32)}),
            "parameters must be floats",
        ),
    ],
    ids=[
        "too-few-depth-rows",
        "no-optimizer",
        "float-depths",
        "min-above-max",
        "loss-per-class",
        "integer-params",
    ],  # fmt: skip
)
def test_a_backbone_that_cannot_run_is_refused_before_training(ds, backbone, message):
    with pytest.raises(pg.ConfigError, match=message):
        _fit(ds, backbone=backbone)


@pytest.mark.parametrize("depth, lo, hi", [(3, 1, 2), (1, 2, 3)])
def test_the_fixed_depth_must_be_one_the_backbone_computes(ds, depth, lo, hi):
    config = pg.Config.tiny(depth=depth, epochs=2)
    with pytest.raises(pg.ConfigError, match=f"computes depths {lo}..{hi}.*depth {depth}"):
        _fit(ds, config=config, method="gcn", backbone=_sgc(lo, hi))


def _learn_returning(metrics):
    return lambda key, state, policy, g, transition, step: (state, metrics)


@pytest.mark.parametrize(
    "agent, message",
    [
        (_random(learn=_learn_returning(None)), r"learn\(\) must return \(state, metrics\)"),
        (
            _random(learn=lambda key, state, policy, transition, step: (state, {})),
            r"learn\(\) could not be traced.*TypeError",
        ),
        (
            _random(learn=_learn_returning({"x": jnp.float32(1)})),
            r"summarise\(\) could not be traced.*KeyError",
        ),
        (
            _random(
                learn=_learn_returning({"val_metric": jnp.float32(0.99)}),
                summarise=agent_base.mean_over_steps,
            ),
            "'val_metric' is the loop's own",
        ),
        (
            _random(depths=lambda key, policy, g, nodes: jnp.full((3,), 2, jnp.int32)),
            r"depths\(\) returned int32 \(3,\) for 30 nodes",
        ),
        (
            _random(act=lambda key, state, g, nodes, step: (state, (), jnp.zeros(3, jnp.int32))),
            r"act\(\) returned int32 \(3,\) for 20 nodes",
        ),
        (
            _random(act=lambda k, s, g, n, t: (s, {"w": jnp.zeros(2)}, jnp.zeros_like(n))),
            r"act\(\) returned a policy of another structure",
        ),
        (
            _random(
                init=lambda key, g: (jnp.zeros(2, jnp.int32), ()),
                learn=lambda k, s, p, g, tr, t: (s.astype(jnp.float32), {}),
                summarise=agent_base.mean_over_steps,
            ),
            r"learn\(\) changed the agent state",
        ),
    ],
    ids=[
        "learn-none",
        "learn-old-signature",
        "summary-of-other-metrics",
        "reserved-metric",
        "depths-shape",
        "act-shape",
        "policy-structure",
        "state-dtype",
    ],  # fmt: skip
)
def test_an_agent_that_cannot_run_is_refused_before_training(ds, agent, message):
    with pytest.raises(pg.ConfigError, match=message):
        _fit(ds, method="random", agent=agent)


@pytest.mark.parametrize("action", [-1, 3])
def test_an_agent_acting_outside_its_actions_at_some_steps_is_refused(ds, action):
    base = pg.random_agent(1, 3)

    def act(key, state, g, nodes, step):
        state, policy, actions = base.act(key, state, g, nodes, step)
        return state, policy, jnp.where(jnp.arange(nodes.shape[0]) % 2 == 0, action, actions)

    with pytest.raises(pg.ConfigError, match=r"act\(\) returned actions outside 0..2"):
        _fit(ds, method="random", agent=base._replace(act=act))


def test_nan_logits_from_a_finite_loss_are_a_divergence(ds):
    backbone = _sgc()
    nan_logits = backbone._replace(logits=lambda p, g, k: backbone.logits(p, g, k) * jnp.nan)
    for method in ("policy-gnn", "gcn"):
        with pytest.raises(pg.DivergenceError, match="optimizer"):
            _fit(ds, config=pg.Config.tiny(num_episodes=2, epochs=2), method=method,
                 backbone=nan_logits)  # fmt: skip


def test_a_random_agent_takes_numpy_integer_depths():
    agent = pg.random_agent(np.int64(1), np.int64(3))
    assert type(agent.num_actions) is int and agent.num_actions == 3


def test_a_fit_loaded_with_other_parts_than_its_own_is_refused(ds, tmp_path):
    deepest = _random(depths=lambda key, policy, g, nodes: jnp.full(nodes.shape, 3, jnp.int32))
    fit = _fit(ds, backbone=_sgc(), agent=deepest, seeds=2)
    fit.save(tmp_path / "fit")
    same = pg.load(tmp_path / "fit", backbone=_sgc(), agent=deepest)
    np.testing.assert_array_equal(same.predict(ds.test_index), fit.predict(ds.test_index))
    with pytest.raises(pg.CheckpointError, match="do not give the recorded test scores"):
        pg.load(tmp_path / "fit", backbone=_sgc(), agent=pg.random_agent(1, 3))
    with pytest.raises(pg.CheckpointError, match="the backbone passed"):
        pg.load(tmp_path / "fit", backbone=_sgc(rows=(1, 4), hi=4), agent=deepest)


def test_a_fit_holding_your_own_parts_copies(ds):
    fit = _fit(ds, backbone=_sgc(), agent=_random())
    for copied in (copy.copy(fit), copy.deepcopy(fit)):
        np.testing.assert_array_equal(copied.predict(ds.test_index), fit.predict(ds.test_index))


def test_sensible_parts_are_accepted(ds):
    """NumPy integer depths and an optimizer with optax's init and update (MultiSteps)."""
    steps = optax.MultiSteps(optax.adam(0.01), 2)
    backbone = pg.flax_backbone(SGC(2, 1, 3), steps, np.int64(1), np.int64(3))
    assert _fit(ds, backbone=backbone).record["seeds"] == 1


def test_a_backbone_that_ignores_the_graph_it_is_given_is_refused_on_sampled_subgraphs(ds):
    backbone, whole = _sgc(), graph_lib.from_dataset(ds)
    closed = backbone._replace(logits=lambda p, g, k: backbone.logits(p, whole, k))
    sampled = pg.Config.tiny(num_episodes=2, engine="subgraph")
    with pytest.raises(pg.ConfigError, match=r"float32 \(3, 120, 2\) on a graph of 3 nodes"):
        _fit(ds, config=sampled, backbone=closed)
    assert _fit(ds, backbone=closed).record["seeds"] == 1  # the full engine: its own graph


def test_a_transductive_backbone_and_a_loss_for_flat_nodes_are_accepted_where_they_run(ds):
    """An embedding per node of the dataset (full engine), and a loss written for nodes [M]
    under the fixed-depth method (which passes nothing else)."""
    sgc = _sgc()

    def init(key, g):
        return {"sgc": sgc.init(key, g), "own": jnp.zeros((ds.num_nodes, 2))}

    def logits(params, g, key):
        return sgc.logits(params["sgc"], g, key) + params["own"][None]

    def loss(params, g, key, nodes, depths):
        rows = logits(params, g, key)[depths - 1, nodes]  # [M, C]: nodes [M] only
        picked = jnp.take_along_axis(rows, g.labels[nodes][:, None], axis=1)[:, 0]
        return jax.nn.logsumexp(rows, axis=1) - picked

    own = sgc._replace(init=init, logits=logits, loss=loss)
    fixed = pg.Config.tiny(epochs=2, depth=2)
    assert _fit(ds, config=fixed, method="gcn", backbone=own).record["seeds"] == 1
    with pytest.raises(pg.ConfigError, match=r"loss\(\) could not be traced"):
        _fit(ds, backbone=own)  # the MDP loop passes nodes [actions, buffer slots]


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"logits": lambda p, g, k: (_sgc().logits(p, g, k), {})}, r"logits\(\) returned tuple"),
        (
            {"loss": lambda p, g, k, n, d: (_sgc().loss(p, g, k, n, d), 0)},
            r"loss\(\) returned tuple",
        ),
        (
            {"logits": lambda p, g, k: _sgc().logits(p, g, k).astype(jnp.complex64)},
            r"logits\(\) returned complex64",
        ),
    ],
    ids=["logits-tuple", "loss-tuple", "complex-logits"],
)
def test_backbone_outputs_that_are_not_float_arrays_are_refused(ds, changes, message):
    with pytest.raises(pg.ConfigError, match=message):
        _fit(ds, backbone=_sgc()._replace(**changes))


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"init": lambda key, g: jnp.zeros(())}, r"init\(\) must return a tuple of 2"),
        ({"init": lambda key, g: {"state": (), "policy": ()}}, r"init\(\) must return a tuple"),
        (
            {"act": lambda k, s, g, n, t: (s, jnp.zeros_like(n))},
            r"act\(\) must return a tuple of 3",
        ),
    ],
    ids=["init-array", "init-dict", "act-pair"],
)
def test_agent_outputs_of_another_arity_are_refused(ds, changes, message):
    with pytest.raises(pg.ConfigError, match=message):
        _fit(ds, method="random", agent=_random(**changes))


def test_a_loss_of_one_value_per_row_of_nodes_is_refused(ds):
    backbone = _sgc()
    flat = backbone._replace(
        loss=lambda p, g, k, n, d: jnp.full((3,), backbone.loss(p, g, k, n, d).mean())
    )
    with pytest.raises(pg.ConfigError, match=r"loss\(\) returned float32 \(3,\)"):
        _fit(ds, backbone=flat)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"learn": _learn_returning({"q": {"a": jnp.float32(1)}})}, "must be scalars.*'q'"),
        ({"learn": _learn_returning({0: jnp.float32(1)})}, "must be scalars named by strings"),
        ({"summarise": lambda m: None}, r"summarise\(\) values must be a dict"),
        ({"summarise": lambda m: jnp.mean(m["td_loss"])}, r"summarise\(\) values must be a dict"),
        (
            {
                "init": lambda key, g: ((), {"w": jnp.zeros(3)}),
                "act": lambda k, s, g, n, t: (s, {"w": jnp.zeros(5)}, jnp.zeros_like(n)),
            },
            "policy of another structure, shapes",
        ),
    ],
    ids=["nested-metric", "number-named-metric", "summary-none", "summary-array", "policy-shape"],
)
def test_agent_metrics_and_policies_of_the_wrong_kind_are_refused(ds, changes, message):
    if "learn" in changes:
        changes = {"summarise": agent_base.mean_over_steps, **changes}
    with pytest.raises(pg.ConfigError, match=message):
        _fit(ds, method="random", agent=_random(**changes))


def test_an_agent_flag_false_at_one_step_is_a_divergence(ds):
    def learn(key, state, policy, g, transition, step):
        return state, {"agent_finite": step != 3}

    agent = _random(learn=learn, summarise=agent_base.mean_over_steps)
    with pytest.raises(pg.DivergenceError, match="agent"):
        _fit(ds, method="random", agent=agent)


def test_validation_depths_outside_the_range_are_refused(ds):
    val = np.zeros(ds.num_nodes, bool)
    val[ds.val_index] = True

    def depths(key, policy, g, nodes):
        return jnp.where(jnp.asarray(val)[nodes], 4, 2).astype(jnp.int32)

    with pytest.raises(pg.ConfigError, match=r"depths\(\) returned depths for validation"):
        _fit(ds, method="random", agent=_random(depths=depths))


def test_an_agent_with_a_numpy_integer_action_count_is_accepted(ds):
    agent = pg.random_agent(1, 3)._replace(num_actions=np.int64(3))
    assert _fit(ds, method="random", agent=agent).record["seeds"] == 1
