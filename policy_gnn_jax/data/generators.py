"""Generated graphs (numpy only): a contextual SBM, and a graph with a planted best depth
per node."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from policy_gnn_jax.data.checks import InvalidDatasetError
from policy_gnn_jax.data.dataset import Dataset
from policy_gnn_jax.data.edge_input import symmetric_edges

# The fewest nodes `make_csbm`'s default splits fit in (20 x 4 train, 500 val, 1000 test).
CSBM_MIN_NODES = 20 * 4 + 500 + 1000


def make_csbm(
    num_nodes: int = 2000,
    num_classes: int = 4,
    num_features: int = 32,
    homophily: float = 0.8,
    avg_degree: float = 5.0,
    feature_signal: float = 1.0,
    seed: int = 0,
    num_train_per_class: int = 20,
    num_val: int = 500,
    num_test: int = 1000,
) -> Dataset:
    """A contextual stochastic block model: class-dependent Gaussian features + a planted partition.

    Each node draws about `avg_degree / 2` edges; each edge goes to a node of the same class with
    probability `homophily`, else to a node of another class. Features are `feature_signal * mu_y
    + N(0, I)` with random unit class means `mu_c`. Splits follow Planetoid: `num_train_per_class`
    per class for training (the lowest ids of each class), then `num_val`, then `num_test` ids of
    a random permutation.

    Args:
      num_nodes, num_classes, num_features: sizes.
      homophily: fraction of edges inside a class, in [0, 1].
      avg_degree: mean number of directed edges per node (before de-duplication).
      feature_signal: norm of the class-mean shift; 0 makes features uninformative.
      seed: numpy seed; the same seed gives the same graph.
      num_train_per_class, num_val, num_test: split sizes.

    Returns:
      The Dataset (features are not row-normalised: they are Gaussian).
    """
    _check_csbm_args(
        num_nodes,
        num_classes,
        num_features,
        homophily,
        avg_degree,
        num_train_per_class,
        num_val,
        num_test,
        seed,
        feature_signal,
    )
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, num_nodes).astype(np.int32)
    means = rng.normal(size=(num_classes, num_features))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    features = feature_signal * means[labels] + rng.normal(size=(num_nodes, num_features))
    edges = _csbm_edges(rng, labels, num_classes, homophily, avg_degree)
    train, val, test = _planetoid_style_split(
        rng, labels, num_classes, num_train_per_class, num_val, num_test
    )
    return Dataset(
        name="csbm",
        features=sp.csr_matrix(features.astype(np.float32)),
        labels=labels,
        edges=edges,
        train_index=train,
        val_index=val,
        test_index=test,
        num_classes=num_classes,
    )


def _check_csbm_args(
    num_nodes,
    num_classes,
    num_features,
    homophily,
    avg_degree,
    num_train_per_class,
    num_val,
    num_test,
    seed,
    feature_signal,
) -> None:
    _check_whole(
        "csbm",
        num_nodes=(num_nodes, 1),
        num_classes=(num_classes, 2),
        num_features=(num_features, 1),
        num_train_per_class=(num_train_per_class, 1),
        num_val=(num_val, 1),
        num_test=(num_test, 1),
    )
    _check_seed("csbm", seed)
    _check_real("csbm", "homophily", homophily, 0.0, 1.0)
    # Above N - 1 the graph is complete whatever the value, and the record would not say so.
    _check_real("csbm", "avg_degree", avg_degree, 0.0, max(num_nodes - 1, 1), open_low=True)
    _check_real("csbm", "feature_signal", feature_signal, -math.inf, math.inf)
    needed = num_train_per_class * num_classes + num_val + num_test
    if needed > num_nodes:
        raise InvalidDatasetError(
            f"csbm splits need {needed} nodes ({num_train_per_class} x {num_classes} train + "
            f"{num_val} val + {num_test} test) but num_nodes is {num_nodes}: raise num_nodes or "
            f"shrink the splits."
        )


# Node ids are int32 on the device.
MAX_NODES = 2**31 - 1


def _check_whole(generator: str, **values: tuple) -> None:
    """Each `name=(value, lowest)` must be an int (not a bool) in lowest..MAX_NODES."""
    for name, (value, lowest) in values.items():
        whole = isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)
        if not whole or not lowest <= value <= MAX_NODES:
            raise InvalidDatasetError(
                f"{generator}: {name} must be a whole number in {lowest}..{MAX_NODES}, "
                f"got {value!r}."
            )


def _check_seed(generator: str, seed) -> None:
    whole = isinstance(seed, int | np.integer) and not isinstance(seed, bool | np.bool_)
    if not whole or not 0 <= seed <= 2**32 - 1:
        raise InvalidDatasetError(
            f"{generator}: seed must be a whole number in 0..{2**32 - 1}, got {seed!r}."
        )


def _check_real(generator, name, value, low, high, open_low=False) -> None:
    """A finite real number in [low, high] ((low, high] with `open_low`); NaN fails both."""
    real = isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )
    inside = real and math.isfinite(value) and (value > low if open_low else value >= low)
    if not (inside and value <= high):
        if math.isinf(low):
            where = ""
        elif math.isinf(high):
            where = f" {'>' if open_low else '>='} {low:g}"
        else:
            where = f" in {'(' if open_low else '['}{low:g}, {high:g}]"
        raise InvalidDatasetError(
            f"{generator}: {name} must be a finite number{where}, got {value!r}."
        )


def _csbm_edges(rng, labels, num_classes, homophily, avg_degree) -> np.ndarray:
    num_nodes = len(labels)
    num_draws = max(1, int(round(num_nodes * avg_degree / 2)))
    senders = rng.integers(0, num_nodes, num_draws)
    by_class = [np.flatnonzero(labels == c) for c in range(num_classes)]
    same = rng.random(num_draws) < homophily
    shift = rng.integers(1, num_classes, num_draws)  # another class, uniformly
    target_class = np.where(same, labels[senders], (labels[senders] + shift) % num_classes)
    receivers = np.empty(num_draws, dtype=np.int64)
    for c, members in enumerate(by_class):
        pick = target_class == c
        if len(members) == 0:
            receivers[pick] = senders[pick]  # becomes a self-loop, dropped below
        else:
            receivers[pick] = members[rng.integers(0, len(members), pick.sum())]
    return symmetric_edges(senders, receivers, num_nodes)


def _planetoid_style_split(rng, labels, num_classes, per_class, num_val, num_test):
    train = np.concatenate([np.flatnonzero(labels == c)[:per_class] for c in range(num_classes)])
    rest = rng.permutation(np.setdiff1d(np.arange(len(labels)), train))
    val, test = rest[:num_val], rest[num_val : num_val + num_test]
    return (
        np.sort(train).astype(np.int32),
        np.sort(val).astype(np.int32),
        np.sort(test).astype(np.int32),
    )


def make_planted_depth(
    num_units: int = 600,
    num_classes: int = 3,
    hub_size: int = 8,
    signal: float = 2.0,
    hub_signal: float = 20.0,
    noise: float = 0.5,
    seed: int = 0,
    num_train: int = 120,
    num_val: int = 200,
) -> Dataset:
    """A graph where the best depth of every target node is known by construction.

    Each unit is a path `v - u1 - u2` with `hub_size` strong-signal hub leaves. Only the `v`
    nodes are targets (train/val/test); the others are in no split.
    - A *shallow* unit: `v` carries its class signal; the hub hangs off `u1` (two hops from v)
      and carries ANOTHER class's signal. Depth 1 sees v's own signal; from depth 2 the hub's
      wrong signal floods in. Best depth: 1.
    - A *deep* unit: `v`, u1, u2 carry no signal; the hub hangs off `u2` (three hops) and
      carries v's class. Depths 1-2 see nothing; from depth 3 the right signal arrives. Best
      depths: 3 and more.
    Feature 0 marks deep targets, so a policy that reads features can tell the two apart. A fixed
    depth gets about half the targets right plus chance on the rest; the right per-node depth
    gets nearly all of them.

    Returns:
      The Dataset; `planted_deep_nodes(ds)` tells which targets are deep.
    """
    _check_planted_args(
        num_units, num_classes, hub_size, signal, hub_signal, noise, seed, num_train, num_val
    )
    rng = np.random.default_rng(seed)
    num_features = num_classes + 1
    unit_nodes = 3 + hub_size  # v, u1, u2, hub leaves
    n = num_units * unit_nodes
    labels = np.zeros(n, np.int32)
    features = rng.normal(0.0, noise, (n, num_features))
    features[:, 0] = 0.0
    senders, receivers = [], []
    shallow = rng.random(num_units) < 0.5
    target_class = rng.integers(0, num_classes, num_units)
    for i in range(num_units):
        v, u1, u2 = (i * unit_nodes + k for k in range(3))
        leaves = np.arange(u2 + 1, (i + 1) * unit_nodes)
        y = target_class[i]
        hub_class = (y + rng.integers(1, num_classes)) % num_classes if shallow[i] else y
        labels[[v, u1, u2]] = y
        labels[leaves] = hub_class
        if shallow[i]:
            features[v, 1 + y] += signal
        else:
            features[v, 0] = 1.0
        features[leaves, 1 + hub_class] += hub_signal
        # Shallow: wrong-class hub two hops from v; deep: right-class hub three hops from v.
        centre = u1 if shallow[i] else u2
        senders += [v, u1, *([centre] * hub_size)]
        receivers += [u1, u2, *leaves]
    edges = symmetric_edges(np.array(senders), np.array(receivers), n)
    targets = np.arange(num_units) * unit_nodes
    order = rng.permutation(num_units)
    train = np.sort(targets[order[:num_train]])
    val = np.sort(targets[order[num_train : num_train + num_val]])
    test = np.sort(targets[order[num_train + num_val :]])
    return Dataset(
        name="planted",
        features=sp.csr_matrix(features.astype(np.float32)),
        labels=labels,
        edges=edges,
        train_index=train.astype(np.int32),
        val_index=val.astype(np.int32),
        test_index=test.astype(np.int32),
        num_classes=num_classes,
    )


def _check_planted_args(
    num_units, num_classes, hub_size, signal, hub_signal, noise, seed, num_train, num_val
) -> None:
    _check_whole(
        "planted",
        num_units=(num_units, 1),
        num_classes=(num_classes, 2),
        hub_size=(hub_size, 0),
        num_train=(num_train, 1),
        num_val=(num_val, 1),
    )
    _check_seed("planted", seed)
    for name, value in (("signal", signal), ("hub_signal", hub_signal)):
        _check_real("planted", name, value, -math.inf, math.inf)
    _check_real("planted", "noise", noise, 0.0, math.inf)
    if num_units * (3 + hub_size) > MAX_NODES:
        raise InvalidDatasetError(
            f"planted: {num_units} units of {3 + hub_size} nodes exceed {MAX_NODES} nodes."
        )
    if num_train + num_val >= num_units:
        raise InvalidDatasetError(
            f"planted: num_train {num_train} + num_val {num_val} leave no test unit of "
            f"num_units {num_units}: raise num_units or shrink the splits."
        )


def planted_deep_nodes(ds: Dataset) -> np.ndarray:
    """[N] bool: the deep targets of `make_planted_depth` (feature 0 marks them)."""
    return ds.features[:, 0].toarray().ravel() == 1.0


def planted_agreement(ds: Dataset, test_depths: np.ndarray) -> np.ndarray:
    """Share of test targets given a planted-best depth (shallow: 1, deep: >= 3).
    test_depths: [..., T] depths of `ds.test_index`; returns [...]."""
    deep = planted_deep_nodes(ds)[ds.test_index]
    return np.mean(np.where(deep, test_depths >= 3, test_depths == 1), axis=-1)
