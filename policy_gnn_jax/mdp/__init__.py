"""The MDP: the backbone's training is the environment, the agent picks each node's depth.

- `loop.py`: one MDP step (`mdp_step`: act -> env.step -> learn -> keep the best snapshot) and
  the one-scan loop over a static context, the graph passed as data;
- `env.py`: the environment (walkers, the per-depth action buffers the backbone trains on,
  reward, transitions) and the full engine;
- `subgraph_engine.py`: the subgraph and host engines behind `env.Engine`;
- `policy_gnn.py`: the loop wired for a config (contexts, initial state, final evaluation:
  `make_trainer`) and its record;
- `audit.py`: the released code's test metric, an optional observer that feeds nothing back.
"""
