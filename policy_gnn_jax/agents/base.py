"""The agent interface: the meta-policy that picks each node's depth, as pure functions.

The MDP loop (`mdp/loop.py`) reads as `act -> depths -> env.step -> learn -> keep_best` and only
calls these functions, so a new RL algorithm is one new module returning an `Agent`; the loop does
not change. `dqn.dqn_agent` is the paper's Double DQN; `random_agent` is the random-policy baseline.

Actions are indices 0..A-1 (depth = action + min_depth); `depths` returns depths.
A *policy* is the frozen pytree that decides depths (for the DQN: Q-network parameters and the
state normaliser's statistics). The loop keeps the policy of the best validation step in its
snapshot and evaluates test nodes with it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from policy_gnn_jax.metrics import mean_where

AgentState = Any  # a pytree
Policy = Any  # a pytree


def mean_over_steps(metrics: dict) -> dict:
    """Each metric's mean over an episode's steps; a flag (a bool) holds if it held at every
    step."""
    return {
        name: jnp.all(values, axis=0) if values.dtype == bool else jnp.mean(values, axis=0)
        for name, values in metrics.items()
    }


class Agent(NamedTuple):
    """A meta-policy as pure functions. W walkers, M nodes, A actions; `g` is the graph (a
    node's state is read from it: for the DQN, its feature row), passed, never closed over.

    Attributes:
      init: (key, g) -> (agent state, initial policy).
      act: (key, state, g, nodes [W], step []) -> (state, policy, actions [W]): the exploring
        choice for the walkers, and the policy that the greedy choices of this step follow.
      depths: (key, policy, g, nodes [M]) -> depths [M]: the policy's evaluation choice.
      learn: (key, state, policy, g, transition of [W] node ids, step []) -> (state, metrics):
        scalars of the agent's choosing; a boolean `agent_finite` lets a divergence be blamed
        on the agent.
      num_actions: A.
      summarise: an episode's `learn` metrics [T] -> one value each (default: the mean).
    """

    init: Callable[[jax.Array, Any], tuple[AgentState, Policy]]
    act: Callable[..., tuple[AgentState, Policy, jax.Array]]
    depths: Callable[[jax.Array, Policy, Any, jax.Array], jax.Array]
    learn: Callable[..., tuple[AgentState, dict]]
    num_actions: int
    summarise: Callable[[dict], dict] = mean_over_steps


def learning_summary(metrics: dict) -> dict:
    """The DQN's `learn` metrics per episode: the mean epsilon, the updates made, the mean TD
    loss over the steps that made one, and whether the Q-network stayed finite."""
    return {
        "epsilon": jnp.mean(metrics["epsilon"], axis=0),
        "dqn_updates": metrics["dqn_updates"].sum(0),
        "td_loss": mean_where(metrics["td_loss"], metrics["dqn_updates"] > 0),
        "agent_finite": jnp.all(metrics["agent_finite"]),
    }


def idle_metrics(epsilon: float) -> dict:
    """The learn metrics of an agent that does not learn (`learning_summary` reads them)."""
    return {
        "td_loss": jnp.zeros((), jnp.float32),
        "dqn_updates": jnp.zeros((), jnp.int32),
        "epsilon": jnp.full((), epsilon, jnp.float32),
        "agent_finite": jnp.ones((), bool),
    }


def _random_init(key, g):
    del key, g
    return (), ()


def _random_act(num_actions: int, key, state, g, nodes, step):
    del g, step
    # The same draws as dqn.epsilon_greedy at epsilon 1 (explore, then a uniform action): the
    # random policy is the DQN loop held at epsilon 1, without training a Q-network it ignores.
    _, k_random = jax.random.split(key)
    return state, (), jax.random.randint(k_random, nodes.shape, 0, num_actions)


def _random_depths(min_depth: int, max_depth: int, key, policy, g, nodes):
    del policy, g
    return jax.random.randint(key, nodes.shape, min_depth, max_depth + 1)


def _idle_learn(key, state, policy, g, transition, step):
    del key, policy, g, transition, step
    return state, idle_metrics(1.0)


def random_agent(min_depth: int, max_depth: int) -> Agent:
    """Uniformly random depths in training and at evaluation (docs/algorithm.md section 7)."""
    min_depth, max_depth = int(min_depth), int(max_depth)  # a NumPy integer too
    num_actions = max_depth - min_depth + 1
    return Agent(
        init=_random_init,
        act=functools.partial(_random_act, num_actions),
        depths=functools.partial(_random_depths, min_depth, max_depth),
        learn=_idle_learn,
        num_actions=num_actions,
        summarise=learning_summary,
    )
