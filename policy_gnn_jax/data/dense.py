"""The two layouts of a dataset's features, and reading them in bounded pieces.

A `Dataset`'s features are a float32 scipy CSR matrix (what every built-in loader makes), or a
dense C-contiguous float32 [N, F] `np.ndarray`, which may be an `np.memmap` over a `.npy` file
larger than memory is comfortable with. Whatever reads the dense layout whole (a check, a hash,
a maximum) goes through it a block of rows at a time here, so its temporaries stay a few MB
however many rows the file holds.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

# Values read at once: 2**22 float32 values are 16 MB, and their temporaries about as much.
CHUNK_VALUES = 2**22


def is_dense_features(features) -> bool:
    """Whether `features` are in the dense layout (any ndarray but np.matrix, which indexes
    rows differently); a CSR matrix is not."""
    return isinstance(features, np.ndarray) and not isinstance(features, np.matrix)


def row_blocks(num_rows: int, row_width: int, values: int = CHUNK_VALUES):
    """(start, stop) of consecutive row blocks of about `values` values each (one row at least)."""
    step = max(1, values // max(row_width, 1))
    for start in range(0, num_rows, step):
        yield start, min(start + step, num_rows)


def all_finite(features) -> bool:
    """No NaN or inf among the features, in either layout."""
    if not is_dense_features(features):
        return bool(np.all(np.isfinite(features.data)))
    width = features.shape[1] if features.ndim == 2 else 1
    return all(np.isfinite(features[a:b]).all() for a, b in row_blocks(features.shape[0], width))


def largest_feature(features) -> float:
    """The largest absolute feature value (0.0 for none), in either layout."""
    if not is_dense_features(features):
        values = features.data
        return float(np.abs(values).max()) if values.size else 0.0
    blocks = row_blocks(features.shape[0], features.shape[1])
    return max((float(np.abs(features[a:b]).max(initial=0.0)) for a, b in blocks), default=0.0)


def features_array(features) -> np.ndarray:
    """The features as a dense [N, F] float32 array: the dense layout as it is (no copy), a
    CSR matrix expanded."""
    if is_dense_features(features):
        return np.asarray(features)
    return features.toarray()


def feature_nonzeros(features) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, cols, values) of the non-zero features sorted by (row, col), as new arrays: never
    the dataset's own (sorting a CSR's arrays in place would change it and its fingerprint).

    The dense layout gives exactly what its CSR conversion (`sp.csr_matrix(x)`) would, found a
    block of rows at a time.
    """
    if not is_dense_features(features):
        coo = features.tocoo(copy=True)
        order = np.lexsort((coo.col, coo.row))
        return coo.row[order], coo.col[order], coo.data[order]
    rows, cols, vals = [], [], []
    for a, b in row_blocks(features.shape[0], features.shape[1]):
        block = np.asarray(features[a:b])
        r, c = np.nonzero(block)  # row-major: already sorted by (row, col)
        rows.append((r + a).astype(np.int32))
        cols.append(c.astype(np.int32))
        vals.append(block[r, c])
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)


def hash_array(digest, array: np.ndarray) -> None:
    """Feeds `array`'s bytes in C order to `digest`, in pieces: the same digest as
    `digest.update(np.ascontiguousarray(array).tobytes())` without a copy of a large array."""
    array = np.ascontiguousarray(array)  # a view when it already is
    flat = array.reshape(-1)
    step = max(1, CHUNK_VALUES * 4 // max(array.itemsize, 1))
    for start in range(0, flat.size, step):
        digest.update(flat[start : start + step])


def row_normalise(features: sp.csr_matrix) -> sp.csr_matrix:
    """Divides each row by its sum (rows summing to 0 stay 0), as PyG's NormalizeFeatures."""
    row_sum = np.asarray(features.sum(1)).reshape(-1)
    scale = 1.0 / np.where(row_sum == 0, 1.0, row_sum)
    return sp.csr_matrix(sp.diags(scale.astype(np.float32)) @ features, dtype=np.float32)
