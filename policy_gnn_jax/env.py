"""The MDP (ALGORITHM.md section 3). The environment is the GCN being trained.

`step(key, state, actions, val_depths)` adds the walkers' (node, depth) pairs to the action
buffers, trains the GCN on every full buffer, measures M_t (validation accuracy with the greedy
depths `val_depths`), pays the shared reward and moves the walkers. Pure; gymnax-style signature.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from policy_gnn_jax import action_buffers, gcn
from policy_gnn_jax import config as config_lib
from policy_gnn_jax import graph as graph_lib


@struct.dataclass
class EnvState:
    nodes: jax.Array  # [W] walker positions (node ids)
    gcn_params: dict
    gcn_opt_state: optax.OptState
    buffers: action_buffers.BufferState
    history: jax.Array  # [b] last validation accuracies, ring
    history_count: jax.Array


class StepOutput(NamedTuple):
    reward: jax.Array  # [] shared by all walkers
    val_accuracy: jax.Array  # [] M_t
    gcn_trained: jax.Array  # [] bool: a buffer was full and the GCN took a step


class Env(NamedTuple):
    init: callable
    reset: callable
    step: callable
    model: gcn.SharedGCN
    num_walkers: int


def make_env(config: config_lib.Config, g: graph_lib.Graph, train_hops: np.ndarray) -> Env:
    """Builds the environment's pure functions.

    Args:
      config: run config.
      g: the graph.
      train_hops: [T, T] hop distances between training nodes (`graph.train_hop_distances`),
        used by the `labelled` transition.
    """
    model = gcn.make_gcn(config, g, max_depth=config.max_depth)
    tx = gcn.make_optimizer(config.gcn_lr, config.weight_decay)
    num_train = g.train_index.shape[0]
    num_walkers = config.num_walkers or num_train
    capacity = config.buffer_size + num_walkers - 1
    is_train = jnp.zeros(g.num_nodes, bool).at[g.train_index].set(True)
    train_pos = jnp.full(g.num_nodes, -1, jnp.int32).at[g.train_index].set(jnp.arange(num_train))
    hops = jnp.asarray(train_hops)
    val_labels = g.labels[g.val_index]

    def init(key: jax.Array) -> EnvState:
        k_params, k_reset = jax.random.split(key)
        params = model.init(k_params, g, train=False)
        return EnvState(
            nodes=_start_nodes(k_reset),
            gcn_params=params,
            gcn_opt_state=tx.init(params),
            buffers=action_buffers.init(config.num_actions, capacity),
            history=jnp.zeros(config.reward_window, jnp.float32),
            history_count=jnp.zeros((), jnp.int32),
        )

    def _start_nodes(key):
        if num_walkers == num_train:
            return g.train_index
        return g.train_index[jax.random.randint(key, (num_walkers,), 0, num_train)]

    def reset(key: jax.Array, state: EnvState) -> EnvState:
        """Puts the walkers back on training nodes; the GCN and buffers persist."""
        return state.replace(nodes=_start_nodes(key))

    def buffer_loss(params, k_dropout, buffers):
        logits_all = model.apply(params, g, train=True, rngs={"dropout": k_dropout})
        mask = action_buffers.entry_mask(buffers)  # [A, cap]
        depth_index = jnp.arange(config.num_actions) + config.min_depth - 1
        logits = logits_all[depth_index[:, None], buffers.nodes]  # [A, cap, C]
        ce = gcn.cross_entropy(logits, g.labels[buffers.nodes])
        per_buffer = jnp.sum(jnp.where(mask, ce, 0.0), 1) / jnp.maximum(mask.sum(1), 1)
        # Buffers that fill in the same step share one optimiser step on the sum of their losses.
        return jnp.sum(jnp.where(action_buffers.full(buffers, config.buffer_size), per_buffer, 0.0))

    def train_gcn(key, state: EnvState):
        full = action_buffers.full(state.buffers, config.buffer_size)
        grads = jax.grad(buffer_loss)(state.gcn_params, key, state.buffers)
        updates, opt_state = tx.update(grads, state.gcn_opt_state, state.gcn_params)
        params = optax.apply_updates(state.gcn_params, updates)
        trained = jnp.any(full)
        # Under vmap a lax.cond runs both branches anyway; a select keeps one code path.
        params, opt_state = jax.tree.map(
            lambda new, old: jnp.where(trained, new, old),
            (params, opt_state),
            (state.gcn_params, state.gcn_opt_state),
        )
        buffers = action_buffers.flush(state.buffers, full)
        return state.replace(gcn_params=params, gcn_opt_state=opt_state, buffers=buffers), trained

    def validation_accuracy(params, val_depths):
        logits_all = model.apply(params, g, train=False)[:, g.val_index]
        return gcn.accuracy(gcn.select_depth(logits_all, val_depths), val_labels)

    def reward_of(state: EnvState, acc):
        filled = jnp.arange(config.reward_window) < state.history_count
        baseline = jnp.sum(jnp.where(filled, state.history, 0.0)) / jnp.maximum(filled.sum(), 1)
        baseline = jnp.where(state.history_count > 0, baseline, acc)  # first step: reward 0
        history = jnp.roll(state.history, 1).at[0].set(acc)
        count = jnp.minimum(state.history_count + 1, config.reward_window)
        return config.reward_scale * (acc - baseline), state.replace(
            history=history, history_count=count
        )

    def step(key: jax.Array, state: EnvState, actions: jax.Array, val_depths: jax.Array):
        """Returns (next EnvState, StepOutput). actions: [W] indices; val_depths: [V] depths."""
        k_train, k_move = jax.random.split(key)
        buffers = action_buffers.add(state.buffers, state.nodes, actions, is_train[state.nodes])
        state, trained = train_gcn(k_train, state.replace(buffers=buffers))
        acc = validation_accuracy(state.gcn_params, val_depths)
        reward, state = reward_of(state, acc)
        depths = actions + config.min_depth
        next_nodes = move(k_move, state.nodes, depths)
        return state.replace(nodes=next_nodes), StepOutput(reward, acc, trained)

    def move(key, nodes, depths):
        if config.transition == "labelled":
            return labelled_transition(key, nodes, depths, g.train_index, train_pos, hops)
        return walk_transition(key, nodes, depths, g.nbr_indptr, g.nbr_indices, config.max_depth)

    return Env(init, reset, step, model, num_walkers)


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
    """An exactly `depth`-step uniform random walk per walker (isolated nodes stay put)."""
    positions = []
    v = nodes
    for k_step in jax.random.split(key, max_depth):
        degree = indptr[v + 1] - indptr[v]
        offset = jnp.floor(jax.random.uniform(k_step, v.shape) * degree).astype(jnp.int32)
        nxt = indices[jnp.minimum(indptr[v] + offset, indices.shape[0] - 1)]
        v = jnp.where(degree > 0, nxt, v)
        positions.append(v)
    return jnp.take_along_axis(jnp.stack(positions), (depths - 1)[None, :], axis=0)[0]
