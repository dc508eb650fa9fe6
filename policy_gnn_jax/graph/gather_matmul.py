"""Sparse @ dense products as gathers only: no scatter-add, hence no atomics on a GPU.

XLA lowers a float scatter-add (`segment_sum`, the backward of a gather) to atomic adds on a GPU,
whose order varies from run to run, so the same seed does not give the same bits. This module
computes `M @ H` for a sparse M [R, C] from fixed-size blocks instead: rows are grouped by their
number of non-zeros into buckets of power-of-two width (padding at most doubles the work), each
bucket is one gather `H[cols]` and one reduction over a fixed axis, and the buckets are put back
in row order by one more gather. Every sum then runs in a fixed order on any device.

The buckets store, for each slot, the position of its entry in an [nnz] value array that is
passed at call time, so the same structure serves fixed values (Â's weights) and values that
change every step (the features after input dropout).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct


@struct.dataclass
class GatherBuckets:
    """M [R, C] as row buckets. B buckets; bucket b holds n_b rows padded to width w_b.

    Attributes:
      cols: B arrays [n_b, w_b] int32: the column of each slot (padding: 0).
      pos: B arrays [n_b, w_b] int32: the slot's position in the value array (padding: nnz,
        which reads an appended 0).
      order: [R] int32: where each row sits in the concatenation of the buckets.
    """

    cols: tuple
    pos: tuple
    order: jax.Array


def build(indptr, indices, positions=None) -> GatherBuckets:
    """Buckets of a CSR matrix's structure.

    Args:
      indptr, indices: the CSR structure.
      positions: [nnz] where entry k's value sits in the value array passed to `matmul`
        (default: k; `transpose_csr` gives the map for a transpose).
    """
    indptr = np.asarray(indptr, np.int64)
    positions = np.arange(indptr[-1]) if positions is None else np.asarray(positions)
    lengths = np.diff(indptr)
    num_rows, nnz = len(lengths), int(indptr[-1])
    widths = np.maximum(1, 2 ** np.ceil(np.log2(np.maximum(lengths, 1)))).astype(np.int64)
    cols, pos, placed = [], [], []
    for width in np.unique(widths):
        rows = np.flatnonzero(widths == width)
        slot = np.arange(width)[None, :]
        inside = slot < lengths[rows, None]
        k = np.minimum(indptr[rows, None] + slot, max(nnz - 1, 0))
        cols.append(np.where(inside, np.asarray(indices)[k], 0))
        pos.append(np.where(inside, positions[k], nnz))
        placed.append(rows)
    order = np.empty(num_rows, np.int64)
    order[np.concatenate(placed)] = np.arange(num_rows)
    return GatherBuckets(
        cols=tuple(jnp.asarray(c, jnp.int32) for c in cols),
        pos=tuple(jnp.asarray(p, jnp.int32) for p in pos),
        order=jnp.asarray(order, jnp.int32),
    )


def matmul(buckets: GatherBuckets, values: jax.Array, h: jax.Array) -> jax.Array:
    """M @ h for h [C, D] (or [C]), with M's non-zero values `values` [nnz] in CSR order."""
    padded = jnp.concatenate([values, jnp.zeros((1,), values.dtype)])
    parts = []
    for cols, pos in zip(buckets.cols, buckets.pos):
        gathered = h[cols]  # [n_b, w_b, D]
        weights = padded[pos]  # [n_b, w_b]
        parts.append(jnp.sum(weights.reshape(weights.shape + (1,) * (h.ndim - 1)) * gathered, 1))
    return jnp.concatenate(parts)[buckets.order]


def transpose_csr(indptr, indices, num_cols: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSR structure of M^T, and for each of its entries the position in M's CSR order."""
    indptr = np.asarray(indptr, np.int64)
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    order = np.lexsort((rows, np.asarray(indices)))  # by column, then row
    t_indptr = np.concatenate([[0], np.cumsum(np.bincount(indices, minlength=num_cols))])
    return t_indptr, rows[order], order


def feature_matmul(x_buckets, xt_buckets, w: jax.Array, vals: jax.Array) -> jax.Array:
    """X @ w for the features X (`x_buckets`, its transpose `xt_buckets`, non-zero values
    `vals`, which get no gradient), with an exact gather-only backward pass."""
    return _feature_matmul(x_buckets, xt_buckets, w, jax.lax.stop_gradient(vals))


@jax.custom_vjp
def _feature_matmul(x_buckets, xt_buckets, w, vals):
    # Its VJP is X^T @ cotangent, also as gathers: autodiff of the gather `w[cols]` would
    # scatter-add into w (atomics on a GPU).
    return matmul(x_buckets, vals, w)


def _feature_matmul_fwd(x_buckets, xt_buckets, w, vals):
    return _feature_matmul(x_buckets, xt_buckets, w, vals), (xt_buckets, vals)


def _feature_matmul_bwd(residuals, cotangent):
    xt_buckets, vals = residuals
    return None, None, matmul(xt_buckets, vals, cotangent), None


_feature_matmul.defvjp(_feature_matmul_fwd, _feature_matmul_bwd)
