"""`python -m policy_gnn_jax.cli`: the policy-gnn command."""

import sys

try:  # importing JAX takes a second or two: a Ctrl-C then is one line too, not a traceback
    from policy_gnn_jax.cli import entry
except KeyboardInterrupt:
    print("error: interrupted while starting; nothing was run.", file=sys.stderr)
    sys.exit(130)

sys.exit(entry())
