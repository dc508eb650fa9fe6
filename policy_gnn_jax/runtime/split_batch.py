"""Several splits of one graph as one program: a `Trainer` per split in, one `Trainer` over a
split axis out.

A benchmark's fixed splits share the graph, the features and the labels; they differ in which
nodes train, validate and test. Each split's trainer closes over its own index arrays, so run
one after another every split is traced and compiled anew, and on a small graph compiling is
most of the sweep's time. Where the splits' programs are the same program (the same jaxpr: the
same shapes, the same operations, the same literals), they differ only in their closed-over
arrays. `stack_trainers` traces each split's functions once, keeps the arrays every split shares
as they are, stacks the ones that differ along a new leading axis, and maps the one program over
that axis: one compile for every split, and on an accelerator the splits run batched like seeds.

Splits whose programs differ (different split sizes give different shapes) are not joined: the
caller runs them one after another.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import ClosedJaxpr, jaxpr_as_fun

from policy_gnn_jax.runtime.trainer import Trainer

# How the splits are mapped: "vmap" batches them (an accelerator runs them at once; a split's
# float rounding may then depend on its batch, as under vmapped seeds), "map" runs them one
# after another inside the one program.
SPLIT_MAPS = ("vmap", "map")


def _same_array(a, b) -> bool:
    """Whether two closed-over arrays hold the same values (the same object, or equal)."""
    if a is b:
        return True
    if jnp.issubdtype(getattr(a, "dtype", np.float32), jax.dtypes.prng_key):
        a, b = jax.random.key_data(a), jax.random.key_data(b)
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


def _stack(values):
    if jnp.issubdtype(getattr(values[0], "dtype", np.float32), jax.dtypes.prng_key):
        return jax.random.wrap_key_data(jnp.stack([jax.random.key_data(v) for v in values]))
    return jnp.stack([jnp.asarray(v) for v in values])


def one_program(fns, example_args, *, batched_args, out_axes=0, split_map="vmap"):
    """One function computing `fns[k]` at row k of a leading split axis, or None if the
    functions are not one program with different arrays.

    Args:
      fns: one function per split, each taking arguments shaped like `example_args`.
      batched_args: per argument, whether it has the split axis (False: every split gets it).
      out_axes: where the split axis goes in the outputs (a prefix of their tree).
      split_map: "vmap" or "map" (`SPLIT_MAPS`).
    """
    traced = [jax.make_jaxpr(f)(*example_args) for f in fns]
    if any(str(t.jaxpr) != str(traced[0].jaxpr) for t in traced[1:]):
        return None
    out_tree = jax.tree.structure(jax.eval_shape(fns[0], *example_args))
    consts, const_axes = [], []
    for values in zip(*(t.consts for t in traced), strict=True):
        shared = all(_same_array(values[0], v) for v in values[1:])
        consts.append(values[0] if shared else _stack(values))
        const_axes.append(None if shared else 0)
    jaxpr = traced[0].jaxpr

    def one_split(split_consts, _row, *args):
        outputs = jaxpr_as_fun(ClosedJaxpr(jaxpr, split_consts))(*jax.tree.leaves(args))
        return jax.tree.unflatten(out_tree, outputs)

    # The split index rides along as an argument of its own: splits that share every array
    # (the same dataset twice) still have an axis to map over.
    rows = jnp.arange(len(fns))
    arg_axes = tuple(0 if b else None for b in batched_args)
    if split_map == "vmap":
        mapped = jax.vmap(one_split, in_axes=(const_axes, 0, *arg_axes), out_axes=out_axes)
        return functools.partial(mapped, consts, rows)
    return functools.partial(_map_splits, one_split, consts, const_axes, rows, arg_axes, out_axes)


def _map_splits(one_split, consts, const_axes, rows, arg_axes, out_axes, *args):
    """`one_split` over the split axis one split after another (`lax.map`), the outputs' split
    axis moved to `out_axes` as vmap would put it."""
    stacked = [c for c, a in zip(consts, const_axes, strict=True) if a == 0]
    stacked_args = [x for x, a in zip(args, arg_axes, strict=True) if a == 0]

    def body(row):
        index, row_consts, row_args = row
        it_c, it_a = iter(row_consts), iter(row_args)
        split_consts = [next(it_c) if a == 0 else c for c, a in zip(consts, const_axes)]
        split_args = [next(it_a) if a == 0 else x for x, a in zip(args, arg_axes)]
        return one_split(split_consts, index, *split_args)

    outputs = jax.lax.map(body, (rows, stacked, stacked_args))
    return _move_split_axis(outputs, out_axes)


def _move_split_axis(outputs, out_axes):
    if isinstance(out_axes, int):
        return jax.tree.map(lambda x: jnp.moveaxis(x, 0, out_axes), outputs)
    return type(outputs)(_move_split_axis(o, a) for o, a in zip(outputs, out_axes, strict=True))


def stack_trainers(trainers: list[Trainer], key, split_map: str = "vmap") -> Trainer | None:
    """One `Trainer` over the split axis (every leaf of its state [splits, ...], its chunk's
    metrics [length, splits, ...], its results [splits, ...]) running `trainers[k]` on split k,
    each from the same `key` (the splits of one seed start from one key, as when they run one
    after another); None where the trainers are not one program.

    Its `selected` is not given: take split k's state (`split_state`) to its own trainer's.
    Under "map" a call runs its chunk for each split in turn, so the chunk is the trainers'
    shared out over the splits: a call takes about as long as a split's own, and the run comes
    back to Python (progress, Ctrl-C, a signal) as often."""
    first = trainers[0]
    per_call = first.per_call
    if split_map == "map":
        per_call = max(1, per_call // len(trainers))
    if any((t.total, t.per_call, t.unit) != (first.total, first.per_call, first.unit)
           for t in trainers):  # fmt: skip
        return None
    init = one_program([t.init for t in trainers], (key,), batched_args=(False,),
                       split_map=split_map)  # fmt: skip
    if init is None:
        return None
    state_like = jax.eval_shape(first.init, key)
    evaluate = one_program([t.evaluate for t in trainers], (state_like,), batched_args=(True,),
                           split_map=split_map)  # fmt: skip
    if evaluate is None:
        return None

    def chunk_program(length: int):
        fns = [functools.partial(t.train_chunk, length=length) for t in trainers]
        return one_program(fns, (state_like,), batched_args=(True,), out_axes=(0, 1),
                           split_map=split_map)  # fmt: skip

    # Traced now for the lengths the runner will ask for, so a mismatch falls back before
    # anything runs; any other length is traced on first use.
    chunks = {n: chunk_program(n) for n in {per_call, first.total % per_call} - {0}}
    if any(c is None for c in chunks.values()):
        return None

    def train_chunk(state, length: int):
        if length not in chunks:
            chunks[length] = chunk_program(length)
        if chunks[length] is None:
            raise ValueError("the splits' training chunks are not one program")
        return chunks[length](state)

    return Trainer(init, train_chunk, evaluate, None, first.total, per_call, first.unit)


def split_state(tree, k: int, axis: int = 1):
    """Split k's rows of a tree whose leaves have the split axis at `axis` (after the seeds')."""
    return jax.tree.map(lambda x: jnp.take(x, k, axis=axis) if _is_key(x) else
                        np.take(np.asarray(x), k, axis=axis), tree)  # fmt: skip


def _is_key(x) -> bool:
    return jnp.issubdtype(getattr(x, "dtype", np.float32), jax.dtypes.prng_key)
