"""Fixed-depth GCN baseline (ALGORITHM.md section 7): full-batch training at one depth.

`make_baseline(config, g)` returns pure `init(key)`, `train_chunk(state)` and `evaluate(state)`;
the runner jits them, vmaps them over seeds, and calls `train_chunk` repeatedly for a progress bar.
The best-validation parameters ride in the state; test labels are read only by `evaluate`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import struct

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import gcn
from policy_gnn_jax import graph as graph_lib


@struct.dataclass
class BaselineState:
    params: dict
    opt_state: optax.OptState
    key: jax.Array
    epoch: jax.Array
    best_val: jax.Array
    best_epoch: jax.Array
    best_params: dict


class Baseline(NamedTuple):
    init: callable
    train_chunk: callable
    evaluate: callable
    epochs_per_chunk: int
    num_chunks: int


def make_baseline(
    config: config_lib.Config, g: graph_lib.Graph, epochs_per_chunk: int = 20
) -> Baseline:
    """Builds the fixed-depth trainer for `config.depth` over `config.epochs` epochs."""
    model = gcn.make_gcn(config, g, max_depth=config.depth)
    tx = gcn.make_optimizer(config.gcn_lr, config.weight_decay)
    epochs_per_chunk = min(epochs_per_chunk, config.epochs)
    num_chunks = -(-config.epochs // epochs_per_chunk)
    train_labels = g.labels[g.train_index]
    val_labels = g.labels[g.val_index]

    def init(key: jax.Array) -> BaselineState:
        key, k_init = jax.random.split(key)
        params = model.init(k_init, g, train=False)
        return BaselineState(
            params=params,
            opt_state=tx.init(params),
            key=key,
            epoch=jnp.zeros((), jnp.int32),
            best_val=jnp.full((), -1.0, jnp.float32),
            best_epoch=jnp.zeros((), jnp.int32),
            best_params=params,
        )

    def loss_fn(params, k_dropout):
        logits = model.apply(params, g, train=True, rngs={"dropout": k_dropout})[-1]
        return jnp.mean(gcn.cross_entropy(logits[g.train_index], train_labels))

    def val_accuracy(params):
        logits = model.apply(params, g, train=False)[-1]
        return gcn.accuracy(logits[g.val_index], val_labels)

    def epoch_step(state: BaselineState, _):
        key, k_dropout = jax.random.split(state.key)
        loss, grads = jax.value_and_grad(loss_fn)(state.params, k_dropout)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        # Epochs past config.epochs (a last partial chunk) leave the state unchanged.
        active = state.epoch < config.epochs
        val = val_accuracy(params)
        better = active & (val > state.best_val)  # ties keep the earliest
        new = BaselineState(
            params=params,
            opt_state=opt_state,
            key=key,
            epoch=state.epoch + 1,
            best_val=jnp.where(better, val, state.best_val),
            best_epoch=jnp.where(better, state.epoch, state.best_epoch),
            best_params=_where(better, params, state.best_params),
        )
        new = _where(active, new, state)
        return new, {"loss": loss, "val_accuracy": val}

    def train_chunk(state: BaselineState):
        return jax.lax.scan(epoch_step, state, length=epochs_per_chunk)

    def evaluate(state: BaselineState) -> dict:
        logits = model.apply(state.best_params, g, train=False)[-1][g.test_index]
        correct = jnp.argmax(logits, -1) == g.labels[g.test_index]
        return {
            "val_accuracy": state.best_val,
            "best_epoch": state.best_epoch,
            "test_accuracy": jnp.mean(correct),
            "test_correct": correct,  # per test node, for Figure 1
        }

    return Baseline(init, train_chunk, evaluate, epochs_per_chunk, num_chunks)


def _where(cond, new, old):
    return jax.tree.map(lambda a, b: jnp.where(cond, a, b), new, old)
