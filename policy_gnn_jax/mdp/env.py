"""The MDP (docs/algorithm.md section 3). The environment is the backbone GNN being trained.

`step(ctx, key, state, actions, val_depths)` adds the walkers' (node, depth) pairs to the action
buffers, trains the backbone on every full buffer, measures M_t (validation accuracy with the
greedy depths `val_depths`), pays the shared reward and moves the walkers. Every function is pure
and top level over a static `EnvContext`; the backbone is only reached through its interface.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax import metrics
from policy_gnn_jax.backbones import base as backbone_lib
from policy_gnn_jax.graph import subgraph
from policy_gnn_jax.mdp import action_buffers
from policy_gnn_jax.treeutil import all_finite


@struct.dataclass
class EnvState:
    nodes: jax.Array  # [W] walker positions (node ids)
    params: dict  # the backbone's parameters
    opt_state: optax.OptState
    buffers: action_buffers.BufferState
    history: jax.Array  # [b] last validation accuracies, ring
    history_count: jax.Array
    # The subgraph engine's validation neighbourhood (drawn once per seed); None: full engine.
    val_graph: subgraph.Padded | None = None
    # [K, V, C] the backbone's validation logits at every depth for the current `params`
    # (evaluation: no dropout); recomputed only when the backbone trains.
    val_logits: jax.Array | None = None


class StepOutput(NamedTuple):
    reward: jax.Array  # [] shared by all walkers
    val_accuracy: jax.Array  # [] M_t
    gcn_trained: jax.Array  # [] bool: a buffer was full and the backbone took a step
    gcn_loss: jax.Array  # [] the buffer loss of that step (0 when none)
    backbone_finite: jax.Array  # [] bool: every backbone parameter is finite


class EnvContext(NamedTuple):
    """Everything static the MDP needs: the graph, the backbone, the config and lookups."""

    config: config_lib.Config
    graph: graph_lib.Graph
    backbone: backbone_lib.Backbone
    num_walkers: int
    is_train: jax.Array  # [N] bool
    train_pos: jax.Array  # [N] node -> row of `hops` (-1 if not a training node)
    hops: jax.Array  # [T, T] hop distances between training nodes
    sampler: subgraph.Sampler | None  # the subgraph engine's; None: the full engine


def make_context(
    config: config_lib.Config,
    g: graph_lib.Graph,
    train_hops: np.ndarray,
    backbone: backbone_lib.Backbone,
) -> EnvContext:
    """Args: train_hops: [T, T] hop distances between training nodes
    (`graph.train_hop_distances`), used by the `labelled` transition."""
    if backbone.max_depth < config.max_depth or backbone.min_depth > config.min_depth:
        raise config_lib.ConfigError(
            f"the backbone computes depths {backbone.min_depth}..{backbone.max_depth} but the "
            f"policy may pick {config.min_depth}..{config.max_depth}: build it with "
            f"min_depth <= config.min_depth and max_depth >= config.max_depth."
        )
    num_train = g.train_index.shape[0]
    sampler = None
    if subgraph.use_subgraphs(config, g):
        if backbone.on_graph is None:
            raise config_lib.ConfigError(
                "this backbone runs only on its own graph (no `on_graph`): use --engine full."
            )
        # Buffers hold training nodes only; the validation subgraph holds every validation node.
        most = max(num_train, g.val_index.shape[0])
        if config.subgraph_nodes < most:
            raise config_lib.ConfigError(
                f"subgraph_nodes {config.subgraph_nodes} cannot hold the {most} training or "
                f"validation nodes a subgraph starts from: raise --subgraph-nodes to at least "
                f"{most} (a few times more leaves room for their neighbourhoods)."
            )
        if g.host is not None and config.transition != "labelled":
            raise config_lib.ConfigError(
                "the host engine keeps the graph's edges on the host, where a random walk on the "
                "device cannot reach them: use transition 'labelled' (the default)."
            )
        sampler = subgraph.Sampler(g.host or subgraph.host_graph(g), config)
    return EnvContext(
        config=config,
        graph=g,
        backbone=backbone,
        num_walkers=config.num_walkers or num_train,
        is_train=jnp.zeros(g.num_nodes, bool).at[g.train_index].set(True),
        train_pos=jnp.full(g.num_nodes, -1, jnp.int32).at[g.train_index].set(jnp.arange(num_train)),
        hops=jnp.asarray(train_hops),
        sampler=sampler,
    )


def init(ctx: EnvContext, key: jax.Array) -> EnvState:
    k_params, k_reset = jax.random.split(key)
    params = ctx.backbone.init(k_params)
    capacity = ctx.config.buffer_size + ctx.num_walkers - 1
    # Its own key (folded in): the full engine's streams are those of before the engine.
    val_graph = validation_subgraph(ctx, jax.random.fold_in(key, 1)) if ctx.sampler else None
    return EnvState(
        nodes=start_nodes(ctx, k_reset),
        params=params,
        opt_state=ctx.backbone.optimizer.init(params),
        buffers=action_buffers.init(ctx.config.num_actions, capacity),
        history=jnp.zeros(ctx.config.reward_window, jnp.float32),
        history_count=jnp.zeros((), jnp.int32),
        val_graph=val_graph,
        val_logits=validation_logits(ctx, params, val_graph),
    )


def validation_subgraph(ctx: EnvContext, key: jax.Array) -> subgraph.Padded:
    """Every validation node's `max_depth`-hop neighbourhood (sampled if over the budgets)."""
    val = ctx.graph.val_index
    radii = jnp.full(val.shape, ctx.config.max_depth, jnp.int32)
    return subgraph.sample(ctx.sampler, key, val, radii, jnp.ones(val.shape, bool))


def start_nodes(ctx: EnvContext, key: jax.Array) -> jax.Array:
    """One walker per training node, or `num_walkers` uniformly drawn training nodes."""
    g = ctx.graph
    num_train = g.train_index.shape[0]
    if ctx.num_walkers == num_train:
        return g.train_index
    return g.train_index[jax.random.randint(key, (ctx.num_walkers,), 0, num_train)]


def reset(ctx: EnvContext, key: jax.Array, state: EnvState) -> EnvState:
    """Puts the walkers back on training nodes; the backbone and buffers persist."""
    return state.replace(nodes=start_nodes(ctx, key))


def buffer_depth_column(cfg: config_lib.Config) -> jax.Array:
    """[A, 1]: the depth each action buffer trains at (buffer a holds action a)."""
    return (jnp.arange(cfg.num_actions) + cfg.min_depth)[:, None]


def buffer_loss(ctx: EnvContext, params, key: jax.Array, buffers) -> jax.Array:
    """The sum over full buffers of each buffer's mean cross-entropy at its depth."""
    cfg = ctx.config
    mask = action_buffers.entry_mask(buffers)  # [A, cap]
    buffer_depths = buffer_depth_column(cfg)  # [A, 1]
    if ctx.graph.deterministic:
        total = _buffer_sums_by_counts(ctx, params, key, buffers, mask, buffer_depths)
    else:
        depths = jnp.broadcast_to(buffer_depths, buffers.nodes.shape)
        ce = ctx.backbone.loss(params, key, buffers.nodes, depths)  # [A, cap]
        total = jnp.sum(jnp.where(mask, ce, 0.0), 1)
    per_buffer = total / jnp.maximum(mask.sum(1), 1)
    # Buffers that fill in the same step share one optimiser step on the sum of their losses.
    return jnp.sum(jnp.where(action_buffers.full(buffers, cfg.buffer_size), per_buffer, 0.0))


def subgraph_buffer_loss(ctx: EnvContext, params, key, buffers, sub: subgraph.Padded):
    """`buffer_loss` on the padded neighbourhood `sub` of the full buffers' entries."""
    cfg = ctx.config
    full = action_buffers.full(buffers, cfg.buffer_size)
    mask = action_buffers.entry_mask(buffers)  # [A, cap]
    logits_all = ctx.backbone.on_graph(params, key, subgraph.view(ctx.graph, sub))
    rows = buffer_depth_column(cfg) - ctx.backbone.min_depth  # [A, 1]
    logits = logits_all[rows, sub.positions]  # [A, cap, C]
    ce = backbone_lib.cross_entropy(logits, ctx.graph.labels[buffers.nodes])
    # Entries of buffers that are not full are not in `sub`: masked out, as they add nothing.
    total = jnp.sum(jnp.where(mask & full[:, None], ce, 0.0), 1)
    per_buffer = total / jnp.maximum(mask.sum(1), 1)
    return jnp.sum(jnp.where(full, per_buffer, 0.0))


def buffer_subgraph(ctx: EnvContext, key: jax.Array, buffers) -> subgraph.Padded:
    """The union of the full buffers' entries' neighbourhoods, each to its buffer's depth."""
    cfg = ctx.config
    full = action_buffers.full(buffers, cfg.buffer_size)
    mask = action_buffers.entry_mask(buffers) & full[:, None]
    depths = jnp.broadcast_to(buffer_depth_column(cfg), mask.shape)
    return subgraph.sample(ctx.sampler, key, buffers.nodes, depths, mask)


def _buffer_sums_by_counts(ctx: EnvContext, params, key, buffers, mask, buffer_depths):
    """Each buffer's summed cross-entropy as counts x per-node losses, [A].

    A node can sit in a buffer more than once, so the gradient of a per-entry gather would
    scatter-add into the same logits twice: atomics on a GPU. Integer counts per (depth, node)
    are exact in any order, and the loss of every (depth, node) pair once is a gather without
    repeats, so the sums run in a fixed order (the "gather" kernels' promise).
    """
    num_actions, n = ctx.config.num_actions, ctx.graph.num_nodes
    rows = jnp.arange(num_actions)[:, None]
    counts = (
        jnp.zeros((num_actions, n), jnp.int32).at[rows, buffers.nodes].add(mask.astype(jnp.int32))
    )
    nodes = jnp.broadcast_to(jnp.arange(n), (num_actions, n))
    ce = ctx.backbone.loss(params, key, nodes, jnp.broadcast_to(buffer_depths, nodes.shape))
    return jnp.sum(counts * ce, 1)


def train_backbone(ctx: EnvContext, key: jax.Array, state: EnvState):
    """One optimiser step on the full buffers (if any), which are then emptied, and the
    validation logits of the new parameters.

    Both sit in a `lax.cond`, so a step with no full buffer (a third of Cora's steps) skips the
    backbone's forward and backward (and the subgraph engine's sampling) and keeps the
    validation logits, which depend on nothing but the parameters. Under vmap, JAX turns a cond
    on per-seed values into a select that computes both branches, which is what the loop did
    before; `--seed-mode map` gets the saving.

    Returns:
      (state, trained [] bool, loss [] (0 when nothing trained)).
    """
    full = action_buffers.full(state.buffers, ctx.config.buffer_size)
    trained = jnp.any(full)
    params, opt_state, loss, val_logits = jax.lax.cond(
        trained,
        functools.partial(_optimiser_step, ctx, key),
        lambda s: (s.params, s.opt_state, jnp.zeros((), jnp.float32), s.val_logits),
        state,
    )
    buffers = action_buffers.flush(state.buffers, full)
    state = state.replace(
        params=params, opt_state=opt_state, buffers=buffers, val_logits=val_logits
    )
    return state, trained, loss


def _optimiser_step(ctx: EnvContext, key: jax.Array, state: EnvState):
    """(params, optimiser state, loss) after one step on the full buffers' loss."""
    if ctx.sampler is None:
        loss_fn = functools.partial(buffer_loss, ctx)
        loss, grads = jax.value_and_grad(loss_fn)(state.params, key, state.buffers)
    else:
        sub = buffer_subgraph(ctx, jax.random.fold_in(key, 1), state.buffers)
        loss_fn = functools.partial(subgraph_buffer_loss, ctx)
        loss, grads = jax.value_and_grad(loss_fn)(state.params, key, state.buffers, sub)
    updates, opt_state = ctx.backbone.optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    val_logits = validation_logits(ctx, params, state.val_graph)
    return params, opt_state, loss.astype(jnp.float32), val_logits


def validation_logits(
    ctx: EnvContext, params, val_graph: subgraph.Padded | None = None
) -> jax.Array:
    """[K, V, C]: the validation nodes' logits at every depth (evaluation, no dropout); on
    their neighbourhood `val_graph` under the subgraph engine."""
    g = ctx.graph
    if val_graph is None:
        return ctx.backbone.logits(params, None)[:, g.val_index]
    view = subgraph.view(g, val_graph)
    return ctx.backbone.on_graph(params, None, view)[:, val_graph.positions]


def neighbourhood_logits(ctx: EnvContext, params, key: jax.Array, nodes: jax.Array):
    """[K, M, C]: the nodes' logits at every depth (evaluation, no dropout), each node on its
    own sampled `max_depth`-hop neighbourhood (`subgraph.node_logits`)."""
    on_graph = functools.partial(ctx.backbone.on_graph, params, None)
    return subgraph.node_logits(ctx.sampler, on_graph, ctx.graph, key, nodes, ctx.config.max_depth)


def validation_accuracy(ctx: EnvContext, val_logits: jax.Array, val_depths: jax.Array):
    """M_t: the graph's metric (accuracy, or ROC AUC) on the validation nodes, each at its depth
    in `val_depths` [V], from `validation_logits` [K, V, C]."""
    logits = backbone_lib.depth_logits(ctx.backbone, val_logits, val_depths)
    g = ctx.graph
    return metrics.score(logits, g.labels[g.val_index], g.metric)


def shared_reward(ctx: EnvContext, state: EnvState, acc: jax.Array):
    """r_t = scale * (M_t - mean of the last b values of M); 0 on the first step."""
    window = ctx.config.reward_window
    filled = jnp.arange(window) < state.history_count
    baseline = jnp.sum(jnp.where(filled, state.history, 0.0)) / jnp.maximum(filled.sum(), 1)
    baseline = jnp.where(state.history_count > 0, baseline, acc)
    history = jnp.roll(state.history, 1).at[0].set(acc)
    count = jnp.minimum(state.history_count + 1, window)
    reward = ctx.config.reward_scale * (acc - baseline)
    return reward, state.replace(history=history, history_count=count)


def step(ctx: EnvContext, key: jax.Array, state: EnvState, actions, val_depths):
    """Returns (next EnvState, StepOutput). actions: [W] indices; val_depths: [V] depths."""
    k_train, k_move = jax.random.split(key)
    is_train = ctx.is_train[state.nodes]
    buffers = action_buffers.add(state.buffers, state.nodes, actions, is_train)
    state, trained, loss = train_backbone(ctx, k_train, state.replace(buffers=buffers))
    acc = validation_accuracy(ctx, state.val_logits, val_depths)
    reward, state = shared_reward(ctx, state, acc)
    next_nodes = move(ctx, k_move, state.nodes, actions + ctx.config.min_depth)
    finite = all_finite(state.params)
    return state.replace(nodes=next_nodes), StepOutput(reward, acc, trained, loss, finite)


def move(ctx: EnvContext, key: jax.Array, nodes: jax.Array, depths: jax.Array) -> jax.Array:
    g = ctx.graph
    if ctx.config.transition == "labelled":
        return labelled_transition(key, nodes, depths, g.train_index, ctx.train_pos, ctx.hops)
    return walk_transition(key, nodes, depths, g.nbr_indptr, g.nbr_indices, ctx.config.max_depth)


def labelled_transition(key, nodes, depths, train_index, train_pos, hops):
    """Next node uniform among the OTHER training nodes within `depth` hops; none: any train node.

    Args:
      key: PRNG key.
      nodes: [W] current node ids (training nodes).
      depths: [W] hops allowed.
      train_index: [T] training node ids; train_pos: [N] node -> row of `hops` (-1 if none).
      hops: [T, T] hop distances.
    """
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
