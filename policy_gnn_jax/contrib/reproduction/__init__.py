"""Reproducing the paper (docs/results.md): `experiments/reproduce.py` is this package's command.

- `runs.py`: the run cache (a sweep is reused when its saved config, seeds and mode match);
- `tables.py`: Table 3 with the audit, and the ablations;
- `figures.py`: Figures 1, 3 and 4;
- `analyses.py`: the headroom analysis and the planted-depth benchmark;
- `command.py`: the command line that runs them.
"""
