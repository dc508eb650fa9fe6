"""Reproduce the paper: Table 3 with the audit, the ablations, Figures 1, 3 and 4, the planted-depth
benchmark and the headroom analysis (`python experiments/reproduce.py --help`; docs/results.md).

The work is library code, `policy_gnn_jax/contrib/reproduction/`; this script is its command.
"""

from policy_gnn_jax.cli import finish, use_every_core
from policy_gnn_jax.contrib.reproduction.command import main

if __name__ == "__main__":
    use_every_core()  # read when JAX starts its backend, which no import above does
    finish(main())
