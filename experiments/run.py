"""Train Policy-GNN, the random policy, or a fixed-depth GCN over many seeds in one command.

The same as the installed `policy-gnn` command (policy_gnn_jax/cli/):

python experiments/run.py --dataset cora                      # Policy-GNN, paper defaults
python experiments/run.py --dataset cora --method gcn --depth 2 --seeds 10
python experiments/run.py --dataset csbm --method random --episodes 50
"""

import sys

from policy_gnn_jax.cli import launch

if __name__ == "__main__":
    sys.exit(launch())
