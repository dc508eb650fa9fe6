"""Policy-GNN+ (`--method policy-gnn-plus`): a per-node depth policy that can use what the
headroom analysis finds. Its switches are `PlusConfig`'s (`plus_config.py`). One full-batch epoch
is:

1. the backbone takes one step on the training nodes, each at a depth given by
   `plus_train_depths` (random, the bandit's epsilon-greedy choice after a random warm-up, or
   the mean over all depths);
2. the bandit (`bandit.py`) regresses, on the POLICY half of the validation nodes, every depth's
   per-node reward (log-likelihood or correctness of the node's label at that depth: labels the
   backbone never trains on) on the nodes' label-free signals;
3. M_t = accuracy on the SELECTION half at the bandit's greedy depths; the best (backbone,
   bandit) pair so far is the snapshot. The selection half trains nothing.

Test nodes get the snapshot's greedy depths once, at the end. The signals are `signals.py`'s:
graph signals computed once on the host, and each depth's confidence, entropy and agreement
from the current backbone. The bandit does not go through `agent.Agent`: that interface sees
node ids only, and this state needs the backbone's current predictions.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import struct

from policy_gnn_jax import backbones, data, metrics
from policy_gnn_jax import config as config_lib
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.backbones import gcn as backbone_lib
from policy_gnn_jax.contrib.adaptive_depth import bandit
from policy_gnn_jax.contrib.adaptive_depth import signals as signals_lib
from policy_gnn_jax.contrib.adaptive_depth.plus_config import PlusConfig
from policy_gnn_jax.metrics import all_finite, tree_select
from policy_gnn_jax.runtime.trainer import epoch_trainer

EPSILON = 0.1  # exploration of the "policy" training depths after the warm-up


class PlusContext(NamedTuple):
    config: PlusConfig
    backbone: backbone_lib.Backbone
    optimizer: optax.GradientTransformation  # the bandit's


@struct.dataclass
class PlusData:
    """The graph and its label-free signals, passed to every function as data."""

    graph: graph_lib.Graph
    graph_signals: jax.Array  # [N, G] standardised, label-free


@struct.dataclass
class PlusState:
    params: dict
    opt_state: optax.OptState
    policy: bandit.BanditParams
    policy_opt: optax.OptState
    policy_nodes: jax.Array  # [P] the validation half that trains the bandit
    select_nodes: jax.Array  # [Q] the half that only selects the snapshot
    key: jax.Array
    epoch: jax.Array
    best_val: jax.Array
    best_epoch: jax.Array
    best_params: dict
    best_policy: bandit.BanditParams
    # [N, P] the bandit's state under `params`: computed after each update and carried, so an
    # epoch runs one evaluation forward pass, not two.
    node_signals: jax.Array


def policy_half_size(config, num_val: int) -> int:
    """How many validation nodes train the bandit; both halves must be non-empty."""
    cut = int(round(config.plus_policy_fraction * num_val))
    if not 1 <= cut <= num_val - 1:
        raise config_lib.ConfigError(
            f"Policy-GNN+ splits the {num_val} validation nodes into a policy half and a "
            f"selection half; plus_policy_fraction {config.plus_policy_fraction} leaves one "
            f"empty. Use a dataset with at least 2 validation nodes and a fraction in (0, 1)."
        )
    return cut


def make_context(config, ds: data.Dataset, g: graph_lib.Graph) -> PlusContext:
    policy_half_size(config, len(ds.val_index))  # refuse an empty half before any work
    return PlusContext(config, backbones.for_policy(config, g), optax.adam(config.plus_lr))


def plus_data(config, ds: data.Dataset, g: graph_lib.Graph) -> PlusData:
    raw = signals_lib.graph_signals(ds, config.max_depth)
    standardised = (raw - raw.mean(0)) / (raw.std(0) + 1e-6)
    return PlusData(g, jnp.asarray(standardised, jnp.float32))


def num_depths(ctx: PlusContext) -> int:
    return ctx.config.max_depth - ctx.config.min_depth + 1


def bandit_states(ctx: PlusContext, data: PlusData, probs: jax.Array) -> jax.Array:
    """[N, P] the bandit's state of every node from the backbone's probs [D, N, C]."""
    parts = []
    if ctx.config.plus_signals in ("all", "graph"):
        parts.append(data.graph_signals)
    if ctx.config.plus_signals in ("all", "depth"):
        parts.append(signals_lib.depth_signals(probs))
    return jnp.concatenate(parts, 1)


def num_signals(ctx: PlusContext, data: PlusData) -> int:
    probs = jax.ShapeDtypeStruct((num_depths(ctx), data.graph.num_nodes, 1), jnp.float32)
    return jax.eval_shape(functools.partial(bandit_states, ctx, data), probs).shape[1]


def eval_probs(ctx: PlusContext, data: PlusData, params) -> jax.Array:
    return jax.nn.softmax(ctx.backbone.logits(params, data.graph, None), -1)


def stratified(order: jax.Array, labels: jax.Array, num_classes: int) -> jax.Array:
    """`order` (a random permutation of positions) rearranged so that every prefix holds each
    class in proportion: positions sorted by their rank within their class, as a fraction of
    the class's size (ties keep the random order)."""
    onehot = jax.nn.one_hot(labels[order], num_classes, dtype=jnp.int32)
    rank = jnp.take_along_axis(jnp.cumsum(onehot, 0) - onehot, labels[order][:, None], 1)[:, 0]
    share = (rank + 0.5) / onehot.sum(0)[labels[order]]
    return order[jnp.argsort(share, stable=True)]


def init(ctx: PlusContext, data: PlusData, key: jax.Array) -> PlusState:
    g = data.graph
    key, k_params, k_split = jax.random.split(key, 3)
    params = ctx.backbone.init(k_params, g)
    val = g.val_index
    order = jax.random.permutation(k_split, val.shape[0])
    if g.metric == "roc_auc":  # each half needs both classes, or its AUC means nothing
        order = stratified(order, g.labels[val], g.num_classes)
    cut = policy_half_size(ctx.config, val.shape[0])
    policy = bandit.init(num_signals(ctx, data), num_depths(ctx))
    return PlusState(
        params=params,
        opt_state=ctx.backbone.optimizer.init(params),
        policy=policy,
        policy_opt=ctx.optimizer.init(policy),
        policy_nodes=val[order[:cut]],
        select_nodes=val[order[cut:]],
        key=key,
        epoch=jnp.zeros((), jnp.int32),
        best_val=jnp.full((), -1.0, jnp.float32),
        best_epoch=jnp.zeros((), jnp.int32),
        best_params=params,
        best_policy=policy,
        node_signals=bandit_states(ctx, data, eval_probs(ctx, data, params)),
    )


def training_depths(ctx: PlusContext, g, key, state: PlusState, node_signals) -> jax.Array:
    """[T] depth indices of the training nodes for "random" / "policy" (ignored for "all")."""
    cfg = ctx.config
    k_random, k_explore = jax.random.split(key)
    nodes = g.train_index
    random = jax.random.randint(k_random, nodes.shape, 0, num_depths(ctx))
    if cfg.plus_train_depths == "random":
        return random
    warm = state.epoch < int(cfg.plus_warmup_fraction * cfg.epochs)
    explore = warm | (jax.random.uniform(k_explore, nodes.shape) < EPSILON)
    return jnp.where(explore, random, bandit.greedy(state.policy, node_signals[nodes]))


def backbone_loss(ctx: PlusContext, params, g, key, depth_index) -> jax.Array:
    nodes = g.train_index
    loss = functools.partial(ctx.backbone.loss, params, g, key)
    if ctx.config.plus_train_depths == "all":
        d = num_depths(ctx)
        every = jnp.broadcast_to(jnp.arange(d)[:, None] + ctx.config.min_depth, (d, nodes.size))
        return jnp.mean(loss(jnp.broadcast_to(nodes, every.shape), every))
    return jnp.mean(loss(nodes, depth_index + ctx.config.min_depth))


def selection_score(g, probs, policy, node_signals, nodes) -> jax.Array:
    """The graph's metric on `nodes` at the bandit's greedy depths."""
    chosen = bandit.greedy(policy, node_signals[nodes])
    picked = jnp.take_along_axis(probs[:, nodes], chosen[None, :, None], axis=0)[0]
    return metrics.score(picked, g.labels[nodes], g.metric)


def epoch_step(ctx: PlusContext, data: PlusData, state: PlusState, _=None):
    cfg, g = ctx.config, data.graph
    key, k_depth, k_dropout = jax.random.split(state.key, 3)
    # 1. The backbone, on training nodes at depths from the current bandit and signals.
    depth_index = training_depths(ctx, g, k_depth, state, state.node_signals)
    loss, grads = jax.value_and_grad(functools.partial(backbone_loss, ctx))(
        state.params, g, k_dropout, depth_index
    )
    updates, opt_state = ctx.backbone.optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    # 2. The bandit, on the policy half: every depth's reward for labels the backbone never saw.
    probs = eval_probs(ctx, data, params)
    node_signals = bandit_states(ctx, data, probs)
    nodes = state.policy_nodes
    targets = bandit.rewards(probs[:, nodes], g.labels[nodes], cfg.plus_reward)
    policy, policy_opt, policy_loss = bandit.update(
        state.policy,
        state.policy_opt,
        ctx.optimizer,
        node_signals[nodes],
        targets,
        cfg.plus_reward,
        cfg.plus_l2,
    )
    # 3. Selection on the other half, which trains nothing.
    val = selection_score(g, probs, policy, node_signals, state.select_nodes)
    policy_score = selection_score(g, probs, policy, node_signals, nodes)
    better = val > state.best_val  # ties keep the earliest
    new = state.replace(
        params=params,
        opt_state=opt_state,
        policy=policy,
        policy_opt=policy_opt,
        key=key,
        epoch=state.epoch + 1,
        best_val=jnp.where(better, val, state.best_val),
        best_epoch=jnp.where(better, state.epoch, state.best_epoch),
        best_params=tree_select(better, params, state.best_params),
        best_policy=tree_select(better, policy, state.best_policy),
        node_signals=node_signals,
    )
    metrics = {
        "loss": loss,
        "bandit_loss": policy_loss,
        "val_metric": val,
        "policy_half_metric": policy_score,
        # Finite parameters can still give non-finite outputs (e.g. after a huge step); either
        # way the backbone is the cause, not the bandit that reads its outputs.
        "backbone_finite": all_finite(params) & jnp.all(jnp.isfinite(probs)),
        "agent_finite": all_finite(policy),
    }
    return new, metrics


def train_chunk(ctx: PlusContext, data: PlusData, state: PlusState, length: int):
    return jax.lax.scan(functools.partial(epoch_step, ctx, data), state, length=length)


def greedy_depths(ctx: PlusContext, data: PlusData, logits_all, policy, nodes) -> jax.Array:
    """[M] the depths (not indices) the bandit gives `nodes`, from the backbone's logits."""
    node_signals = bandit_states(ctx, data, jax.nn.softmax(logits_all, -1))
    return bandit.greedy(policy, node_signals[nodes]) + ctx.config.min_depth


def depths_of(ctx: PlusContext, data: PlusData, params, policy, nodes) -> jax.Array:
    """[M] the depths the bandit gives `nodes` under backbone `params`."""
    return greedy_depths(ctx, data, ctx.backbone.logits(params, data.graph, None), policy, nodes)


def evaluate(ctx: PlusContext, data: PlusData, state: PlusState) -> dict:
    """The honest protocol: the snapshot's greedy depths on the test nodes, read once."""
    g = data.graph
    logits_all = ctx.backbone.logits(state.best_params, g, None)
    depths = greedy_depths(ctx, data, logits_all, state.best_policy, g.test_index)
    logits = backbone_lib.depth_logits(ctx.backbone, logits_all[:, g.test_index], depths)
    return {
        "test_metric": metrics.score(logits, g.labels[g.test_index], g.metric),
        "val_metric": state.best_val,
        "best_epoch": state.best_epoch,
        "test_depths": depths,
        "test_depth_counts": jnp.bincount(depths - ctx.config.min_depth, length=num_depths(ctx)),
    }


def selected(state: PlusState):
    return state.best_params, state.best_policy


def make_trainer(config, ds: data.Dataset, g: graph_lib.Graph, epochs_per_chunk: int = 20):
    """Policy-GNN+ over exactly `config.epochs` epochs."""
    return epoch_trainer(
        make_context(config, ds, g),
        plus_data(config, ds, g),
        init=init,
        train_chunk=train_chunk,
        evaluate=evaluate,
        selected=selected,
        epochs=config.epochs,
        epochs_per_chunk=epochs_per_chunk,
    )
