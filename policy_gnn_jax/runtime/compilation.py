"""How every program of a run is compiled: the XLA options that make a GPU run bit-identical
across processes, and the float32 matmul precision. Both are `Config` fields and both are
recorded in results.json (docs/performance.md, "Exactness on a GPU")."""

from __future__ import annotations

import functools
import os
import pathlib
from collections.abc import Callable

import jax
from jax.experimental.compilation_cache import compilation_cache

from policy_gnn_jax.config import ConfigError

# On a GPU, XLA times candidate GEMM/convolution algorithms when it compiles a program
# ("autotuning") and keeps the fastest. Timings vary between processes, so two processes can
# pick algorithms that sum in different orders: two runs of the README command on an H100
# differed in 18 171 fields of results.json. Level 0 keeps XLA's fixed default choice.
AUTOTUNE_OFF = {"xla_gpu_autotune_level": 0}
# A float scatter-add (segment sums; the scatter kernels and the subgraph engine use them) runs
# as atomic adds on a GPU, in an order that varies from call to call. This option makes XLA sort
# them instead. It is not free: on an H100 it made the README run's episode 1.75x slower even
# with no float scatter-add left in it (docs/results/gpu_check_nvidia_h100_80gb_hbm3.json), so
# it is asked for only where one is.
DETERMINISTIC_SCATTER = {"xla_gpu_deterministic_ops": True}
GPU_BACKENDS = ("gpu", "cuda", "rocm")
# What experiments/gpu_check.py ran in two processes on a GPU and found bit-identical, as
# (engine, kernels, compile option names): docs/results/gpu_check_*.json.
GPU_VERIFIED = {
    ("full", "gather", ("xla_gpu_autotune_level", "xla_gpu_deterministic_ops")),  # an H100
    ("full", "gather", ("xla_gpu_autotune_level",)),  # the default there; an H200
}


# JAX's persistent compilation cache, on by default: a program compiled once is read back by the
# next process instead of compiled again (a 1-episode Cora run spends most of its time
# compiling). Kept in the project's cache folder beside the downloaded data, under
# CACHE_MAX_BYTES (the least recently used entries leave first). A cached program is the
# compiled program itself, so a warm run computes the same bits as a cold one
# (tests/test_compilation_cache.py).
CACHE_VARIABLE = "POLICY_GNN_COMPILATION_CACHE"  # "off", or a folder
CACHE_MAX_BYTES = 4 * 2**30


def default_cache_folder() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "policy_gnn_jax" / "compiled"


def use_persistent_cache() -> str | None:
    """Turns JAX's persistent compilation cache on for this process, unless it is on already
    (JAX_COMPILATION_CACHE_DIR, or set by the caller) or turned off (`CACHE_VARIABLE=off`).
    Returns the folder in use, or None."""
    choice = os.environ.get(CACHE_VARIABLE, "").strip()
    if choice.lower() in ("off", "0", "false", "no"):
        return None
    if jax.config.jax_compilation_cache_dir:
        return str(jax.config.jax_compilation_cache_dir)
    if choice.lower() in ("", "on", "1", "true", "yes"):
        folder = default_cache_folder()
    else:
        folder = pathlib.Path(choice).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ConfigError(
            f"{CACHE_VARIABLE}={choice} is a file, not a folder: name a folder for the "
            f"compilation cache, or set it to off."
        )
    folder = str(folder)
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_compilation_cache_max_size", CACHE_MAX_BYTES)
    # JAX decides once per process whether it uses the cache: again, now that there is one.
    compilation_cache.reset_cache()
    return folder


def float_scatter_adds(kernels: str, engine: str) -> bool:
    """Whether a run's programs hold float scatter-adds: the scatter kernels' segment sums, or
    the subgraph engine's (its subgraphs change every step, so it has no gather buckets)."""
    return kernels != "gather" or engine == "subgraph"


def compiler_options(
    reproducible: bool, scatter_adds: bool = True, backend: str | None = None
) -> dict | None:
    """The XLA options every program of a run is compiled with on `backend` (default: JAX's):
    on a GPU with `reproducible`, autotuning off, and deterministic scatter-adds where the
    programs have any. None where nothing is needed (CPU: bit-identical as it is) or nothing
    is known to help (TPU), and for the `reproducible=False` opt-out."""
    backend = backend or jax.default_backend()
    if not reproducible or backend not in GPU_BACKENDS:
        return None
    return {**AUTOTUNE_OFF, **(DETERMINISTIC_SCATTER if scatter_adds else {})}


def bit_identical_across_processes(
    options: dict | None, kernels: str, engine: str, backend: str | None = None
) -> bool:
    """Whether two processes running this configuration are known to give bit-identical
    results: on a CPU always (tests/test_exactness.py runs the CLI twice); on a GPU where
    GPU_VERIFIED lists it. Anything not shown (a TPU, the fast GPU path) says False."""
    backend = backend or jax.default_backend()
    if backend == "cpu":
        return True
    if backend in GPU_BACKENDS and options:
        return (engine, kernels, tuple(sorted(options))) in GPU_VERIFIED
    return False


def with_matmul_precision(fn: Callable, precision: str | None) -> Callable:
    """`fn` traced under `jax.default_matmul_precision(precision)`: every float32 dot in it
    gets that precision, which is fixed into the compiled program (None: JAX's default)."""
    if precision is None:
        return fn

    @functools.wraps(fn)
    def traced_at_precision(*args, **kwargs):
        with jax.default_matmul_precision(precision):
            return fn(*args, **kwargs)

    return traced_at_precision


def jit(fn: Callable, *, options: dict | None = None, precision: str | None = "highest"):
    """`jax.jit(fn)` compiled with a run's XLA options and matmul precision."""
    return jax.jit(with_matmul_precision(fn, precision), compiler_options=options)


class Program:
    """`fn` compiled with XLA `options` (`compiler_options`) at a matmul `precision`. Call it
    like `fn`; `lower` and `compile` take `fn`'s arguments too. `donate`: which of `fn`'s
    arguments XLA may overwrite. The graph is one of the arguments (`Trainer.data`): compiled
    in as a constant, XLA would spend seconds folding gathers over it and every program would
    hold its own copy."""

    def __init__(self, fn, *, options=None, precision="highest", donate=()):
        self._traced = with_matmul_precision(fn, precision)
        self._jitted = jax.jit(self._traced, compiler_options=options, donate_argnums=donate)

    def __call__(self, *args):
        return self._jitted(*args)

    def eval_shape(self, *args):
        """`jax.eval_shape` of the program (tracing a jit with compiler options inside another
        trace is refused, so this traces the function itself)."""
        return jax.eval_shape(self._traced, *args)

    def lower(self, *args):
        return self._jitted.lower(*args)

    def compile(self, *args):
        """XLA's program for `args`' shapes, compiled now: call it like `fn`; it also holds the
        program's memory analysis."""
        return self.lower(*args).compile()
