"""policy_gnn_jax: Policy-GNN (Lai et al., KDD 2020) as pure, jitted, vmapped JAX.

Modules (imports flow downwards): config, data -> graph -> gcn, qnet, replay, normaliser,
action_buffers -> env, dqn -> train, baseline -> runner -> experiment.
"""

from policy_gnn_jax import (  # noqa: F401
    action_buffers,
    baseline,
    config,
    data,
    dqn,
    env,
    experiment,
    gcn,
    graph,
    normaliser,
    qnet,
    replay,
    runner,
    train,
)
