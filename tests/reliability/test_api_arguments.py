"""The Python API's arguments: a value of the wrong type or range is the library's own error
naming the argument."""

import json
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from reliability_helpers import TWO_EPISODE_CONFIG, path_graph_arrays, toy_fits

import policy_gnn_jax as pg
from policy_gnn_jax import cli
from policy_gnn_jax.data.generators import make_csbm, make_planted_depth


@pytest.fixture(scope="module")
def one_seed_fits():
    """The toy graph and two one-seed fits of it, seeds 0 and 1."""
    return toy_fits(seeds=1)


@pytest.fixture(scope="module")
def csbm():
    return pg.load_dataset("csbm", num_nodes=1600)


def _device_graph(ds):
    from policy_gnn_jax import graph

    return graph.from_dataset(ds)


@pytest.fixture(scope="module")
def path_graph():
    features, edges, labels, splits = path_graph_arrays()
    return pg.from_arrays(features, edges, labels, **splits, symmetrise=True)


def _agent(**changes):
    return pg.random_agent(1, 3)._replace(**changes)


@pytest.fixture(scope="module")
def fitted():
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    return pg.fit(ds, pg.Config.tiny(epochs=2), method="gcn", seeds=1, progress=False)


def test_overwrite_must_be_a_bool(one_seed_fits, tmp_path):
    """overwrite="False" is refused: a non-empty string is true, so it would replace a saved fit."""
    one_seed_fits[1][0].save(tmp_path / "f")
    with pytest.raises(pg.ConfigError, match="overwrite"):
        one_seed_fits[1][1].save(tmp_path / "f", overwrite="False")
    assert pg.load(tmp_path / "f").record["seed"] == 0


def test_load_of_something_not_a_path_is_one_error():
    with pytest.raises(pg.CheckpointError, match="folder"):
        pg.load(5)


def test_numpy_scalars_are_accepted_in_a_config():
    assert pg.Config(hidden=np.int64(32), gamma=np.float32(0.5)).hidden == 32
    assert type(pg.Config(hidden=np.int64(32)).hidden) is int


@pytest.mark.parametrize("value", ["nan", "inf", "0"])
def test_csbm_degree_is_named(value, tmp_path, capsys):
    code = cli.main(["--dataset", "csbm", "--csbm-degree", value, "--out", str(tmp_path / "o")])
    assert code == 2 and "--csbm-degree" in capsys.readouterr().err


def test_predict_of_no_nodes(one_seed_fits):
    ds, (first, _) = one_seed_fits
    assert first.predict([]).shape == (1, 0)


def test_a_csbm_degree_that_is_not_a_number_is_named():
    """A NaN or infinite avg_degree is named at once: NaN passes `avg_degree <= 0` and would fail
    later as "cannot convert float NaN to integer"."""
    from policy_gnn_jax import data

    for degree in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="avg_degree must be a finite number"):
            data.make_csbm(num_nodes=1600, avg_degree=degree)


def test_numpy_integer_seeds_are_taken_as_integers(csbm):
    """np.int64 seeds are taken as integers: kept as numpy's, the record is not JSON, and the run
    would train to the end, fail to write it, and return no Fit."""
    fit = pg.fit(csbm, pg.Config.tiny(epochs=2), method="gcn", seeds=np.int64(1),
                 seed=np.int64(5), progress=False)  # fmt: skip
    assert (fit.record["seed"], fit.record["seeds"]) == (5, 1)
    json.dumps(fit.record)
    with pytest.raises(pg.ConfigError, match="seed must be a whole number"):
        pg.fit(csbm, pg.Config.tiny(epochs=2), method="gcn", seeds=1, seed=True, progress=False)


@pytest.mark.parametrize(
    "name, kwargs, message",
    [
        ("cora", dict(num_nodes=5), "cora takes no num_nodes"),
        ("cora", dict(split=3), "cora takes no split"),
        (None, {}, "must be text or a path"),
    ],
)
def test_load_dataset_refuses_what_it_would_ignore(name, kwargs, message):
    with pytest.raises(pg.DataError, match=message):
        pg.load_dataset(name, **kwargs)


def test_the_decoupled_preset_reads_a_dataset_name_as_the_command_does():
    assert pg.Config.decoupled("Cora ") == pg.Config.decoupled("cora")
    with pytest.raises(pg.ConfigError, match="dataset must be a dataset's name"):
        pg.Config.decoupled(dataset=123)


def test_load_checks_a_custom_part_passed_for_a_built_in_one(csbm, tmp_path):
    fit = pg.fit(csbm, pg.Config.tiny(epochs=2), method="gcn", seeds=1, progress=False)
    fit.save(tmp_path / "f")
    with pytest.raises(pg.ConfigError, match="backbone must be a policy_gnn_jax.Backbone"):
        pg.load(tmp_path / "f", backbone="gcn")
    with pytest.raises(pg.CheckpointError, match="trained with the built-in backbone"):
        pg.load(tmp_path / "f", backbone=pg.gcn_backbone(pg.Config.tiny(), _device_graph(csbm)))


def test_an_agent_of_another_depth_range_is_refused(small_dataset, tmp_path):
    """An agent with 2 actions is refused by fit and load for depths 1..3: its depths would not be
    the config's."""
    config = pg.Config.tiny(num_episodes=2, episodes_per_call=2)
    assert (config.min_depth, config.max_depth) == (1, 3)
    with pytest.raises(pg.ConfigError, match="2 actions.*depths 1..3 need 3"):
        pg.fit(small_dataset, config, method="random", agent=pg.random_agent(1, 2), seeds=1,
               progress=False)  # fmt: skip
    fit = pg.fit(small_dataset, config, method="random", agent=pg.random_agent(1, 3), seeds=1,
                 progress=False)  # fmt: skip
    fit.save(tmp_path / "fit")
    with pytest.raises(pg.ConfigError, match="2 actions"):
        pg.load(tmp_path / "fit", agent=pg.random_agent(1, 2))


@pytest.mark.parametrize(
    "make, kwargs, named",
    [
        (make_csbm, dict(num_nodes=2000.5), "num_nodes"),
        (make_csbm, dict(num_nodes="2000"), "num_nodes"),
        (make_csbm, dict(seed=-1), "seed"),
        (make_csbm, dict(seed=1.5), "seed"),
        (make_csbm, dict(num_features=3.0), "num_features"),
        (make_csbm, dict(num_val=-5), "num_val"),
        (make_csbm, dict(num_train_per_class=-1), "num_train_per_class"),
        (make_csbm, dict(num_classes=True), "num_classes"),
        (make_csbm, dict(feature_signal=float("inf")), "feature_signal"),
        (make_csbm, dict(num_nodes=2**40), "num_nodes"),
        (make_planted_depth, dict(num_classes=1), "num_classes"),
        (make_planted_depth, dict(hub_size=-1), "hub_size"),
        (make_planted_depth, dict(seed=-2), "seed"),
        (make_planted_depth, dict(noise=float("nan")), "noise"),
        (make_planted_depth, dict(num_units=2.5), "num_units"),
        (make_planted_depth, dict(num_units=0), "num_units"),
        (make_planted_depth, dict(num_train=10**6), "num_train"),
    ],
)
def test_a_generators_bad_argument_is_named(make, kwargs, named):
    """A generator's bad argument is named in the library's error, not numpy's own ("expected
    non-negative integer", "low >= high", an IndexError) or a split error that names no argument."""
    with pytest.raises(pg.InvalidDatasetError, match=rf"^{make.__name__.split('_')[1]}.*{named}"):
        make(**kwargs)


def test_symmetrise_must_be_a_bool():
    """symmetrise="False" is refused: the string is truthy, and the graph would be symmetrised."""
    features, edges, labels, splits = path_graph_arrays()
    with pytest.raises(pg.InvalidDatasetError, match="symmetrise must be True or False"):
        pg.from_arrays(features, edges, labels, **splits, symmetrise="False")


@pytest.mark.parametrize(
    "kwargs, named",
    [
        (dict(data_dir="/nonexistent"), "takes no data_dir"),
        (dict(num_train_per_class=0), "num_train_per_class"),
        (dict(num_nodes=1600, avg_degree=1e5), "avg_degree"),  # before: a complete graph
        (dict(num_nodes=1600, avg_degree=1e9), "avg_degree"),  # before: numpy's MemoryError
    ],
)
def test_a_generated_graphs_ignored_or_impossible_argument_is_refused(kwargs, named):
    with pytest.raises((pg.InvalidDatasetError, pg.DataError), match=named):
        pg.load_dataset("csbm", **kwargs)


@pytest.mark.parametrize(
    "agent, message",
    [
        (_agent(num_actions=3.0), "num_actions must be an int"),
        (
            _agent(depths=lambda k, p, g, nodes: jnp.full(nodes.shape, 2.0)),
            r"depths\(\) returned float",
        ),
        (
            _agent(act=lambda k, s, g, nodes, step: (s, (), jnp.zeros(4, jnp.int32))),
            r"act\(\) returned",
        ),
    ],
)
def test_an_agent_of_the_wrong_types_is_refused_before_training(path_graph, agent, message):
    """An agent of the wrong types is refused up front, not met with a TypeError from inside Python
    or JAX after compiling."""
    with pytest.raises(pg.ConfigError, match=message):
        pg.fit(
            path_graph, TWO_EPISODE_CONFIG, method="random", agent=agent, seeds=1, progress=False
        )


@pytest.mark.parametrize(
    "agent, message",
    [
        (_agent(depths=lambda k, p, g, nodes: jnp.full(nodes.shape, 7, jnp.int32)), "returned 7"),
        (_agent(depths=lambda k, p, g, nodes: jnp.full(nodes.shape, -5, jnp.int32)), "returned -5"),
        (
            _agent(act=lambda k, s, g, nodes, step: (s, (), jnp.full(nodes.shape, 9, jnp.int32))),
            r"act\(\) returned actions outside 0..2",
        ),
    ],
)
def test_an_agent_choosing_outside_the_range_is_refused(path_graph, agent, message):
    """An agent choosing outside the range is refused: accepted, it would record depth 7, compute
    the accuracy at a clamped depth, or (an action of 9) use a backbone that never trained."""
    with pytest.raises(pg.ConfigError, match=message):
        pg.fit(
            path_graph, TWO_EPISODE_CONFIG, method="random", agent=agent, seeds=1, progress=False
        )


@pytest.mark.parametrize(
    "name, kwargs, message",
    [
        ("csbm", dict(num_nodes=1600, split=3), "csbm takes no split"),  # before: a TypeError
        ("planted", dict(num_nodes=500), "planted takes no num_nodes"),  # before: a TypeError
        ("cora", dict(download="no"), "download must be True or False"),  # before: truthy
    ],
)
def test_load_datasets_arguments_are_named(name, kwargs, message):
    with pytest.raises(pg.DataError, match=message):
        pg.load_dataset(name, **kwargs)


def test_a_subpackage_is_an_attribute_before_anything_else_is_used():
    """`pg.data` is an attribute as soon as the package is imported, not an AttributeError until
    another name happens to load it."""
    code = "import policy_gnn_jax as pg; pg.data.write_csbm; pg.metrics; print(pg.config.Config)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and "Config" in done.stdout, done.stderr[-500:]
    bad = "import policy_gnn_jax as pg; pg.nothing_here"
    done = subprocess.run([sys.executable, "-c", bad], capture_output=True, text=True)
    assert "has no attribute 'nothing_here'" in done.stderr


@pytest.mark.parametrize(
    "nodes, message",
    [
        ([-1], "nodes holds node id -1, outside 0..299"),
        ([1.0], "nodes must be a 1-D array of node ids, got float64"),
        (3, "nodes must be a 1-D array of node ids"),
        ([2**70], "nodes must be a 1-D array of node ids, got object"),
        (np.ma.array([1, 2], mask=[0, 1]), "nodes is a masked array"),
    ],
)
def test_bad_node_ids_to_predict_are_the_librarys_error_with_a_fix(fitted, nodes, message):
    """Bad node ids to predict are InvalidDatasetError with a fix, not a plain ValueError without
    one; a masked array is refused, as its masked-out nodes would be predicted too."""
    with pytest.raises(pg.InvalidDatasetError, match=message) as refused:
        fitted.predict(nodes)
    assert "Pass" in str(refused.value)


@pytest.mark.parametrize("bad", [b"/tmp", 123])
def test_a_path_of_the_wrong_type_is_the_librarys_error(tmp_path, bad):
    """A path of the wrong type (bytes, an int) is the library's error, not pathlib's own TypeError
    from deep inside."""
    ds = pg.data.make_csbm(num_nodes=300, num_val=50, num_test=100)
    with pytest.raises(pg.DataError, match="data_dir must be a folder's path"):
        pg.load_dataset("texas", data_dir=bad)
    with pytest.raises(pg.DataError, match="must be a folder's path"):
        pg.data.load_arrays(bad)
    with pytest.raises(pg.CheckpointError, match="checkpoint folder must be a path"):
        pg.fit(ds, pg.Config.tiny(epochs=2), method="gcn", seeds=1, checkpoint_dir=bad)


@pytest.mark.parametrize("value", [[16, 16], "16,16"])
def test_a_config_field_of_the_wrong_type_is_refused_in_pythons_words(value):
    """`Config(q_hidden=[16, 16])` is told Python's form (a tuple of whole numbers), not to pass
    "whole numbers separated by commas", the command line's form."""
    with pytest.raises(pg.ConfigError, match=r"q_hidden must be a tuple of whole numbers, e\.g\. "):
        pg.Config.tiny(q_hidden=value)
