"""`load`: a fit saved by `Fit.save` (or the command's --out) back as a `Fit`, every file
checked against its manifest, the snapshots against the shapes its config and parts give."""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import data, methods, metrics
from policy_gnn_jax.agents.base import Agent
from policy_gnn_jax.backbones.gcn import Backbone
from policy_gnn_jax.fits import Fit
from policy_gnn_jax.runtime import arguments, checkpoint, outputs, saved_fit
from policy_gnn_jax.runtime.fingerprint import run_fingerprint


def load(
    directory: str | pathlib.Path, *, backbone: Backbone | None = None, agent: Agent | None = None
) -> Fit:
    """Reads a `Fit` written by `Fit.save` (or by `policy-gnn --out DIR`), every file checked
    against the fit's manifest. A fit trained with your own `backbone` or `agent` needs the same
    one passed again here."""
    arguments.check_jax_modes()  # predicting runs the library's programs
    meta, record, ds, leaves = saved_fit.read(directory)
    out = pathlib.Path(directory)
    try:
        config = saved_fit.config_from_dict(meta["config"], methods.get(meta["method"]).config_type)
    except config_lib.ConfigError as err:
        raise outputs.CheckpointError(
            f"{out}/fit.json holds a config this version cannot use ({err}): save the fit again."
        ) from None
    methods.get(meta["method"]).check_parts(backbone, agent, config)
    given = {"backbone": backbone, "agent": agent}
    for part in set(given) - set(meta.get("custom", ())):  # passed for a built-in one
        if given[part] is not None:
            raise outputs.CheckpointError(f"{out} was trained with the built-in {part}: "
                                             f"load it without {part}=.")  # fmt: skip
    for part in meta.get("custom", ()):
        if given.get(part) is None:
            raise outputs.CheckpointError(
                f"{out} was trained with your own {part}: pass it again, load(..., {part}=...)."
            )
    like = _snapshot_structure(meta["method"], config, ds, int(record["seeds"]), backbone, agent)
    treedef = jax.tree.structure(like)
    wanted = jax.tree.leaves(like)
    if meta["dtypes"] == [str(np.dtype(x.dtype)) for x in wanted]:
        leaves = [checkpoint.as_stored(leaf, x.dtype) for leaf, x in zip(leaves, wanted)]
    if [(leaf.shape, leaf.dtype) for leaf in leaves] != [(x.shape, x.dtype) for x in wanted]:
        if backbone is None and agent is None:
            raise outputs.CheckpointError(f"{out}/snapshots.npz does not match its config: save "
                                          f"again.")  # fmt: skip
        raise outputs.CheckpointError(
            f"{out}/snapshots.npz does not match the backbone passed or the agent passed (other "
            f"parameter shapes or types): pass the parts the fit was trained with."
        )
    params, policy, eval_keys = jax.tree.unflatten(treedef, leaves)
    fitted = Fit.of(record, config, meta["method"], ds, params, policy, eval_keys,
                    backbone=backbone, agent=agent)  # fmt: skip
    run = (ds, config, meta["method"], int(record["seeds"]), int(record["seed"]))
    if meta["run_fingerprint"] != run_fingerprint(*run):
        raise outputs.CheckpointError(
            f"{out}/results.json and fit.json describe different runs: save the fit again."
        )
    if backbone is not None or agent is not None:
        _check_recorded_scores(fitted, out)
    return fitted


def _check_recorded_scores(fitted: Fit, out: pathlib.Path) -> None:
    """Your own parts are code, which no file can fingerprint: a fit loaded with them must give
    the test scores its record holds, or the parts are not the ones it was trained with."""
    test = fitted.dataset.test_index
    logits = fitted.predict_logits(test)  # [S, M, C]
    labels = jnp.asarray(fitted.dataset.labels[test])
    got = [float(metrics.score(jnp.asarray(row), labels, fitted.dataset.metric)) for row in logits]
    want = fitted.record["test_metric"]["per_seed"]
    if not np.allclose(got, want, rtol=0, atol=1e-5):
        raise outputs.CheckpointError(
            f"the backbone and agent passed do not give the recorded test scores of {out} "
            f"({got[0]:.4f} against {want[0]:.4f} for seed index 0): pass the parts the fit was "
            f"trained with."
        )


def _snapshot_structure(method: str, config, ds: data.Dataset, seeds: int, backbone, agent):
    """Shapes of (params, policy, eval_keys) with a leading seed axis, without training."""
    entry = methods.get(method)
    g = entry.graph(config, ds)
    trainer = entry.make_trainer(config, ds, g, backbone, agent)
    keys = jax.random.split(jax.random.key(0), seeds)
    state = jax.eval_shape(jax.vmap(trainer.init, in_axes=(None, 0)), trainer.data, keys)
    params, policy = trainer.selected(state)
    eval_keys = jax.ShapeDtypeStruct((seeds, 2), jnp.uint32) if entry.uses_eval_keys else None
    return params, policy, eval_keys
