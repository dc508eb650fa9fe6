"""Two pytree helpers every trainer uses: a leafwise select and a finiteness check."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def tree_select(cond: jax.Array, new, old):
    """`new` where `cond`, else `old`, leaf by leaf (cond is a scalar or broadcasts).

    Under vmap a `lax.cond` runs both branches anyway; a select keeps one code path.
    """
    return jax.tree.map(lambda a, b: jnp.where(cond, a, b), new, old)


def all_finite(tree) -> jax.Array:
    """[] bool: no NaN or inf in any floating-point leaf of `tree`."""
    leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.inexact)]
    if not leaves:
        return jnp.ones((), bool)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))
