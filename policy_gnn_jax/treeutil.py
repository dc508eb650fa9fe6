"""Pytree helpers: a leafwise select and a finiteness check (every trainer), and a tree's
structure with its leaves' shapes and dtypes (to tell whether two trees are one kind)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def tree_select(cond: jax.Array, new, old):
    """`new` where `cond`, else `old`, leaf by leaf (cond is a scalar or broadcasts).

    Under vmap a `lax.cond` runs both branches anyway; a select keeps one code path.
    """
    return jax.tree.map(lambda a, b: jnp.where(cond, a, b), new, old)


def shapes(tree) -> tuple:
    """(structure, [(shape, dtype) per leaf]): equal for two trees of one kind."""
    leaves, structure = jax.tree.flatten(tree)
    return structure, [(tuple(x.shape), x.dtype) for x in leaves]


def all_finite(tree) -> jax.Array:
    """[] bool: no NaN or inf in any floating-point leaf of `tree`."""
    leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.inexact)]
    if not leaves:
        return jnp.ones((), bool)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))
