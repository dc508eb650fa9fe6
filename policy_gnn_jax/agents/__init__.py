"""Agents: the meta-policy that picks each node's depth, as pure functions.

- `base.py`: the `Agent` interface every agent fills, and the random-policy agent;
- `dqn.py`: the paper's Double DQN agent, over `qnet.py` (the Q-network and the running state
  normaliser it reads) and `replay.py` (the replay memory as immutable state).
"""

from policy_gnn_jax.agents.base import Agent, random_agent
from policy_gnn_jax.agents.dqn import dqn_agent

__all__ = ["Agent", "dqn_agent", "random_agent"]
