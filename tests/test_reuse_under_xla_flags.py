"""A saved run is reused only under the XLA flags it was made with. Flags change the compiled
kernels and so the bits: on a CPU `--xla_backend_optimization_level=0` moves validation
accuracies of the heterophily study's fixed depths, and a study that reused runs made under
other flags mixed two programs' numbers in one table that its command could not reproduce."""

import os

import numpy as np
import pytest

import policy_gnn_jax as pg
from policy_gnn_jax import methods
from policy_gnn_jax.contrib.adaptive_depth import fixed_runs, heterophily_table
from policy_gnn_jax.runtime import reuse

OTHER_FLAGS = "--xla_cpu_enable_fast_math=false"  # parsed by XLA: a flag a user could set


def test_a_saved_fit_made_under_other_xla_flags_is_refused_unless_overwrite(
    tmp_path, small_dataset, monkeypatch
):
    cfg = pg.Config.tiny()
    pg.fit(small_dataset, cfg, method="gcn", seeds=1, progress=False).save(tmp_path / "f")
    prepared = methods.get("gcn").prepare(cfg)
    args = (tmp_path / "f", small_dataset, prepared, "gcn", 1, 0, None)
    assert reuse.reusable_record(*args, False) is not None  # the flags it was made under
    for flags in (OTHER_FLAGS, None):
        if flags is None:
            monkeypatch.delenv("XLA_FLAGS", raising=False)
        else:
            monkeypatch.setenv("XLA_FLAGS", flags)
        with pytest.raises(pg.CheckpointError, match="XLA_FLAGS") as err:
            reuse.reusable_record(*args, False)
        assert "--overwrite" in str(err.value) and "Traceback" not in str(err.value)
        assert reuse.reusable_record(*args, True) is None  # --overwrite: trained again


def test_cached_fixed_depths_made_under_other_xla_flags_are_refused(tmp_path, small_dataset,
                                                                   monkeypatch):  # fmt: skip
    cfg = pg.Config.decoupled(min_depth=0, max_depth=1, epochs=3)
    folders = {0: tmp_path / "split-0"}
    made = fixed_runs.fixed_depths_of_splits({0: small_dataset}, cfg, 1, folders)
    again = fixed_runs.fixed_depths_of_splits({0: small_dataset}, cfg, 1, folders)
    np.testing.assert_array_equal(made[0]["val"], again[0]["val"])  # reused
    monkeypatch.setenv("XLA_FLAGS", OTHER_FLAGS)
    with pytest.raises(pg.CheckpointError, match="XLA_FLAGS"):  # refused, not reused
        fixed_runs.fixed_depths_of_splits({0: small_dataset}, cfg, 1, folders)


def test_a_skipped_policys_row_made_under_other_xla_flags_is_not_kept():
    row = {"test": {"mean": 0.5, "std": 0.0, "per_split": [0.5]}}
    settings = {"backbone_options": "ego", "metric": "accuracy", "seeds": 1, "max_depth": 1,
                "episodes": 2, "backend": "cpu"}  # fmt: skip
    old = {**settings, "xla_flags": OTHER_FLAGS, "rows": {"fixed": row, "random": row}}
    new = {**settings, "xla_flags": os.environ.get("XLA_FLAGS"), "rows": {"fixed": row}}
    said = []
    kept = heterophily_table.keep_skipped_rows(old, new, ["random"], ("random",), "texas", "r",
                                               said)  # fmt: skip
    assert "random" not in kept["rows"]
    assert f"xla_flags {OTHER_FLAGS}" in said[0] and "not kept" in said[0]
    old["xla_flags"] = new["xla_flags"]
    same = heterophily_table.keep_skipped_rows(old, new, ["random"], ("random",), "texas", "r",
                                               [])  # fmt: skip
    assert "random" in same["rows"]


def test_flags_that_differ_only_in_spaces_or_are_empty_are_the_same(tmp_path, small_dataset,
                                                                   monkeypatch):  # fmt: skip
    """An empty XLA_FLAGS is no flags, and spaces between flags change nothing: neither is a
    reason to refuse a saved run."""
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    cfg = pg.Config.tiny()
    pg.fit(small_dataset, cfg, method="gcn", seeds=1, progress=False).save(tmp_path / "f")
    prepared = methods.get("gcn").prepare(cfg)
    args = (tmp_path / "f", small_dataset, prepared, "gcn", 1, 0, None)
    for flags in ("", "  "):
        monkeypatch.setenv("XLA_FLAGS", flags)
        assert reuse.reusable_record(*args, False) is not None
    monkeypatch.setenv("XLA_FLAGS", f"  {OTHER_FLAGS} ")
    pg.fit(small_dataset, cfg, method="gcn", seeds=1, progress=False).save(tmp_path / "g")
    monkeypatch.setenv("XLA_FLAGS", OTHER_FLAGS)
    assert reuse.reusable_record(tmp_path / "g", *args[1:], False) is not None


def test_a_saved_fit_that_does_not_record_its_flags_is_not_taken_as_made_without(
    tmp_path, small_dataset, monkeypatch
):
    """A record without `versions.xla_flags` is not taken as made without flags: it would be reused
    unasked, and refused under flags as "made under XLA_FLAGS=None"."""
    import hashlib
    import json

    monkeypatch.delenv("XLA_FLAGS", raising=False)
    cfg = pg.Config.tiny()
    pg.fit(small_dataset, cfg, method="gcn", seeds=1, progress=False).save(tmp_path / "f")
    results = tmp_path / "f" / "results.json"
    record = json.loads(results.read_text())
    del record["versions"]["xla_flags"]  # as a run saved before the flags were recorded
    results.write_text(json.dumps(record))
    manifest = json.loads((tmp_path / "f" / "fit.json").read_text())
    manifest["files"]["results.json"] = hashlib.sha256(results.read_bytes()).hexdigest()
    (tmp_path / "f" / "fit.json").write_text(json.dumps(manifest))
    prepared = methods.get("gcn").prepare(cfg)
    args = (tmp_path / "f", small_dataset, prepared, "gcn", 1, 0, None)
    with pytest.raises(pg.CheckpointError, match="does not record its XLA_FLAGS"):
        reuse.reusable_record(*args, False)
    assert reuse.reusable_record(*args, True) is None


def test_cached_fixed_depths_that_do_not_record_their_flags_are_refused(tmp_path, small_dataset,
                                                                       monkeypatch):  # fmt: skip
    """A cache whose tag does not record the flags is refused: its tag is that of one made without
    flags, so one made under flags would be reused in a process without any."""
    import json

    monkeypatch.delenv("XLA_FLAGS", raising=False)
    cfg = pg.Config.decoupled(min_depth=0, max_depth=1, epochs=3)
    folders = {0: tmp_path / "split-0"}
    fixed_runs.fixed_depths_of_splits({0: small_dataset}, cfg, 1, folders)
    path = fixed_runs.cache_path(folders[0], cfg, 1)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    tag = json.loads(str(arrays["tag"]))
    arrays["tag"] = np.array(json.dumps(tag[:3], sort_keys=True))  # the tag caches had before
    np.savez_compressed(path, **arrays)
    with pytest.raises(pg.CheckpointError, match="XLA_FLAGS"):
        fixed_runs.fixed_depths_of_splits({0: small_dataset}, cfg, 1, folders)
