"""The adaptive-depth study (docs/adaptive-depth.md): where per-node depth could pay, and why not.

- `fixed_runs.py`: every fixed depth trained on each split (cached), which the rest starts from;
- `headroom.py`: upper bounds that read test labels (labelled as such), label-free depth rules
  and a probe on label-free signals (`signals.py`: the signals);
- `bandit.py`: a full-feedback contextual bandit over depths (pure functions);
- `plus.py`: Policy-GNN+, the bandit on per-node rewards over cross-fitted validation halves;
  `plus_config.py`: its switches (`PlusConfig`); `plus_method.py`: registers it as the method
  `policy-gnn-plus`.
"""
