"""Saved fits: a save never replaces another fit unasked, and a load names a damaged,
mismatched or older file and the fix."""

import json
import pathlib

import numpy as np
import pytest
from conftest import need
from reliability_helpers import (
    path_graph_arrays,
    texas_split_with_boundary,
    toy_fits,
)

import policy_gnn_jax as pg
from policy_gnn_jax.runtime import seed_axis

DEFAULT_MODE = seed_axis.seed_mode_for(None)  # the seed mode a fit runs in unless told


@pytest.fixture(scope="module")
def two_seed_fits():
    """The toy graph and two two-seed fits of it, seeds 0 and 1."""
    return toy_fits(seeds=2)


@pytest.fixture(scope="module")
def one_seed_fits():
    """The toy graph and two one-seed fits of it, seeds 0 and 1."""
    return toy_fits(seeds=1)


@pytest.fixture(scope="module")
def path_graph():
    features, edges, labels, splits = path_graph_arrays()
    return pg.from_arrays(features, edges, labels, **splits, symmetrise=True)


def _loop(tmp_path) -> pathlib.Path:
    (tmp_path / "loopA").symlink_to(tmp_path / "loopB")
    (tmp_path / "loopB").symlink_to(tmp_path / "loopA")
    return tmp_path / "loopA"


def test_fit_save_refuses_to_replace_a_saved_fit(two_seed_fits, tmp_path):
    ds, (first, second) = two_seed_fits
    first.save(tmp_path / "fit")
    with pytest.raises(pg.CheckpointError, match="overwrite=True"):
        second.save(tmp_path / "fit")
    assert pg.load(tmp_path / "fit").record["seed"] == 0
    second.save(tmp_path / "fit", overwrite=True)
    again = pg.load(tmp_path / "fit")
    assert again.record["seed"] == 1
    np.testing.assert_array_equal(again.predict(ds.test_index), second.predict(ds.test_index))


def test_load_refuses_snapshots_copied_from_another_fit(two_seed_fits, tmp_path):
    """Snapshots copied from another fit are refused: accepted, predictions would disagree with the
    recorded accuracy."""
    _, (first, second) = two_seed_fits
    first.save(tmp_path / "a")
    second.save(tmp_path / "b")
    (tmp_path / "a" / "snapshots.npz").write_bytes((tmp_path / "b" / "snapshots.npz").read_bytes())
    with pytest.raises(pg.CheckpointError, match="snapshots.npz"):
        pg.load(tmp_path / "a")


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_load_names_a_damaged_file(two_seed_fits, tmp_path, damage):
    """A damaged file is named, not a zipfile.BadZipFile from deep inside numpy."""
    first = two_seed_fits[1][0]
    first.save(tmp_path / "a")
    path = tmp_path / "a" / "snapshots.npz"
    raw = bytearray(path.read_bytes())
    if damage == "flip":
        raw[len(raw) // 2] ^= 0xFF
    else:
        raw = raw[: len(raw) // 2]
    path.write_bytes(bytes(raw))
    with pytest.raises(pg.CheckpointError, match="snapshots.npz"):
        pg.load(tmp_path / "a")


def test_load_of_a_fit_json_that_is_not_an_object(two_seed_fits, tmp_path):
    two_seed_fits[1][0].save(tmp_path / "a")
    (tmp_path / "a" / "fit.json").write_text("[1, 2]")
    with pytest.raises(pg.CheckpointError, match="fit.json"):
        pg.load(tmp_path / "a")


@pytest.mark.parametrize("files", [{}, [], {"results.json": "0" * 64}])
def test_a_manifest_that_lists_less_is_refused(one_seed_fits, tmp_path, files):
    """A manifest that lists less is refused: "files": {} would make load trust any
    snapshots.npz."""
    one_seed_fits[1][0].save(tmp_path / "f")
    meta = json.loads((tmp_path / "f" / "fit.json").read_text())
    meta["files"] = files
    (tmp_path / "f" / "fit.json").write_text(json.dumps(meta))
    with pytest.raises(pg.CheckpointError, match="fit.json"):
        pg.load(tmp_path / "f")


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m.update(num_leaves="3"),
        lambda m: m.pop("dataset_fingerprint"),
        lambda m: m.update(config=5),
        lambda m: m.update(custom="backbone"),
        lambda m: m["config"].update(q_hidden="32"),
        lambda m: m["config"].pop("input_dropout"),  # not read as its default
    ],
)
def test_a_hand_edited_fit_json_is_named(one_seed_fits, tmp_path, change):
    one_seed_fits[1][0].save(tmp_path / "f")
    meta = json.loads((tmp_path / "f" / "fit.json").read_text())
    change(meta)
    (tmp_path / "f" / "fit.json").write_text(json.dumps(meta))
    with pytest.raises(pg.CheckpointError, match="fit.json") as err:
        pg.load(tmp_path / "f")
    assert "snapshots.npz is damaged" not in str(err.value)


def test_a_manifest_is_required_from_the_format_that_writes_one(one_seed_fits, tmp_path):
    """A fit.json with "files" removed is refused: it would pass as a fit of format 1, which has no
    manifest."""
    one_seed_fits[1][0].save(tmp_path / "f")
    meta = json.loads((tmp_path / "f" / "fit.json").read_text())
    meta.pop("files")
    (tmp_path / "f" / "fit.json").write_text(json.dumps(meta))
    with pytest.raises(pg.CheckpointError, match="fit.json's 'files' is None, not a dict"):
        pg.load(tmp_path / "f")


def test_a_fit_json_of_a_format_written_as_text_names_the_format(one_seed_fits, tmp_path):
    """A format that is not the number this version writes is named as it stands in the file
    ('4', a string), not printed as if it were the right one."""
    one_seed_fits[1][0].save(tmp_path / "f")
    meta = json.loads((tmp_path / "f" / "fit.json").read_text())
    (tmp_path / "f" / "fit.json").write_text(json.dumps({**meta, "format": str(meta["format"])}))
    with pytest.raises(pg.CheckpointError, match=r"by another version \(format '\d+'\)"):
        pg.load(tmp_path / "f")


def test_moving_the_boundary_between_two_parts_of_a_split_changes_the_fingerprint(tmp_path):
    """The ids of train, val and test are hashed with their lengths: back to back without them,
    train 0..99 / val 100..139 and train 0..59 / val 60..139 have one fingerprint, and a saved split
    (and a checkpoint) of the one would be reused for the other."""
    need("texas")
    wide = pg.load_dataset(str(texas_split_with_boundary(tmp_path, "a.npz", 100)), split=0)
    narrow = pg.load_dataset(str(texas_split_with_boundary(tmp_path, "b.npz", 60)), split=0)
    assert wide.fingerprint() != narrow.fingerprint()


@pytest.mark.parametrize("old", [1, 2, 3])
def test_a_fit_of_an_earlier_version_is_refused_in_one_line_naming_it(tmp_path, old):
    """Fits saved by 0.2 and earlier (formats 1 and 2; their run fingerprints do not hold the
    split's part sizes) and format 3 (its record's scores named test_accuracy) are refused, not
    read by a reader kept for them."""
    ds = pg.data.make_csbm(num_nodes=200, num_val=40, num_test=60)
    fitted = pg.fit(ds, pg.Config.tiny(epochs=2), method="gcn", seeds=1, progress=False)
    fitted.save(tmp_path / "f")
    meta = json.loads((tmp_path / "f" / "fit.json").read_text())
    meta["format"] = old
    (tmp_path / "f" / "fit.json").write_text(json.dumps(meta))
    who = r"policy-gnn-jax 0\.2 or earlier" if old < 3 else "another version"
    with pytest.raises(pg.CheckpointError, match=rf"saved by {who} \(format {old}\)") as err:
        pg.load(tmp_path / "f")
    assert "\n" not in str(err.value)


def test_saving_a_fit_into_a_loop_of_links_is_the_librarys_error(tmp_path):
    """Saving into a loop of links is the library's error, not Python's own RuntimeError from
    pathlib."""
    ds = pg.data.make_csbm(num_nodes=200, num_val=40, num_test=60)
    fitted = pg.fit(ds, pg.Config.tiny(epochs=1), method="gcn", seeds=1, progress=False)
    with pytest.raises(pg.CheckpointError, match="loop"):
        fitted.save(_loop(tmp_path))
