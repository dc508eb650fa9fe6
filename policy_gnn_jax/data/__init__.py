"""Host-side datasets (numpy only): the `Dataset` type and its checks, Planetoid, ogbn-arxiv,
the heterophilous benchmarks, generators.

Everything here runs before any JAX code; `graph.from_dataset` moves a Dataset to the device.
"""

from policy_gnn_jax.data.arrays import from_arrays, from_jraph
from policy_gnn_jax.data.checks import InvalidDatasetError, validate
from policy_gnn_jax.data.csbm_files import write_csbm
from policy_gnn_jax.data.dataset import DataError, Dataset, MissingDataError
from policy_gnn_jax.data.dense import (
    feature_nonzeros,
    features_array,
    is_dense_features,
    largest_feature,
    row_normalise,
)
from policy_gnn_jax.data.edge_input import symmetric_edges
from policy_gnn_jax.data.generators import (
    make_csbm,
    make_planted_depth,
    planted_agreement,
    planted_deep_nodes,
)
from policy_gnn_jax.data.heterophily import HETEROPHILY_NAMES, load_heterophily
from policy_gnn_jax.data.ogb import OGB_NAMES, load_ogbn_arxiv
from policy_gnn_jax.data.on_disk import load_arrays
from policy_gnn_jax.data.planetoid import (
    DATA_ENV,
    OFFLINE_ENV,
    PLANETOID_NAMES,
    PLANETOID_SHA256,
    PLANETOID_URL,
    RAW_SUFFIXES,
    default_cache_dir,
    load_planetoid,
    resolve_raw_file,
    sha256_of,
)
from policy_gnn_jax.data.registry import DATASET_NAMES, check_name, is_array_folder, load_dataset

__all__ = [
    "DATASET_NAMES",
    "DATA_ENV",
    "HETEROPHILY_NAMES",
    "OGB_NAMES",
    "OFFLINE_ENV",
    "PLANETOID_NAMES",
    "PLANETOID_SHA256",
    "PLANETOID_URL",
    "RAW_SUFFIXES",
    "DataError",
    "Dataset",
    "InvalidDatasetError",
    "MissingDataError",
    "check_name",
    "default_cache_dir",
    "feature_nonzeros",
    "features_array",
    "from_arrays",
    "is_array_folder",
    "from_jraph",
    "is_dense_features",
    "largest_feature",
    "load_arrays",
    "load_dataset",
    "load_heterophily",
    "load_ogbn_arxiv",
    "load_planetoid",
    "make_csbm",
    "make_planted_depth",
    "planted_agreement",
    "planted_deep_nodes",
    "resolve_raw_file",
    "row_normalise",
    "sha256_of",
    "symmetric_edges",
    "validate",
    "write_csbm",
]
