"""The MDP (docs/algorithm.md section 3): the environment is the backbone GNN being trained.

`step` adds the walkers' (node, depth) pairs to the action buffers, trains the backbone on every
full buffer, measures M_t (the validation metric at the greedy depths), pays the shared reward and
moves the walkers: pure functions over a static `EnvContext`, the graph passed as data (`MDPData`).
`policy_gnn.py` builds the context for a config.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import optax
from flax import struct

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax import metrics
from policy_gnn_jax.backbones import gcn as backbone_lib
from policy_gnn_jax.metrics import all_finite


@struct.dataclass
class MDPData:
    """What the MDP reads of the graph, an argument of every function (never closed over): the
    compiled loop takes it like any input, and a sweep maps over the splits' stacked copies."""

    graph: graph_lib.Graph
    train_pos: jax.Array  # [N] node -> row of `hops` (-1: not a training node)
    hops: jax.Array  # [T, T] hop distances between training nodes


# The GNN action buffers (Algorithm 2): one fixed-capacity buffer of node ids per depth. A buffer
# that holds at least `buffer_size` entries after a step's additions is trained on and emptied.
# Each step adds up to W entries, so the arrays hold `buffer_size + W - 1`: nothing is ever
# dropped, and a flushed buffer trains on all its entries (between buffer_size and that bound).


@struct.dataclass
class BufferState:
    nodes: jax.Array  # [A, capacity] node ids
    count: jax.Array  # [A] entries filled


def init_buffers(num_actions: int, capacity: int) -> BufferState:
    return BufferState(
        nodes=jnp.zeros((num_actions, capacity), jnp.int32),
        count=jnp.zeros((num_actions,), jnp.int32),
    )


def add_to_buffers(state: BufferState, nodes, actions, valid) -> BufferState:
    """Appends node `nodes[i]` [W] to buffer `actions[i]` (0..A-1) wherever `valid[i]` (bool:
    the node has a training label)."""
    chex.assert_rank([nodes, actions, valid], 1)
    chex.assert_equal_shape([nodes, actions, valid])
    chex.assert_type([nodes, actions, valid], [int, int, bool])
    num_actions, capacity = state.nodes.shape
    chosen = (actions[None, :] == jnp.arange(num_actions)[:, None]) & valid[None, :]  # [A, W]
    slot = state.count[:, None] + jnp.cumsum(chosen, axis=1) - 1
    slot = jnp.where(chosen, slot, capacity)  # out of range: dropped by mode="drop"
    rows = jnp.broadcast_to(jnp.arange(num_actions)[:, None], slot.shape)
    new_nodes = state.nodes.at[rows, slot].set(jnp.broadcast_to(nodes, slot.shape), mode="drop")
    return BufferState(nodes=new_nodes, count=state.count + chosen.sum(axis=1))


def full_buffers(state: BufferState, buffer_size: int) -> jax.Array:
    """[A] bool: buffers ready to train."""
    return state.count >= buffer_size


def buffer_entries(state: BufferState) -> jax.Array:
    """[A, capacity] bool: filled slots."""
    return jnp.arange(state.nodes.shape[1])[None, :] < state.count[:, None]


def flush_buffers(state: BufferState, flushed: jax.Array) -> BufferState:
    """Empties the buffers where `flushed` [A] is true."""
    return state.replace(count=jnp.where(flushed, 0, state.count))


@struct.dataclass
class EnvState:
    nodes: jax.Array  # [W] walker positions (node ids)
    params: dict  # the backbone's parameters
    opt_state: optax.OptState
    buffers: BufferState
    history: jax.Array  # [b] the last validation scores, newest first
    history_count: jax.Array  # how many of `history` are filled (0: no baseline yet)
    # The engine's own state (the subgraph engine's validation neighbourhood); None: full engine.
    engine_state: Any = None
    # [D, V, C] every depth's validation logits for `params` (no dropout; `policy_gnn.init_env`).
    val_logits: jax.Array | None = None


class StepOutput(NamedTuple):
    reward: jax.Array  # [] shared by all walkers
    val_metric: jax.Array  # [] M_t
    gcn_trained: jax.Array  # [] bool: a buffer was full and the backbone took a step
    gcn_loss: jax.Array  # [] the buffer loss of that step (0 when none)
    backbone_finite: jax.Array  # [] bool: every backbone parameter is finite


class Engine(NamedTuple):
    """How the backbone meets the graph, chosen once per run: the full engine (`FULL_ENGINE`) or
    the subgraph and host engines (`mdp/subgraph_engine.py`); the step never asks which. `init` ->
    `EnvState.engine_state`; `loss_and_grads` -> those of `buffer_loss`; logits [D, nodes, C]."""

    init: Callable
    loss_and_grads: Callable
    validation_logits: Callable
    test_logits: Callable


class EnvContext(NamedTuple):
    """Everything static the MDP needs: the config, the backbone and the engine."""

    config: config_lib.Config
    backbone: backbone_lib.Backbone
    engine: Engine
    num_walkers: int
    sampler: Any = None  # the subgraph and host engines' `sampler.Sampler`


def start_nodes(ctx: EnvContext, data: MDPData, key: jax.Array) -> jax.Array:
    """One walker per training node, or `num_walkers` uniformly drawn training nodes."""
    train = data.graph.train_index
    if ctx.num_walkers == train.shape[0]:
        return train
    return train[jax.random.randint(key, (ctx.num_walkers,), 0, train.shape[0])]


def reset(ctx: EnvContext, data: MDPData, key: jax.Array, state: EnvState) -> EnvState:
    """Puts the walkers back on training nodes; the backbone and buffers persist."""
    return state.replace(nodes=start_nodes(ctx, data, key))


def buffer_depth_column(cfg: config_lib.Config) -> jax.Array:
    """[A, 1]: the depth each action buffer trains at (buffer a holds action a)."""
    return (jnp.arange(cfg.num_actions) + cfg.min_depth)[:, None]


def buffer_loss(ctx: EnvContext, params, data: MDPData, key: jax.Array, buffers) -> jax.Array:
    """The sum over full buffers of each buffer's mean cross-entropy at its depth."""
    cfg, g = ctx.config, data.graph
    mask = buffer_entries(buffers)  # [A, cap]
    buffer_depths = buffer_depth_column(cfg)  # [A, 1]
    if g.deterministic:
        total = _buffer_sums_by_counts(ctx, params, g, key, buffers, mask, buffer_depths)
    else:
        depths = jnp.broadcast_to(buffer_depths, buffers.nodes.shape)
        ce = ctx.backbone.loss(params, g, key, buffers.nodes, depths)  # [A, cap]
        total = jnp.sum(jnp.where(mask, ce, 0.0), 1)
    per_buffer = total / jnp.maximum(mask.sum(1), 1)
    # Buffers that fill in the same step share one optimiser step on the sum of their losses.
    return jnp.sum(jnp.where(full_buffers(buffers, cfg.buffer_size), per_buffer, 0.0))


def _buffer_sums_by_counts(ctx: EnvContext, params, g, key, buffers, mask, buffer_depths):
    """Each buffer's summed cross-entropy as counts x per-node losses, [A].

    A node can sit in a buffer more than once, so the gradient of a per-entry gather would
    scatter-add into the same logits twice: atomics on a GPU. Integer counts per (depth, node)
    are exact in any order, and the loss of every (depth, node) pair once is a gather without
    repeats, so the sums run in a fixed order (the "gather" kernels' promise).
    """
    num_actions, n = ctx.config.num_actions, g.num_nodes
    rows = jnp.arange(num_actions)[:, None]
    counts = (
        jnp.zeros((num_actions, n), jnp.int32).at[rows, buffers.nodes].add(mask.astype(jnp.int32))
    )
    nodes = jnp.broadcast_to(jnp.arange(n), (num_actions, n))
    ce = ctx.backbone.loss(params, g, key, nodes, jnp.broadcast_to(buffer_depths, nodes.shape))
    return jnp.sum(counts * ce, 1)


def train_backbone(ctx: EnvContext, data: MDPData, key: jax.Array, state: EnvState):
    """One optimiser step on the full buffers (if any), which are then emptied, and the
    validation logits of the new parameters; returns (state, trained, loss or 0). A `lax.cond`:
    a step with no full buffer (a third of Cora's steps) skips the backbone's forward and
    backward (under vmap it becomes a select computing both: `--seed-mode map` keeps the saving)."""
    full = full_buffers(state.buffers, ctx.config.buffer_size)
    trained = jnp.any(full)
    params, opt_state, loss, val_logits = jax.lax.cond(
        trained,
        functools.partial(_optimiser_step, ctx, data, key),
        lambda s: (s.params, s.opt_state, jnp.zeros((), jnp.float32), s.val_logits),
        state,
    )
    buffers = flush_buffers(state.buffers, full)
    state = state.replace(
        params=params, opt_state=opt_state, buffers=buffers, val_logits=val_logits
    )
    return state, trained, loss


def _optimiser_step(ctx: EnvContext, data: MDPData, key: jax.Array, state: EnvState):
    """(params, optimiser state, loss, validation logits) after one step on the full buffers."""
    loss, grads = ctx.engine.loss_and_grads(ctx, data, key, state.params, state.buffers)
    updates, opt_state = ctx.backbone.optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    val_logits = ctx.engine.validation_logits(ctx, data, params, state.engine_state)
    return params, opt_state, loss.astype(jnp.float32), val_logits


def validation_metric(ctx: EnvContext, data: MDPData, val_logits, val_depths) -> jax.Array:
    """M_t: the graph's metric (accuracy, or ROC AUC) on the validation nodes, each at its depth
    in `val_depths` [V], from the validation logits [D, V, C]."""
    logits = backbone_lib.depth_logits(ctx.backbone, val_logits, val_depths)
    g = data.graph
    return metrics.score(logits, g.labels[g.val_index], g.metric)


# The full engine: the backbone on the whole graph.


def _full_loss_and_grads(ctx: EnvContext, data: MDPData, key, params, buffers):
    return jax.value_and_grad(functools.partial(buffer_loss, ctx))(params, data, key, buffers)


def _full_validation_logits(ctx: EnvContext, data: MDPData, params, engine_state):
    del engine_state
    return ctx.backbone.logits(params, data.graph, None)[:, data.graph.val_index]


def full_test_logits(ctx: EnvContext, data: MDPData, params, key):
    del key
    return ctx.backbone.logits(params, data.graph, None)[:, data.graph.test_index]


FULL_ENGINE = Engine(
    init=lambda ctx, data, key: None,  # no state of its own
    loss_and_grads=_full_loss_and_grads,
    validation_logits=_full_validation_logits,
    test_logits=full_test_logits,
)


def shared_reward(ctx: EnvContext, state: EnvState, metric: jax.Array):
    """r_t = scale * (M_t - mean of the last b values of M); 0 on the first step."""
    window = ctx.config.reward_window
    filled = jnp.arange(window) < state.history_count
    baseline = jnp.sum(jnp.where(filled, state.history, 0.0)) / jnp.maximum(filled.sum(), 1)
    baseline = jnp.where(state.history_count > 0, baseline, metric)
    history = jnp.roll(state.history, 1).at[0].set(metric)
    count = jnp.minimum(state.history_count + 1, window)
    reward = ctx.config.reward_scale * (metric - baseline)
    return reward, state.replace(history=history, history_count=count)


def step(ctx: EnvContext, data: MDPData, key: jax.Array, state: EnvState, actions, val_depths):
    """Returns (next EnvState, StepOutput). actions: [W] indices; val_depths: [V] depths."""
    k_train, k_move = jax.random.split(key)
    # Only labelled walkers enter a buffer; under the `walk` transition a walker can leave them.
    is_train = data.train_pos[state.nodes] >= 0
    buffers = add_to_buffers(state.buffers, state.nodes, actions, is_train)
    state, trained, loss = train_backbone(ctx, data, k_train, state.replace(buffers=buffers))
    metric = validation_metric(ctx, data, state.val_logits, val_depths)
    reward, state = shared_reward(ctx, state, metric)
    next_nodes = move(ctx, data, k_move, state.nodes, actions + ctx.config.min_depth)
    # Finite parameters can still give non-finite logits (a backbone's own fault): either diverged.
    finite = all_finite(state.params) & jnp.all(jnp.isfinite(state.val_logits))
    return state.replace(nodes=next_nodes), StepOutput(reward, metric, trained, loss, finite)


def move(ctx: EnvContext, data: MDPData, key: jax.Array, nodes, depths) -> jax.Array:
    g = data.graph
    if ctx.config.transition == "labelled":
        return labelled_transition(key, nodes, depths, g.train_index, data.train_pos, data.hops)
    return walk_transition(key, nodes, depths, g.nbr_indptr, g.nbr_indices, ctx.config.max_depth)


def labelled_transition(key, nodes, depths, train_index, train_pos, hops):
    """Next node uniform among the OTHER training nodes within `depths` [W] hops of `nodes` [W]
    (none: any training node). `train_pos`: [N] node -> row of `hops` [T, T] (-1: none)."""
    rows = train_pos[nodes]
    within = hops[rows] <= depths[:, None]
    within = within & (jnp.arange(hops.shape[0])[None, :] != rows[:, None])
    any_within = jnp.any(within, axis=1, keepdims=True)
    logits = jnp.where(within | ~any_within, 0.0, -jnp.inf)
    return train_index[jax.random.categorical(key, logits, axis=-1)]


def walk_transition(key, nodes, depths, indptr, indices, max_depth):
    """An exactly `depth`-step uniform random walk per walker (isolated nodes stay put; depth 0
    stays put)."""
    positions = [nodes]
    v = nodes
    for k_step in jax.random.split(key, max_depth):
        degree = indptr[v + 1] - indptr[v]
        offset = jnp.floor(jax.random.uniform(k_step, v.shape) * degree).astype(jnp.int32)
        nxt = indices[jnp.minimum(indptr[v] + offset, indices.shape[0] - 1)]
        v = jnp.where(degree > 0, nxt, v)
        positions.append(v)
    return jnp.take_along_axis(jnp.stack(positions), depths[None, :], axis=0)[0]
