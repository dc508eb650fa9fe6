"""Fixed-depth baseline (docs/algorithm.md section 7): the backbone trained full-batch at one depth.

Top-level pure functions over a static `BaselineContext`, the graph passed as data;
`make_baseline` returns a `trainer.Trainer` that the runner jits, vmaps over seeds and drives
chunk by chunk. The best-validation parameters ride in the state; test labels are read only
by `evaluate`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import struct

from policy_gnn_jax import backbones, metrics
from policy_gnn_jax import config as config_lib
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.backbones import gcn as backbone_lib
from policy_gnn_jax.metrics import all_finite, tree_select
from policy_gnn_jax.runtime.trainer import Trainer, epoch_trainer


@struct.dataclass
class BaselineState:
    params: dict
    opt_state: optax.OptState
    key: jax.Array
    epoch: jax.Array
    best_val: jax.Array
    best_epoch: jax.Array
    best_params: dict


class BaselineContext(NamedTuple):
    backbone: backbone_lib.Backbone
    depth: int


def init(ctx: BaselineContext, g: graph_lib.Graph, key: jax.Array) -> BaselineState:
    key, k_init = jax.random.split(key)
    params = ctx.backbone.init(k_init, g)
    return BaselineState(
        params=params,
        opt_state=ctx.backbone.optimizer.init(params),
        key=key,
        epoch=jnp.zeros((), jnp.int32),
        best_val=jnp.full((), -1.0, jnp.float32),
        best_epoch=jnp.zeros((), jnp.int32),
        best_params=params,
    )


def train_loss(ctx: BaselineContext, params, g: graph_lib.Graph, key: jax.Array) -> jax.Array:
    """Mean cross-entropy of the training nodes at the fixed depth."""
    nodes = g.train_index
    depths = jnp.full(nodes.shape, ctx.depth)
    return jnp.mean(ctx.backbone.loss(params, g, key, nodes, depths))


def val_metric(ctx: BaselineContext, g: graph_lib.Graph, params):
    """(the validation score, whether the validation logits are finite)."""
    logits = ctx.backbone.logits(params, g, None)[ctx.depth - ctx.backbone.min_depth]
    val = logits[g.val_index]
    return metrics.score(val, g.labels[g.val_index], g.metric), jnp.all(jnp.isfinite(val))


def epoch_step(ctx: BaselineContext, g: graph_lib.Graph, state: BaselineState, _=None):
    """One full-batch optimiser step, then the validation check that keeps the best epoch."""
    key, k_dropout = jax.random.split(state.key)
    loss_fn = functools.partial(train_loss, ctx)
    loss, grads = jax.value_and_grad(loss_fn)(state.params, g, k_dropout)
    updates, opt_state = ctx.backbone.optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    val, finite_logits = val_metric(ctx, g, params)
    better = val > state.best_val  # ties keep the earliest
    new = BaselineState(
        params=params,
        opt_state=opt_state,
        key=key,
        epoch=state.epoch + 1,
        best_val=jnp.where(better, val, state.best_val),
        best_epoch=jnp.where(better, state.epoch, state.best_epoch),
        best_params=tree_select(better, params, state.best_params),
    )
    finite = all_finite(params) & finite_logits
    return new, {"loss": loss, "val_metric": val, "backbone_finite": finite}


def train_chunk(ctx: BaselineContext, g: graph_lib.Graph, state: BaselineState, length: int):
    """`length` epochs (a static int) as one scan."""
    return jax.lax.scan(functools.partial(epoch_step, ctx, g), state, length=length)


def evaluate(ctx: BaselineContext, g: graph_lib.Graph, state: BaselineState) -> dict:
    logits = ctx.backbone.logits(state.best_params, g, None)[ctx.depth - ctx.backbone.min_depth][
        g.test_index
    ]
    correct = jnp.argmax(logits, -1) == g.labels[g.test_index]
    return {
        "val_metric": state.best_val,
        "best_epoch": state.best_epoch,
        "test_metric": metrics.score(logits, g.labels[g.test_index], g.metric),
        "test_correct": correct,  # per test node, for Figure 1
    }


def selected(state: BaselineState):
    return state.best_params, None


def make_baseline(
    config: config_lib.Config,
    g: graph_lib.Graph,
    epochs_per_chunk: int = 20,
    backbone: backbone_lib.Backbone | None = None,
) -> Trainer:
    """The fixed-depth trainer for `config.depth` over exactly `config.epochs` epochs."""
    backbone = backbone or backbones.for_fixed_depth(config, g)
    if not backbone.min_depth <= config.depth <= backbone.max_depth:
        raise config_lib.ConfigError(
            f"the backbone computes depths {backbone.min_depth}..{backbone.max_depth}, but the "
            f"fixed-depth method trains depth {config.depth} (Config.depth, --depth): build it "
            f"to compute that depth."
        )
    return epoch_trainer(
        BaselineContext(backbone, config.depth),
        g,
        init=init,
        train_chunk=train_chunk,
        evaluate=evaluate,
        selected=selected,
        epochs=config.epochs,
        epochs_per_chunk=epochs_per_chunk,
    )
