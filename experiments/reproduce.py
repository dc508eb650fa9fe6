"""Regenerate the paper's Table 3 (with the audit), the ablations, Figures 1, 3 and 4, and the
planted-depth benchmark.

  python experiments/reproduce.py table    # runs what is missing, writes table3.md / table3.json
  python experiments/reproduce.py ablations --datasets cora citeseer
  python experiments/reproduce.py figures  # fig3_depths.png, fig4_val_curves.png from those runs
  python experiments/reproduce.py fig1 --dataset cora --seeds 100
  python experiments/reproduce.py planted --seeds 5 --episodes 200

Every run is one seed sweep (vmapped; `--seed-mode map`: one seed after another) saved as
<out>/<dataset>/<run>/results.json; a run whose saved config, seed count and seed mode match is
reused, so an interrupted command resumes. Model selection
is by validation only: the "best fixed depth" row picks the depth with the best mean validation
accuracy, never by test accuracy.
"""

import sys

from policy_gnn_jax.contrib.reproduction.command import main

if __name__ == "__main__":
    sys.exit(main())
