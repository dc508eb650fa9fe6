"""The random-policy baseline (docs/algorithm.md section 7): uniformly random depths in training
and at evaluation. Its training draws are those of the DQN's epsilon-greedy choice at epsilon 1,
and it reports the DQN's learning metrics of an agent that does not learn, so its runs equal the
DQN loop held at epsilon 1 without training a Q-network it ignores.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from policy_gnn_jax.agents.base import Agent
from policy_gnn_jax.agents.dqn import learning_summary


def _random_init(key, g):
    del key, g
    return (), ()


def _random_act(num_actions: int, key, state, g, nodes, step):
    del g, step
    # The same draws as dqn.epsilon_greedy at epsilon 1: a key for exploring, then the action.
    _, k_random = jax.random.split(key)
    return state, (), jax.random.randint(k_random, nodes.shape, 0, num_actions)


def _random_depths(min_depth: int, max_depth: int, key, policy, g, nodes):
    del policy, g
    return jax.random.randint(key, nodes.shape, min_depth, max_depth + 1)


def _idle_learn(key, state, policy, g, transition, step):
    del key, policy, g, transition, step
    # The DQN's learn metrics (`learning_summary` reads them) of an agent that does not learn.
    return state, {
        "td_loss": jnp.zeros((), jnp.float32),
        "dqn_updates": jnp.zeros((), jnp.int32),
        "epsilon": jnp.ones((), jnp.float32),
        "agent_finite": jnp.ones((), bool),
    }


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
