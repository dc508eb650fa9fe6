"""`python -m policy_gnn_jax.cli`: the policy-gnn command."""

import sys

try:  # a Ctrl-C in the first milliseconds, before `launch` holds it, is one line too
    from policy_gnn_jax.cli import launch
except KeyboardInterrupt:
    print("error: interrupted while starting; nothing was run.", file=sys.stderr)
    sys.exit(130)

sys.exit(launch())
