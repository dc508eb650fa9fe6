"""Folders of `.npy` arrays: `write_csbm` writes one (refusing to replace an earlier write,
leaving nothing behind when cut short), `load_arrays` reads one memory-mapped and names what is
wrong with a folder."""

import subprocess
import sys
import warnings

import numpy as np
import pytest
from conftest import ROOT

from policy_gnn_jax import data

SMALL = dict(num_nodes=2000, num_features=16, seed=3)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    return data.write_csbm(tmp_path_factory.mktemp("csbm") / "graph", **SMALL)


def test_write_csbm_then_load_arrays_gives_a_valid_mapped_dataset(written):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the files are stored as a Dataset keeps them
        ds = data.load_arrays(written)
    data.validate(ds)
    assert (ds.name, ds.source, ds.num_nodes, ds.num_features, ds.num_classes) == (
        "csbm",
        str(written),
        2000,
        16,
        4,
    )
    assert str(ds.features.filename) == str(written / "features.npy")
    assert str(ds.edges.filename) == str(written / "edges.npy")
    assert 2000 * 8 * 0.9 < ds.num_edges <= 2000 * 8  # each draw twice, few repeats
    assert (len(ds.train_index), len(ds.val_index), len(ds.test_index)) == (80, 500, 1000)
    # The model is make_csbm's: most edges join a class to itself, and the features say which.
    s, r = ds.edges
    assert 0.75 < np.mean(ds.labels[s] == ds.labels[r]) < 0.85
    assert data.load_arrays(written, name="other").name == "other"


def test_the_same_arguments_write_the_same_files_whatever_the_chunk(written, tmp_path):
    again = data.write_csbm(tmp_path / "again", **SMALL, rows_per_chunk=7)
    for name in data.on_disk.ARRAY_FILES + ("meta.json",):
        assert (again / name).read_bytes() == (written / name).read_bytes(), name
    assert not list(again.glob(".*"))  # no temporary file is left


def test_a_written_folder_is_not_overwritten_unless_asked(written, tmp_path):
    folder = data.write_csbm(tmp_path / "g", num_nodes=1600, num_features=4)
    before = (folder / "features.npy").read_bytes()
    # One of the data layer's errors (a ValueError, as every refused input), still a
    # FileExistsError for callers that caught that.
    with pytest.raises(data.InvalidDatasetError, match="overwrite=True") as refused:
        data.write_csbm(folder, num_nodes=1600, num_features=4, seed=1)
    assert isinstance(refused.value, FileExistsError)
    with pytest.raises(data.InvalidDatasetError, match="is a file, not a folder"):
        data.write_csbm(folder / "meta.json", num_nodes=1600, num_features=4)
    assert (folder / "features.npy").read_bytes() == before
    data.write_csbm(folder, num_nodes=1600, num_features=4, seed=1, overwrite=True)
    assert (folder / "features.npy").read_bytes() != before
    data.load_arrays(folder)


def _copy(written, folder, skip=()):
    folder.mkdir()
    for path in written.iterdir():
        if path.name not in skip:
            (folder / path.name).write_bytes(path.read_bytes())
    return folder


def test_a_folder_without_meta_json_is_an_unfinished_write(written, tmp_path):
    folder = _copy(written, tmp_path / "cut", skip=("meta.json",))
    with pytest.raises(data.DataError, match="no meta.json, so its write did not finish"):
        data.load_arrays(folder)


def test_a_missing_folder_or_file_is_named(written, tmp_path):
    with pytest.raises(data.DataError, match="is not a folder"):
        data.load_arrays(tmp_path / "nowhere")
    folder = _copy(written, tmp_path / "partial", skip=("val_index.npy",))
    with pytest.raises(data.DataError, match="has no val_index.npy"):
        data.load_arrays(folder)


@pytest.mark.parametrize(
    "name, array, message",
    [
        ("features.npy", np.zeros((2000, 16)), r"features are a memory-mapped float64.*float32"),
        ("edges.npy", np.zeros((3, 5), np.int32), r"edges must have shape \[2, E\], got \(3, 5\)"),
        ("labels.npy", np.zeros(5, np.int32), r"2000 rows but labels has 5 entries"),
        ("test_index.npy", np.zeros((2, 2), np.int32), r"test_index must be a 1-D array"),
    ],
)
def test_arrays_of_the_wrong_shape_are_named(written, tmp_path, name, array, message):
    """`from_arrays` names the array; `load_arrays` adds the folder."""
    folder = _copy(written, tmp_path / "bad", skip=(name,))
    np.save(folder / name, array)
    with pytest.raises(ValueError, match=message):
        data.load_arrays(folder)


# In a fresh process, after its imports: the high-water mark of its resident memory, reset
# there (ru_maxrss cannot be: it keeps the size of the parent this process was forked from).
MEASURE = """
import sys
from policy_gnn_jax import data

def status_kib(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))

with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets VmHWM to the resident size now
before = status_kib("VmRSS")
ds = data.load_arrays(sys.argv[1])
ds.fingerprint()
data.validate(ds)
print(before, status_kib("VmHWM"))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")
def test_loading_checking_and_hashing_a_mapped_graph_stays_within_twice_its_files(tmp_path):
    """The checks and the hash read the mapped files a block at a time: the peak resident
    memory grows by the mapped pages and a few MB, never by copies of the arrays."""
    folder = data.write_csbm(tmp_path / "g", num_nodes=200_000, num_features=64)
    size = sum(p.stat().st_size for p in folder.iterdir())
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, str(folder)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    before, peak = map(int, out.stdout.split()[-2:])
    growth = (peak - before) * 1024
    print(f"files {size / 2**20:.1f} MiB, peak resident growth {growth / 2**20:.1f} MiB")
    assert growth < 2 * size


def test_a_folder_write_to_no_path_or_an_impossible_one_is_one_error(tmp_path, monkeypatch):
    # '' is refused, else the graph would be written into the current folder; '/proc/g' is one
    # error, not a bare OSError.
    monkeypatch.chdir(tmp_path)
    small = dict(num_nodes=600, num_features=4, num_val=100, num_test=200)
    with pytest.raises(data.InvalidDatasetError, match="got ''"):
        data.write_csbm("", **small)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(data.DataError, match="cannot create /proc/g"):
        data.write_csbm("/proc/g", **small)


def test_an_npz_archive_named_npy_is_one_error(tmp_path):
    folder = data.write_csbm(tmp_path / "g", num_nodes=600, num_features=4, num_val=100,
                             num_test=200)  # fmt: skip
    with open(folder / "features.npy", "wb") as f:  # an archive under the array's name
        np.savez(f, x=np.zeros((600, 4), np.float32))
    with pytest.raises(data.DataError, match="is an .npz archive, not one .npy array"):
        data.load_arrays(folder)


def test_a_built_in_name_means_the_built_in_dataset(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data.write_csbm("cora", num_nodes=600, num_features=4, num_val=100, num_test=200)
    assert data.check_name("CORA") == "cora"  # the Planetoid one, not the folder
    assert not data.is_array_folder("cora")  # which load_dataset asks after lower-casing
    assert data.check_name("./cora") == "./cora"
    (tmp_path / "cora" / "meta.json").unlink()
    with pytest.raises(data.DataError, match="has no meta.json"):
        data.check_name("./cora")


def test_a_value_refused_in_a_folder_names_the_folder(tmp_path):
    folder = data.write_csbm(tmp_path / "g", num_nodes=600, num_features=4, num_val=100,
                             num_test=200)  # fmt: skip
    features = np.load(folder / "features.npy", mmap_mode="r+")
    features[3, 1] = np.nan
    features.flush()
    del features
    with pytest.raises(data.InvalidDatasetError, match=r"^in .*g \(its .npy files.*NaN or inf"):
        data.load_arrays(folder)


def test_an_interrupted_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    # An interrupted write removes the features' temporary file (the largest file), which would stay
    # behind, hidden.
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(data.csbm_files, "_edge_keys", interrupted)
    with pytest.raises(KeyboardInterrupt):
        data.write_csbm(tmp_path / "g", num_nodes=600, num_features=4, num_val=100,
                        num_test=200)  # fmt: skip
    assert list(tmp_path.iterdir()) == []  # nor the folder it made


def test_a_second_writer_of_the_same_folder_is_refused(tmp_path):
    """Two writes into one folder at once would mix two graphs' files (one's features, the
    other's edges) under one meta.json: the second is refused while the first writes."""
    import fcntl
    import os

    folder = tmp_path / "g"
    folder.mkdir()
    fd = os.open(folder / data.csbm_files.LOCK_FILE, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a writer in another process holds it
    try:
        with pytest.raises(data.DataError, match="another process is writing"):
            data.write_csbm(folder, num_nodes=2000)
    finally:
        os.close(fd)
    assert not (folder / "meta.json").exists()
    data.write_csbm(folder, num_nodes=2000)  # free again: the write goes ahead
    assert not (folder / data.csbm_files.LOCK_FILE).exists()  # nothing left to clean up
