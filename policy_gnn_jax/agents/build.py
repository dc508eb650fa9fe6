"""The built-in agents assembled for a config and a graph: `dqn_agent`, the paper's Double DQN
(`dqn.py`), with each part's formulation chosen for the graph's features."""

from __future__ import annotations

import functools

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.agents import base as agent_lib
from policy_gnn_jax.agents import dqn, qnet


def default_formulation(config: config_lib.Config, g: graph_lib.Graph) -> tuple[bool, bool]:
    """(sparse_states, sparse_statistics): the cheaper formulation for this graph's features.

    The Q-network's first layer from the rows' non-zeros when the graph built them (rows sparse
    enough, `graph.sparse_rows_pay`); the normaliser from the non-zeros when they are fewer than
    the window's entries. Both dense on the deterministic "gather" kernels: both sparse paths
    scatter-add floats (a gather's backward, a segment sum), which is not order-fixed on a GPU.
    """
    if g.deterministic:
        return False, False
    sparse_states = g.feat_ell_idx.shape[1] > 0
    sparse_statistics = g.feat_vals.shape[0] < config.normaliser_window * g.num_features
    return sparse_states, sparse_statistics


def dqn_agent(
    config: config_lib.Config,
    g: graph_lib.Graph,
    sparse_states: bool | None = None,
    sparse_statistics: bool | None = None,
) -> agent_lib.Agent:
    """The paper's meta-policy: a Double DQN over node features (states are feature rows).

    Each part's formulation is `default_formulation`'s unless given (only rounding differs).
    """
    default_states, default_statistics = default_formulation(config, g)
    sparse_states = default_states if sparse_states is None else sparse_states
    sparse_statistics = default_statistics if sparse_statistics is None else sparse_statistics
    if sparse_states and g.feat_ell_idx.shape[1] == 0:
        raise config_lib.ConfigError(
            "sparse_states needs the rows' non-zeros, which this graph did not build (its rows "
            "are too dense for them to pay): leave sparse_states to the default."
        )
    walkers = config.num_walkers or g.train_index.shape[0]
    if walkers > config.replay_capacity:  # refused before anything compiles
        raise config_lib.ConfigError(
            f"each MDP step adds {walkers} transitions (one per walker: Config.num_walkers, by "
            f"default one per training node) but the replay memory holds "
            f"Config.replay_capacity={config.replay_capacity}: raise Config.replay_capacity to "
            f"at least {walkers} (--set replay_capacity={walkers}), or lower Config.num_walkers."
        )
    model = qnet.QNetwork(config.q_hidden, config.num_actions)
    ctx = dqn.DQNContext(model, config, bool(sparse_states), bool(sparse_statistics))
    return agent_lib.Agent(
        init=functools.partial(dqn.agent_init, ctx),
        act=functools.partial(dqn.agent_act, ctx),
        depths=functools.partial(dqn.agent_depths, ctx),
        learn=functools.partial(dqn.agent_learn, ctx),
        num_actions=config.num_actions,
        summarise=dqn.learning_summary,
    )
