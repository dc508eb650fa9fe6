"""The MDP: the backbone's training is the environment, the agent picks each node's depth.

- `loop.py`: one MDP step (`mdp_step`: act -> env.step -> learn -> keep the best snapshot) and
  the one-scan loop over a static context; `make_trainer` assembles it for the runtime;
- `env.py`: the environment (walkers, action buffers, backbone training, reward, transitions);
- `action_buffers.py`: the per-depth buffers of nodes waiting to train the backbone;
- `audit.py`: the released code's test metric, an optional observer that feeds nothing back.
"""
