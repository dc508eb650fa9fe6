"""Agents: the meta-policy that picks each node's depth, as pure functions.

- `base.py`: the `Agent` interface every agent fills;
- `dqn.py`: the paper's Double DQN and its replay memory, over `qnet.py` (the Q-network and the
  running state normaliser it reads); `build.py` assembles them for a graph (`dqn_agent`);
- `random_policy.py`: the random-policy baseline.
"""

from policy_gnn_jax.agents.base import Agent
from policy_gnn_jax.agents.build import dqn_agent
from policy_gnn_jax.agents.random_policy import random_agent

__all__ = ["Agent", "dqn_agent", "random_agent"]
