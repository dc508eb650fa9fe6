"""A user's features as a `Dataset` holds them: every value checked as given, before the cast
to float32, so nothing overflows, rounds or vanishes silently on the way in.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp

from policy_gnn_jax.data.checks import fail


def as_features(features) -> sp.csr_matrix | np.ndarray:
    """[N, F] float32 CSR; what float32 cannot hold is refused (too large, complex) or counted
    in a warning (too small: it becomes 0), never changed silently. A memory-mapped float32
    array is kept as it is (`_mapped_features`)."""
    if isinstance(features, np.memmap):
        return _mapped_features(features)
    if isinstance(features, np.ma.MaskedArray):  # np.asarray would drop the mask, unseen
        fail(
            "features are a numpy masked array, whose masked entries would be used as values.",
            "Fill them first (features.filled(0), or another value that means 'missing' to you).",
        )
    if sp.issparse(features):
        given = sp.csr_matrix(features)
        values = given.data
    else:
        dense = _upcast_small_floats(np.asarray(features))
        if dense.ndim != 2 or not np.issubdtype(dense.dtype, np.number):
            fail(
                f"features must be a numeric [N, F] array, got {dense.dtype} {dense.shape}.",
                "Pass one feature row per node (dense or scipy.sparse).",
            )
        given, values = dense, dense.reshape(-1)
        if not isinstance(features, np.ndarray) and dense.dtype.kind == "f":  # ints made floats
            _warn_rounded(_listed_integers_float32_rounds(features), stacklevel=4)
    if np.iscomplexobj(values):
        fail(
            "features are complex numbers.",
            "Pass real features (e.g. the real and imaginary parts as separate columns).",
        )
    if given.shape[0] < 1:
        fail("the graph has no nodes (features have 0 rows).", "Pass at least one node.")
    _check_float32_range(values)
    matrix = sp.csr_matrix(given, dtype=np.float32)  # NaN/inf: refused by the Dataset's checks
    matrix.sum_duplicates()
    matrix.sort_indices()
    return matrix


def _mapped_features(features: np.memmap) -> np.memmap:
    """A memory-mapped [N, F] float32 C-order array, checked a block of rows at a time and used
    in place. Any other map is refused rather than converted: its copy could be many GB."""
    if features.dtype != np.float32:
        fail(
            f"features are a memory-mapped {features.dtype} array, which would be copied whole "
            f"to convert it.",
            "Write them as float32 (np.lib.format.open_memmap(path, 'w+', np.float32, shape)) "
            "and map that file.",
        )
    if features.ndim != 2 or not features.flags.c_contiguous:
        fail(
            f"memory-mapped features must be a C-order [N, F] array, got shape {features.shape}"
            f"{_layout(features)}.",
            "Write them as one row per node, in C order.",
        )
    if features.shape[0] < 1:
        fail("the graph has no nodes (features have 0 rows).", "Pass at least one node.")
    return features  # its values are the Dataset's checks', a block of rows at a time


def _layout(array: np.ndarray) -> str:
    """How a non-C-order array is laid out, for the refusal: whole in Fortran order, or a
    strided view (a slice of columns or rows) of a larger map."""
    if array.flags.c_contiguous:
        return ""
    if array.flags.f_contiguous:
        return " in Fortran order"
    return " that is a strided view (a slice) of a larger map"


def _upcast_small_floats(array: np.ndarray) -> np.ndarray:
    """bfloat16 and the float8 types (JAX's `ml_dtypes`, not numpy's own) as float32, which
    holds each of their values exactly; any other array as it is."""
    if np.issubdtype(array.dtype, np.number) or array.dtype.kind != "V":
        return array
    import ml_dtypes  # installed with jax

    try:
        bits = ml_dtypes.finfo(array.dtype).bits
    except ValueError:  # a structured or other void dtype: refused by the caller
        return array
    return array.astype(np.float32) if bits <= 16 else array


def _integers_float32_rounds(values: np.ndarray) -> int:
    """How many integers float32 cannot hold exactly. Compared as Python integers: through
    float64, which rounds beyond 2**53 too, a change can go unseen."""
    beyond = values[np.abs(values.astype(np.float64)) > 2**24]  # float32 holds all below
    distinct = np.unique(beyond).tolist()
    rounded = [v for v in distinct if int(np.float32(v)) != v]
    return int(np.isin(beyond, np.array(rounded, dtype=values.dtype)).sum()) if rounded else 0


def _listed_integers_float32_rounds(features) -> int:
    """`_integers_float32_rounds` for the Python integers of nested lists, which numpy turns
    into float64 beside a float (rounding those beyond 2**53 before anything could see it)."""
    listed = np.asarray(features, dtype=object).reshape(-1)
    return sum(
        1
        for v in listed
        if isinstance(v, int | np.integer) and abs(int(v)) > 2**24 and int(np.float32(v)) != v
    )


def _warn_rounded(count: int, stacklevel: int, what: str = "integers") -> None:
    if count:
        warnings.warn(
            f"{count} feature value(s) ({what} beyond 2**24) are rounded in "
            f"float32, which this library computes in: rescale them if the digits matter.",
            stacklevel=stacklevel,  # the user's call
        )


def _check_float32_range(values: np.ndarray) -> None:
    if np.issubdtype(values.dtype, np.integer):
        _warn_rounded(_integers_float32_rounds(values), stacklevel=5)
        return
    if values.dtype == np.float32 or not np.issubdtype(values.dtype, np.floating):
        return
    finite = np.isfinite(values)
    # float64 at least: a float16 compared with 2**24 would overflow (numpy warns)
    magnitude = np.abs(np.where(finite, values, 0)).astype(
        np.promote_types(values.dtype, np.float64)
    )
    too_large = magnitude > np.finfo(np.float32).max
    if np.any(too_large):
        fail(
            f"{int(too_large.sum())} feature value(s) (largest {magnitude.max():.3g}) are beyond "
            f"float32's range (±{np.finfo(np.float32).max:.3g}), which this library computes in.",
            "Rescale the features (e.g. divide by their largest value).",
        )
    # Whole numbers (counts, ids) as floats: float32 rounds them beyond 2**24 as it does integers.
    as32 = values.astype(np.float32)
    whole = (magnitude > 2**24) & (values == np.round(values))
    changed = whole & (as32.astype(values.dtype) != values)
    _warn_rounded(int(changed.sum()), stacklevel=5, what="whole numbers")
    vanish = (magnitude > 0) & (as32 == 0)
    if np.any(vanish):
        warnings.warn(
            f"{int(vanish.sum())} feature values below float32's smallest "
            f"({np.finfo(np.float32).smallest_subnormal:.3g}) become 0 in float32: rescale the "
            f"features if they matter.",
            stacklevel=4,
        )
