"""The runtime: runs any `Trainer` over seeds, and keeps what it produces safe.

- `trainer.py`: the `Trainer` interface (init, train_chunk, evaluate, selected) every method fills;
- `runner.py`: a run in exact chunks, with the memory check (`memory.py`), the divergence
  check and checkpoints, its seeds vmapped, mapped or sharded (`seed_axis.py`);
- `checkpoint.py`: checkpoints (one `.npz` and one JSON file per step), keyed by what identifies
  the run (`fingerprint.py`);
- `outputs.py`: atomic files and result folders; `locks.py`: one writer per folder or file;
- `saved_fit.py`: a saved fit's files; `records.py`: the results record and its summary;
- `cluster.py`: joining other processes; `processes.py`: a run's seeds over them.

Nothing here knows a backbone, an agent or the MDP: they reach it only through `Trainer`.
"""
