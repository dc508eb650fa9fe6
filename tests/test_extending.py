"""Extending the library: a backbone, an agent and a method of one's own go through `fit`,
`Fit` and `load` like the built-in ones; the method registry replaces name tests."""

import warnings

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from conftest import ROOT

import policy_gnn_jax as pg
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax import methods


def _docs_block() -> str:
    text = (ROOT / "docs" / "usage.md").read_text()
    return text.split("<!-- EXTENSION-EXAMPLE")[1].split("```python\n")[1].split("```")[0]


@pytest.fixture(scope="module")
def example():
    """The extension example of docs/usage.md, executed as written."""
    scope = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(_docs_block(), "docs/usage.md", "exec"), scope)  # noqa: S102
    return scope


def test_the_docs_extension_example_runs_as_written(example):
    fit, ds = example["fit"], example["ds"]
    assert fit.record["method"] == "policy-gnn"
    assert fit.predict_depths(ds.test_index).shape == (2, len(ds.test_index))
    # Every test node is evaluated at the deepest depth, so the share says so.
    share = fit.record["test_depth_distribution"]["mean"]
    assert share[-1] == pytest.approx(1.0) and sum(share[:-1]) == 0


def test_a_custom_backbone_predicts_with_its_own_module(example):
    """Fit.predict must use the module the user passed: recompute its logits with Flax
    directly from each seed's saved parameters and compare."""
    fit, ds, sgc, g = example["fit"], example["ds"], example["sgc"], example["g"]
    nodes = ds.test_index
    for s in range(2):
        params = jax.tree.map(lambda x, s=s: x[s], fit.params)
        logits = sgc.apply(params, g, train=False)[-1]  # the deepest depth's row
        np.testing.assert_array_equal(fit.predict(nodes)[s], np.asarray(logits[nodes]).argmax(-1))
    accuracy = (fit.predict(nodes) == ds.labels[nodes]).mean(1)
    np.testing.assert_allclose(accuracy, fit.record["test_metric"]["per_seed"], atol=1e-6)


def test_a_fit_with_custom_parts_loads_only_with_them_and_predicts_the_same(example, tmp_path):
    fit, ds = example["fit"], example["ds"]
    fit.save(tmp_path / "fit")
    with pytest.raises(pg.CheckpointError, match="your own backbone"):
        pg.load(tmp_path / "fit")
    same = pg.load(tmp_path / "fit", backbone=example["backbone"], agent=example["deepest"])
    np.testing.assert_array_equal(same.predict(ds.test_index), fit.predict(ds.test_index))


def test_custom_parts_that_do_not_fit_are_refused(example):
    ds, config, backbone, agent = (example[k] for k in ("ds", "config", "backbone", "deepest"))
    with pytest.raises(pg.ConfigError, match="takes no agent"):
        pg.fit(ds, config, method="gcn", agent=agent, seeds=1, progress=False)
    with pytest.raises(pg.ConfigError, match="takes no custom backbone"):
        pg.fit(ds, config, method="policy-gnn-plus", backbone=backbone, seeds=1, progress=False)
    with pytest.raises(pg.ConfigError, match="must be a policy_gnn_jax.Backbone"):
        pg.fit(ds, config, backbone=lambda key: None, seeds=1, progress=False)
    with pytest.raises(pg.ConfigError, match="must be a policy_gnn_jax.Agent"):
        pg.fit(ds, config, agent={"act": None}, seeds=1, progress=False)
    with pytest.raises(pg.ConfigError, match="unknown method 'nope'"):
        pg.fit(ds, config, method="nope", seeds=1, progress=False)


def test_fixed_depth_is_an_alias_of_gcn(example):
    ds = example["ds"]
    config = pg.Config.tiny(epochs=5)
    a = pg.fit(ds, config, method="gcn", seeds=2, progress=False).record
    b = pg.fit(ds, config, method="fixed-depth", seeds=2, progress=False).record
    assert b["method"] == "gcn"
    assert a["test_metric"] == b["test_metric"] and a["best_epoch"] == b["best_epoch"]


def test_a_registered_method_runs_through_fit(example):
    """A new method is one registry entry: here the fixed-depth trainer at the deepest depth,
    recording its own field; fit, record and predict go through the entry alone."""
    ds = example["ds"]
    deepest = methods.Method(
        name="test-deepest",
        make_trainer=lambda config, ds, g, backbone, agent: methods.FIXED_DEPTH.make_trainer(
            config.__class__(**{**config.__dict__, "depth": config.max_depth}), ds, g, None, None
        ),
        backbone=lambda config, g: pg.make_backbone(config, g, config.max_depth, config.max_depth),
        depth_fn=lambda config, ds, g, agent: (
            lambda params, policy, key, g, nodes: jnp.full(nodes.shape, config.max_depth)
        ),
        record_fields=lambda config, metrics, results: {"note": "deepest"},
    )
    methods.register(deepest)
    try:
        fit = pg.fit(ds, pg.Config.tiny(epochs=5), method="test-deepest", seeds=2, progress=False)
        assert fit.record["method"] == "test-deepest" and fit.record["note"] == "deepest"
        accuracy = (fit.predict(ds.test_index) == ds.labels[ds.test_index]).mean(1)
        np.testing.assert_allclose(accuracy, fit.record["test_metric"]["per_seed"], atol=1e-6)
    finally:
        methods._REGISTRY.pop("test-deepest")


def test_a_backbone_from_any_flax_module_trains_at_a_fixed_depth(example):
    """The fixed-depth trainer takes a custom backbone too (an MLP: no graph at all)."""

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, g, *, train):
            return nn.Dense(g.num_classes)(g.features)[None]  # one depth

    ds = example["ds"]
    config = pg.Config.tiny(epochs=5, depth=2)
    g = graph_lib.from_dataset(ds)
    mlp = pg.flax_backbone(MLP(), optax.adam(0.05), 2, 2)
    fit = pg.fit(ds, config, method="gcn", backbone=mlp, seeds=1, progress=False)
    params = jax.tree.map(lambda x: x[0], fit.params)
    expected = np.asarray(MLP().apply(params, g, train=False)[0][ds.test_index]).argmax(-1)
    np.testing.assert_array_equal(fit.predict(ds.test_index)[0], expected)


def test_a_fit_of_a_bfloat16_backbone_saves_and_loads(example, tmp_path):
    """Parameters of a type numpy has no name for (bfloat16) load back as saved."""

    class HalfMLP(nn.Module):
        @nn.compact
        def __call__(self, g, *, train):
            dense = nn.Dense(g.num_classes, dtype=jnp.float32, param_dtype=jnp.bfloat16)
            return dense(g.features)[None]

    ds = example["ds"]
    half = pg.flax_backbone(HalfMLP(), optax.adam(0.05), 2, 2)
    fit = pg.fit(ds, pg.Config.tiny(epochs=3, depth=2), method="gcn", backbone=half, seeds=1,
                 progress=False)  # fmt: skip
    fit.save(tmp_path / "fit")
    same = pg.load(tmp_path / "fit", backbone=half)
    for a, b in zip(jax.tree.leaves(fit.params), jax.tree.leaves(same.params), strict=True):
        assert b.dtype == jnp.bfloat16
        np.testing.assert_array_equal(np.asarray(a).view(np.uint16), np.asarray(b).view(np.uint16))


def test_a_bfloat16_fit_loaded_with_a_float16_backbone_is_refused(example, tmp_path):
    """The same shapes in another two-byte type are other parameters, not a reinterpretation."""

    class Half(nn.Module):
        param_dtype: object

        @nn.compact
        def __call__(self, g, *, train):
            dense = nn.Dense(g.num_classes, dtype=jnp.float32, param_dtype=self.param_dtype)
            return dense(g.features)[None]

    ds = example["ds"]
    bf16 = pg.flax_backbone(Half(jnp.bfloat16), optax.adam(0.05), 2, 2)
    fit = pg.fit(ds, pg.Config.tiny(epochs=3, depth=2), method="gcn", backbone=bf16, seeds=1,
                 progress=False)  # fmt: skip
    fit.save(tmp_path / "fit")
    f16 = pg.flax_backbone(Half(jnp.float16), optax.adam(0.05), 2, 2)
    with pytest.raises(pg.CheckpointError, match="shapes or types"):
        pg.load(tmp_path / "fit", backbone=f16)
