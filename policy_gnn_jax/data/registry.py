"""Datasets by name: the Planetoid ones and the generators."""

from __future__ import annotations

from policy_gnn_jax.data.dataset import DataError, Dataset
from policy_gnn_jax.data.generators import make_csbm, make_planted_depth
from policy_gnn_jax.data.ogb import OGB_NAMES, load_ogbn_arxiv
from policy_gnn_jax.data.planetoid import PLANETOID_NAMES, load_planetoid

DATASET_NAMES = (*PLANETOID_NAMES, *OGB_NAMES, "csbm", "planted")


def check_name(name: str) -> str:
    """The lower-cased name, or DataError for a name that is not a dataset (a typo is an error,
    never a dataset "skipped" for missing files)."""
    if name.lower() not in DATASET_NAMES:
        raise DataError(f"Unknown dataset {name!r}: choose one of {DATASET_NAMES}.")
    return name.lower()


def load_dataset(name: str, data_dir=None, download: bool = True, **csbm_kwargs) -> Dataset:
    """Loads a Planetoid dataset or ogbn-arxiv, or generates `csbm` / `planted` (keyword
    arguments go to the generator). Raises DataError for an unknown name."""
    name = check_name(name)
    if name == "csbm":
        return make_csbm(**csbm_kwargs)
    if name == "planted":
        return make_planted_depth(**csbm_kwargs)
    if name == "ogbn-arxiv":
        return load_ogbn_arxiv(data_dir=data_dir, download=download)
    return load_planetoid(name, data_dir=data_dir, download=download)
