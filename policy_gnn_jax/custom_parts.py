"""Your own `Backbone` and `Agent`, checked on the graph they will run on before anything
compiles: every function traced on shapes only (`jax.eval_shape`), at the sizes the run uses, so
a part that cannot run is one `ConfigError` naming what it returned, not an error from inside
JAX halfway through a run."""

from __future__ import annotations

import numbers

import jax
import jax.numpy as jnp

from policy_gnn_jax import config as config_lib
from policy_gnn_jax import graph as graph_lib
from policy_gnn_jax.agents import base as agent_lib
from policy_gnn_jax.mdp.loop import LOOP_METRICS
from policy_gnn_jax.metrics import shapes

STEP = jax.ShapeDtypeStruct((), jnp.int32)


def _key():  # made when asked: importing the library starts no backend
    return jax.ShapeDtypeStruct((), jax.random.key(0).dtype)


def _traced(part: str, fn, *args, returns: int = 0):
    """`fn`'s output shapes; with `returns`, a tuple of that many is required."""
    try:
        out = jax.eval_shape(fn, *args)
    except Exception as err:  # the user's code: whatever it raises
        said = " ".join(str(err).split())[:200]
        raise config_lib.ConfigError(
            f"the {part} could not be traced ({type(err).__name__}: {said})."
        ) from None
    if returns and (not isinstance(out, tuple) or len(out) != returns):
        raise config_lib.ConfigError(
            f"the {part} must return a tuple of {returns}, got {type(out).__name__}"
            f"{f' of {len(out)}' if isinstance(out, tuple) else ''}."
        )
    return out


def _floats(part: str, out, want: tuple, what: str) -> None:
    """An array of floats of shape `want`, or a ConfigError naming what the part returned."""
    shape, dtype = getattr(out, "shape", None), getattr(out, "dtype", None)
    if shape is None or tuple(shape) != want or not jnp.issubdtype(dtype, jnp.floating):
        said = f"{dtype} {tuple(shape)}" if shape is not None else type(out).__name__
        raise config_lib.ConfigError(f"the backbone's {part} returned {said} {what}.")


def _nodes(count: int):
    return jax.ShapeDtypeStruct((count,), jnp.int32)


def _one_int_per_node(part: str, name: str, out, count: int) -> None:
    if getattr(out, "shape", None) != (count,) or not jnp.issubdtype(out.dtype, jnp.integer):
        raise config_lib.ConfigError(
            f"the {part}'s {name}() returned {getattr(out, 'dtype', type(out).__name__)} "
            f"{getattr(out, 'shape', '')} for {count} nodes: it must return one integer per node."
        )


def check(backbone, agent, g: graph_lib.Graph, num_classes: int, config, method) -> tuple | None:
    """Checks the backbone and agent given to `method` (a `methods.Method`); a part that is None
    is the built-in one, unchecked. Returns the agent's metric names, or None without an agent
    of your own."""
    if backbone is not None:
        mdp, sampled = method.takes_agent, method.engine(config, g) != "full"
        check_backbone(backbone, g, num_classes, mdp=mdp, sampled=sampled)
    return None if agent is None else check_agent(agent, g, config)


def check_backbone(backbone, g: graph_lib.Graph, num_classes: int, *, mdp: bool = True,
                   sampled: bool = False) -> None:  # fmt: skip
    """Its depths are integers, low to high; its optimizer has optax's `init` and `update`; its
    parameters are floats; `logits` is [D, n, C] floats on the dataset's graph and, where the
    engine samples subgraphs, on a graph of 3 nodes; `loss` one float per node, for nodes
    [M] and, in the MDP loop, [actions, buffer slots]."""
    low, high = backbone.min_depth, backbone.max_depth
    if any(isinstance(d, bool) or not isinstance(d, numbers.Integral) for d in (low, high)):
        raise config_lib.ConfigError(
            f"the backbone's min_depth and max_depth must be ints, got {low!r} and {high!r}."
        )
    if low > high:
        raise config_lib.ConfigError(
            f"the backbone's min_depth {low} is above its max_depth {high}: it computes no depth."
        )
    if not all(callable(getattr(backbone.optimizer, f, None)) for f in ("init", "update")):
        raise config_lib.ConfigError(
            f"the backbone's optimizer must be an optax transformation (e.g. optax.adam(0.01)), "
            f"got {type(backbone.optimizer).__name__}."
        )
    params = _traced("backbone's init()", backbone.init, _key(), g)
    if not all(jnp.issubdtype(x.dtype, jnp.floating) for x in jax.tree.leaves(params)):
        raise config_lib.ConfigError(
            "the backbone's parameters must be floats: the loop trains them by gradient."
        )
    graphs = [(g, g.num_nodes, "")]
    if sampled:  # the engine runs it on sampled neighbourhoods: any graph it is given
        graphs.append((_three_nodes(g), 3, " (a sampled subgraph, as the engine gives it)"))
    for graph, nodes, what in graphs:
        out = _traced(f"backbone's logits() on a graph of {nodes} nodes{what}", backbone.logits,
                      params, graph, None)  # fmt: skip
        want = (high - low + 1, nodes, num_classes)
        _floats("logits()", out, want, f"on a graph of {nodes} nodes{what}, but depths "
                f"{low}..{high} need floats [{want[0]}, {want[1]}, {want[2]}] (depths, nodes, "
                f"classes), computed on the graph it is given")  # fmt: skip
    for shape in [(3,), (2, 3)] if mdp else [(3,)]:
        nodes = jax.ShapeDtypeStruct(shape, jnp.int32)
        out = _traced("backbone's loss()", backbone.loss, params, g, _key(), nodes, nodes)
        _floats(
            "loss()",
            out,
            shape,
            f"for nodes of shape {shape}: it must return one float "
            f"per node, in the nodes' shape (the MDP loop passes [actions, buffer slots])",
        )


def _three_nodes(g: graph_lib.Graph) -> graph_lib.Graph:
    """A graph of g's first 3 nodes, each with a self-loop: what a sampled subgraph looks like
    to a backbone (a `graph.operator_graph`)."""
    loops = jnp.arange(3, dtype=jnp.int32)
    return graph_lib.operator_graph(
        features=g.features[:3],
        feature_nonzeros=None,
        senders=loops,
        receivers=loops,
        weights=jnp.ones(3, jnp.float32),
        labels=g.labels[:3],
        num_classes=g.num_classes,
        feature_dim=g.num_features,
    )


def check_agent(agent, g: graph_lib.Graph, config: config_lib.Config) -> tuple[str, ...]:
    """Its functions on the run's sizes (walkers, validation and test nodes): integers of one
    per node, a state and a policy that keep their structure, `learn` returning scalar metrics
    of its own names, `summarise` reading them. Returns those names."""
    if isinstance(agent.num_actions, bool) or not isinstance(agent.num_actions, numbers.Integral):
        raise config_lib.ConfigError(
            f"the agent's num_actions must be an int, got {agent.num_actions!r}."
        )
    walkers = config.num_walkers or g.train_index.shape[0]
    state, policy = _traced("agent's init()", agent.init, _key(), g, returns=2)
    acted = _traced("agent's act()", agent.act, _key(), state, g, _nodes(walkers), STEP, returns=3)
    _one_int_per_node("agent", "act", acted[2], walkers)
    if shapes(acted[1]) != shapes(policy):
        raise config_lib.ConfigError(
            "the agent's act() returned a policy of another structure, shapes or dtypes than "
            "init()'s: the loop keeps the best one in a fixed structure."
        )
    for nodes in (g.val_index, g.test_index):
        depths = _traced(
            "agent's depths()", agent.depths, _key(), policy, g, _nodes(nodes.shape[0])
        )
        _one_int_per_node("agent", "depths", depths, nodes.shape[0])
    transition = agent_lib.Transition(
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
    if shapes(learned[0]) != shapes(state):
        raise config_lib.ConfigError(
            "the agent's learn() changed the agent state's structure, shapes or dtypes: the "
            "loop carries it from step to step unchanged in kind."
        )
    _scalars("learn() metrics", learned[1])
    steps = {k: jax.ShapeDtypeStruct((config.steps_per_episode, *v.shape), v.dtype)
             for k, v in learned[1].items()}  # fmt: skip
    summary = _traced("agent's summarise()", agent.summarise, steps)
    _scalars("summarise() values", summary)
    for name in (*learned[1], *summary):
        if name in LOOP_METRICS:
            raise config_lib.ConfigError(
                f"the agent's metric {name!r} is the loop's own: name it otherwise."
            )
    return tuple(summary)


def _scalars(what: str, values) -> None:
    """A dict of scalars named by strings, or a ConfigError naming the first that is not."""
    if not isinstance(values, dict):
        raise config_lib.ConfigError(
            f"the agent's {what} must be a dict of scalars, got {type(values).__name__}."
        )
    for name, value in values.items():
        if not isinstance(name, str) or getattr(value, "shape", None) != ():
            raise config_lib.ConfigError(
                f"the agent's {what} must be scalars named by strings: {name!r} is "
                f"{getattr(value, 'shape', type(value).__name__)}."
            )
