"""Train Policy-GNN, the random policy, or a fixed-depth GCN over many seeds in one command.

The same as the installed `policy-gnn` command (policy_gnn_jax/cli/):

python experiments/run.py --dataset cora                      # Policy-GNN, paper defaults
python experiments/run.py --dataset cora --method gcn --depth 2 --seeds 10
python experiments/run.py --dataset csbm --method random --episodes 50
"""

import signal
import sys

# A stop while the package and JAX load is held until they have loaded, then ends the command
# with one line: raised inside an import, it could be swallowed by a library's optional import
# (the run then went on as if nothing had happened) or surface as a traceback.
_received = []
_held = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_previous = {s: signal.signal(s, lambda signum, frame: _received.append(signum)) for s in _held}
try:
    from policy_gnn_jax.cli import launch, stopped_status
finally:
    for _s, _handler in _previous.items():
        signal.signal(_s, _handler)
if _received:
    print("error: interrupted while starting; nothing was run.", file=sys.stderr)
    sys.exit(stopped_status(_received[0]))

if __name__ == "__main__":
    sys.exit(launch())
