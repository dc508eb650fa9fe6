"""The agent interface: the meta-policy that picks each node's depth, as pure functions.

The MDP loop (`mdp/loop.py`) reads as `act -> depths -> env.step -> learn -> keep_best` and only
calls these functions, so a new RL algorithm is one new module returning an `Agent`; the loop does
not change. `build.dqn_agent` is the paper's Double DQN; `random_policy.random_agent` is the
random-policy baseline.

Actions are indices 0..A-1 (depth = action + min_depth); `depths` returns depths.
A *policy* is the frozen pytree that decides depths (for the DQN: Q-network parameters and the
state normaliser's statistics). The loop keeps the policy of the best validation step in its
snapshot and evaluates test nodes with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

AgentState = Any  # a pytree
Policy = Any  # a pytree


class Transition(NamedTuple):
    """What `learn` is given, a batch [W]: node ids of s and s', action index, shared reward."""

    node_tm1: jax.Array
    a_tm1: jax.Array
    r_t: jax.Array
    node_t: jax.Array


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
        arrays of the agent's choosing (scalars or small vectors); a boolean `agent_finite`
        lets a divergence be blamed on the agent.
      num_actions: A.
      summarise: an episode's `learn` metrics [T] -> one value each (default: the mean).
    """

    init: Callable[[jax.Array, Any], tuple[AgentState, Policy]]
    act: Callable[..., tuple[AgentState, Policy, jax.Array]]
    depths: Callable[[jax.Array, Policy, Any, jax.Array], jax.Array]
    learn: Callable[..., tuple[AgentState, dict]]
    num_actions: int
    summarise: Callable[[dict], dict] = mean_over_steps
