"""Your own `Backbone` and `Agent`, checked on the graph they will run on before anything
compiles: every function traced on shapes only (`jax.eval_shape`), at the sizes the run uses, so
a part that cannot run is one `ConfigError` naming what it returned, not an error from inside
JAX halfway through a run."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.agents import replay
from policy_gnn_jax.mdp.loop import LOOP_METRICS

STEP = jax.ShapeDtypeStruct((), jnp.int32)


def _key():  # made when asked: importing the library starts no backend
    return jax.ShapeDtypeStruct((), jax.random.key(0).dtype)


def _traced(part: str, fn, *args):
    try:
        return jax.eval_shape(fn, *args)
    except Exception as err:  # the user's code: whatever it raises
        said = " ".join(str(err).split())[:200]
        raise config_lib.ConfigError(
            f"the {part} could not be traced ({type(err).__name__}: {said})."
        ) from None


def _nodes(count: int):
    return jax.ShapeDtypeStruct((count,), jnp.int32)


def _one_int_per_node(part: str, name: str, out, count: int) -> None:
    if getattr(out, "shape", None) != (count,) or not jnp.issubdtype(out.dtype, jnp.integer):
        raise config_lib.ConfigError(
            f"the {part}'s {name}() returned {getattr(out, 'dtype', type(out).__name__)} "
            f"{getattr(out, 'shape', '')} for {count} nodes: it must return one integer per node."
        )


def check(backbone, agent, g: graph_lib.Graph, num_classes: int, config) -> tuple | None:
    """Checks the parts given (None: the built-in one); returns the agent's metric names, or
    None without an agent of your own."""
    if backbone is not None:
        check_backbone(backbone, g, num_classes)
    return None if agent is None else check_agent(agent, g, config)


def check_backbone(backbone, g: graph_lib.Graph, num_classes: int) -> None:
    """Its depths are ints, low to high; its optimizer an optax transformation; its parameters
    floats; `logits` [D, N, C] on `g` (D its depths; N unchecked on the host engine's graph of
    split nodes); `loss` one float per node."""
    low, high = backbone.min_depth, backbone.max_depth
    if any(isinstance(d, bool) or not isinstance(d, int) for d in (low, high)):
        raise config_lib.ConfigError(
            f"the backbone's min_depth and max_depth must be ints, got {low!r} and {high!r}."
        )
    if low > high:
        raise config_lib.ConfigError(
            f"the backbone's min_depth {low} is above its max_depth {high}: it computes no depth."
        )
    if not isinstance(backbone.optimizer, optax.GradientTransformation):
        raise config_lib.ConfigError(
            f"the backbone's optimizer must be an optax transformation (e.g. optax.adam(0.01)), "
            f"got {type(backbone.optimizer).__name__}."
        )
    params = _traced("backbone's init()", backbone.init, _key(), g)
    if not all(jnp.issubdtype(x.dtype, jnp.floating) for x in jax.tree.leaves(params)):
        raise config_lib.ConfigError(
            "the backbone's parameters must be floats: the loop trains them by gradient."
        )
    shape = tuple(_traced("backbone's logits()", backbone.logits, params, g, None).shape)
    nodes = shape[1] if g.host is not None and len(shape) == 3 else g.num_nodes
    want = (high - low + 1, nodes, num_classes)
    if shape != want:
        raise config_lib.ConfigError(
            f"the backbone's logits have shape {shape}, but depths {low}..{high} on this graph "
            f"need [{want[0]}, {want[1]}, {want[2]}] (depths, nodes, classes): build it for "
            f"{num_classes} classes, one row per depth it claims."
        )
    depths = jax.ShapeDtypeStruct((3,), jnp.int32)
    loss = _traced("backbone's loss()", backbone.loss, params, g, _key(), _nodes(3), depths)
    if loss.shape != (3,) or not jnp.issubdtype(loss.dtype, jnp.floating):
        raise config_lib.ConfigError(
            f"the backbone's loss() returned {loss.dtype} {loss.shape} for 3 nodes: it must "
            f"return one float per node (its cross-entropy at its depth)."
        )


def check_agent(agent, g: graph_lib.Graph, config: config_lib.Config) -> tuple[str, ...]:
    """Its functions on the run's sizes (walkers, validation and test nodes): integers of one
    per node, a state and a policy that keep their structure, `learn` returning scalar metrics
    of its own names, `summarise` reading them. Returns those names."""
    if isinstance(agent.num_actions, bool) or not isinstance(agent.num_actions, int):
        raise config_lib.ConfigError(
            f"the agent's num_actions must be an int, got {agent.num_actions!r}."
        )
    walkers = config.num_walkers or g.train_index.shape[0]
    state, policy = _traced("agent's init()", agent.init, _key(), g)
    acted = _traced("agent's act()", agent.act, _key(), state, g, _nodes(walkers), STEP)
    _one_int_per_node("agent", "act", acted[2], walkers)
    if jax.tree.structure(acted[1]) != jax.tree.structure(policy):
        raise config_lib.ConfigError(
            "the agent's act() returned a policy of another structure than init()'s: the loop "
            "keeps the best one in a fixed structure."
        )
    for nodes in (g.val_index, g.test_index):
        depths = _traced(
            "agent's depths()", agent.depths, _key(), policy, g, _nodes(nodes.shape[0])
        )
        _one_int_per_node("agent", "depths", depths, nodes.shape[0])
    transition = replay.Transition(
        _nodes(walkers),
        _nodes(walkers),
        jax.ShapeDtypeStruct((walkers,), jnp.float32),
        _nodes(walkers),
    )
    learned = _traced("agent's learn()", agent.learn, _key(), acted[0], policy, g, transition, STEP)
    if not isinstance(learned, tuple) or len(learned) != 2 or not isinstance(learned[1], dict):
        raise config_lib.ConfigError(
            "the agent's learn() must return (state, metrics), metrics a dict of scalars."
        )
    if _shapes(learned[0]) != _shapes(state):
        raise config_lib.ConfigError(
            "the agent's learn() changed the agent state's structure, shapes or dtypes: the "
            "loop carries it from step to step unchanged in kind."
        )
    steps = {k: jax.ShapeDtypeStruct((config.steps_per_episode, *v.shape), v.dtype)
             for k, v in learned[1].items()}  # fmt: skip
    summary = _traced("agent's summarise()", agent.summarise, steps)
    for name in (*learned[1], *summary):
        if name in LOOP_METRICS:
            raise config_lib.ConfigError(
                f"the agent's metric {name!r} is the loop's own: name it otherwise."
            )
    return tuple(summary)


def _shapes(tree):
    leaves, structure = jax.tree.flatten(tree)
    return structure, [(x.shape, x.dtype) for x in leaves]
