"""`python -m policy_gnn_jax.cli`: the policy-gnn command."""

import sys

from policy_gnn_jax.cli import launch

sys.exit(launch())
