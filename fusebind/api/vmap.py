"""`fb.vmap(fn, in_axes=0, out_axes=0)`: fn mapped over a batch dim, by batching its traced IR.

Owns `vmap` / `VmapFunction`, the in_axes/out_axes specs (checked at
`vmap(...)`, matched against the call's pytrees at each call) and the
driver `batch_call`. How it works, as JAX's vmap does it:
1. the call's arguments are flattened (pytree.py) and each leaf gets its
   axis from in_axes (an int, None, or a pytree prefix of the positional
   arguments); keyword arguments are mapped along axis 0 (JAX's rule);
2. fn is traced once at the per-example shapes (trace.trace_graph: a
   mapped leaf loses its axis; an unmapped array is an argument as it is;
   an unmapped Python value (a flag, a mode string, a Python scalar outside
   a trace) is passed to fn as it is, so it specializes the trace like a
   static argument);
3. each op of that trace is re-emitted into the caller's graph through its
   batching rule (vmap_rules.py), with the batch dim at axis 0 of every
   mapped value; unmapped values stay unmapped;
4. each result's batch dim goes to its out_axes (an unmapped result is
   broadcast along the batch, as stacking fn's results would give).

Inside a trace (fb.jit(fb.vmap(f)), vmap in a jitted function, nested vmap)
the caller's graph is the trace's. fn may close over the caller's tracers:
they are unmapped values, and an op numpy's operators would put in the
caller's graph (`w * x`, w the caller's) is routed into the per-example
trace (vmap_rules.route). The per-example trace's call-time checks (weak
scalars, traced index arguments) become the caller's (vmap_rules.caller_check).
Called eagerly on numpy arrays, the mapped function is itself jitted once
per call form (a `JitFunction`; with unmapped Python values, its static
first argument holds them and the call's structure), so arrays-only calls
take jit's fast path.

Must not: know any op (vmap_rules.py does) or run kernels (fb.jit does).
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any, Callable, Sequence

import numpy as np
from xdsl.dialects import func as func_d

from fusebind.api import trace as trace_mod
from fusebind.api.errors import FusebindAxisError, FusebindValueError, UnsupportedOperation
from fusebind.api.jit import JitFunction
from fusebind.api.pytree import LEAF, flatten, unflatten
from fusebind.api.trace import Graph, Tracer, as_tracer, parameter_names, trace_graph, tracing
from fusebind.api.tracer import capture_array, _shape_str
from fusebind.api.vmap_rules import ROUTING, caller_check, drop_dead, emit_batched, look, route, unguard
from fusebind.dialect import prim

# ---------------------------------------------------------------- axis specs
def _check_spec(spec: Any, what: str, path: str = "") -> None:
    """in_axes/out_axes: an int, None, or a tuple/list/dict of them (nested)."""
    if spec is None or (type(spec) is int):
        return
    if isinstance(spec, (tuple, list)):
        for i, s in enumerate(spec):
            _check_spec(s, what, f"{path}[{i}]")
        return
    if isinstance(spec, dict):
        for k, s in spec.items():
            _check_spec(s, what, f"{path}[{k!r}]")
        return
    raise UnsupportedOperation(
        f"fusebind.vmap: {what}{path} is {spec!r} (a {type(spec).__name__}); {what} takes an int, None, or a "
        "tuple/list/dict of them matching the structure of the arguments")


def _assign(spec: Any, tree: tuple[Any, ...], path: str, what: str, axes: list[Any]) -> None:
    """Append one axis per leaf of `tree` (a pytree.flatten treedef) from the prefix `spec`."""
    if spec is None or type(spec) is int:
        axes.extend([spec] * _count(tree))
        return
    tag = tree[0]
    if isinstance(spec, (tuple, list)) and tag in ("tuple", "list", "namedtuple"):
        children = tree[1] if tag != "namedtuple" else tree[2]
        if len(spec) == len(children):
            for i, (s, c) in enumerate(zip(spec, children)):
                _assign(s, c, f"{path}[{i}]", what, axes)
            return
        found = f"a {tag} of {len(children)}"
    elif isinstance(spec, dict) and tag == "dict":
        if sorted(spec, key=repr) == sorted(tree[2], key=repr):
            for k, c in zip(tree[2], tree[3]):
                _assign(spec[k], c, f"{path}[{k!r}]", what, axes)
            return
        found = f"a dict with keys {list(tree[2])}"
    else:
        found = _describe(tree)
    raise FusebindValueError(
        f"fusebind.vmap: {what} is not a prefix of the structure it maps: at {path} it gives {spec!r}, but "
        f"{path} is {found}; give an int or None there, or a {type(spec).__name__} matching it")


def _count(tree: tuple[Any, ...]) -> int:
    tag = tree[0]
    if tag == "*":
        return 1
    if tag == "None":
        return 0
    children = tree[1] if tag in ("tuple", "list") else tree[2] if tag == "namedtuple" else tree[3]
    return sum(_count(c) for c in children)


def _describe(tree: tuple[Any, ...]) -> str:
    tag = tree[0]
    if tag == "*":
        return "an array (a leaf)"
    if tag == "None":
        return "None"
    if tag in ("tuple", "list"):
        return f"a {tag} of {len(tree[1])}"
    return f"a {tree[1].__name__}"


# ---------------------------------------------------------------- the mapped function
class VmapFunction:
    """`fn` mapped over a batch dim (see `vmap`)."""

    def __init__(self, fn: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0) -> None:
        if not callable(fn):
            raise UnsupportedOperation(f"fusebind.vmap: the function to map must be callable, got a "
                                       f"{type(fn).__name__}")
        _check_spec(in_axes, "in_axes")
        _check_spec(out_axes, "out_axes")
        if isinstance(in_axes, dict):
            raise FusebindValueError(
                "fusebind.vmap: in_axes is a dict; at the top it gives the positional arguments' axes, so it is an "
                "int, None, or a tuple with one entry per positional argument (a dict may appear inside it, for a "
                "dict argument)")
        # (names of its own: fb.jit(vmap(f)) copies this object's __dict__ into the JitFunction, as
        # functools.update_wrapper does, so a plain `fn` would replace the JitFunction's own `fn`)
        self._vmap_fn = fn
        self._vmap_name = getattr(fn, "__name__", "fn")
        self._vmap_in_axes = tuple(in_axes) if isinstance(in_axes, list) else in_axes
        self._vmap_out_axes = out_axes
        #: eager calls: one jitted runner per call form (count of positional args, keyword names)
        self._vmap_runners: dict[Any, JitFunction] = {}
        self._vmap_params: dict[int, list[str]] = {}
        # fn's name, doc and signature (jit binds a call with it), not its __dict__ (a jitted fn's state)
        for attr in functools.WRAPPER_ASSIGNMENTS:
            try:
                setattr(self, attr, getattr(fn, attr))
            except AttributeError:
                pass
        self.__wrapped__ = fn

    @property
    def fn(self) -> Callable[..., Any]:
        return self._vmap_fn

    @property
    def name(self) -> str:
        return self._vmap_name

    @property
    def in_axes(self) -> Any:
        return self._vmap_in_axes

    @property
    def out_axes(self) -> Any:
        return self._vmap_out_axes

    def __repr__(self) -> str:
        return f"vmap({self.name}, in_axes={self.in_axes!r}, out_axes={self.out_axes!r})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not tracing():
            if not kwargs and all(type(a) is np.ndarray for a in args):
                return self._runner(len(args), (), False)(*args)  # arrays only: jit's fast path
            return self._eager(args, kwargs)
        leaves, axes, names, trees = self._flat(args, kwargs)
        return batch_call(self, leaves, axes, names, trees, len(args), sorted(kwargs))

    def _flat(self, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[list[Any], list[Any], list[str], list[Any]]:
        """The call's leaves, the axis of each, a name for each, and each argument's treedef."""
        spec = self.in_axes
        if isinstance(spec, tuple) and len(spec) != len(args):
            raise FusebindValueError(
                f"fusebind.vmap: in_axes of '{self.name}' has {len(spec)} entr{'y' if len(spec) == 1 else 'ies'} "
                f"({spec!r}) but it was called with {len(args)} positional argument{'s' if len(args) != 1 else ''}; "
                "give one entry per positional argument (keyword arguments are mapped along axis 0)")
        params = self._vmap_params.get(len(args))
        if params is None:  # (inspect.signature costs ~0.2 ms: once per count of arguments)
            params = self._vmap_params[len(args)] = parameter_names(self.fn, len(args))
        leaves: list[Any] = []
        axes: list[Any] = []
        names: list[str] = []
        trees: list[Any] = []
        parts = [(params[i], a, spec[i] if isinstance(spec, tuple) else spec, "in_axes") for i, a in enumerate(args)]
        parts += [(k, kwargs[k], 0, f"the keyword argument '{k}' (mapped along axis 0, as in JAX)")
                  for k in sorted(kwargs)]
        for name, value, s, what in parts:
            vleaves, tree, paths = flatten(value, name)
            _assign(s, tree, name, what, axes)
            leaves += vleaves
            names += paths
            trees.append(tree)
        return leaves, axes, names, trees

    def _eager(self, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """On numpy arrays: the mapped function, jitted; unmapped Python values are static."""
        leaves, axes, names, trees = self._flat(args, kwargs)
        static = []
        for i, (leaf, ax, name) in enumerate(zip(leaves, axes, names)):
            if ax is not None:
                if not isinstance(leaf, (np.ndarray, np.generic)):
                    _sizes(self, leaves, axes, names, kwargs)  # says what it is (not a 0-d traced value)
                continue
            if not isinstance(leaf, (np.ndarray, np.generic)):
                try:
                    hash(leaf)
                except TypeError:
                    raise UnsupportedOperation(
                        f"fusebind.vmap: the unmapped argument '{name}' of '{self.name}' is an unhashable "
                        f"{type(leaf).__name__}; an unmapped Python value specializes the compiled function, so it "
                        "must be hashable (a tuple instead of a list), or an array") from None
                static.append((i, type(leaf), leaf))  # (the type too: True == 1 but traces differently)
        kwnames = tuple(sorted(kwargs))
        if not static:
            return self._runner(len(args), kwnames, False)(*args, **kwargs)
        placed = set(i for i, _, _ in static)
        it = iter([None if i in placed else leaf for i, leaf in enumerate(leaves)])
        rebuilt = [unflatten(t, it) for t in trees]
        key = (tuple(trees), tuple(static))
        return self._runner(len(args), kwnames, True)(key, *rebuilt[:len(args)],
                                                      **dict(zip(kwnames, rebuilt[len(args):])))

    def _runner(self, nargs: int, kwnames: tuple[str, ...], keyed: bool) -> JitFunction:
        form = (nargs, kwnames, keyed)
        runner = self._vmap_runners.get(form)
        if runner is None:
            runner = self._vmap_runners[form] = _runner(self, nargs, kwnames, keyed)
        return runner


def _runner(vf: VmapFunction, nargs: int, kwnames: tuple[str, ...], keyed: bool) -> JitFunction:
    """The jitted form of `vf` for calls of `nargs` positional and `kwnames` keyword arguments.
    `keyed`: its first argument is static, (the arguments' treedefs, the unmapped Python values
    by leaf position), and those leaves are None in the arguments it is called with."""
    def run(*args: Any, **kwargs: Any) -> Any:
        if keyed:
            (trees, static), args = args[0], args[1:]
            leaves, _, _ = flatten((tuple(args), {k: kwargs[k] for k in kwnames}))
            by_pos = {i: v for i, _, v in static}
            it = iter(leaves)
            full = [by_pos[i] if i in by_pos else next(it) for i in range(len(leaves) + len(by_pos))]
            it = iter(full)
            values = [unflatten(t, it) for t in trees]
            args, kwargs = tuple(values[:nargs]), dict(zip(kwnames, values[nargs:]))
        leaves, axes, names, trees = vf._flat(args, kwargs)
        return batch_call(vf, leaves, axes, names, trees, nargs, list(kwnames))

    # the runner's signature names the leaves as fn's parameters do (%x in .mlir(), 'x' in messages)
    names = parameter_names(vf.fn, nargs)
    if len(set(names)) != nargs or "key" in names or set(names) & set(kwnames) or \
            not all(n.isidentifier() for n in names):
        names = [f"arg{i}" for i in range(nargs)]
    P = inspect.Parameter
    run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [P("key", P.POSITIONAL_ONLY)] * keyed + [P(n, P.POSITIONAL_ONLY) for n in names] +
        [P(k, P.KEYWORD_ONLY) for k in kwnames])
    run.__name__ = f"vmap({vf.name})"
    return JitFunction(run, static_argnums=0 if keyed else ())


# ---------------------------------------------------------------- batching the trace
def _mapped(name: str, fn_name: str, ax: int, kwnames: Any) -> str:
    """How an error names a mapped leaf: by in_axes, or as a keyword argument (always axis 0)."""
    root = re.match(r"[^\[.]*", name).group(0)  # type: ignore[union-attr]
    if root in kwnames:
        return (f"the keyword argument '{name}' of '{fn_name}' is mapped along axis 0 (keyword arguments always "
                "are, as in JAX)")
    return f"in_axes maps the argument '{name}' of '{fn_name}' along axis {ax}"


def _unmap_hint(name: str, kwnames: Any) -> str:
    root = re.match(r"[^\[.]*", name).group(0)  # type: ignore[union-attr]
    if root in kwnames:
        return "pass it positionally with in_axes None, or bind it with functools.partial"
    return "give it in_axes None"


def _batched_shape(leaf: Any, name: str, fn_name: str, ax: int, kwnames: Any) -> tuple[int, ...]:
    if isinstance(leaf, (Tracer, np.ndarray, np.generic)):
        return tuple(np.shape(leaf)) if not isinstance(leaf, Tracer) else leaf.shape
    raise UnsupportedOperation(
        f"fusebind.vmap: {_mapped(name, fn_name, ax, kwnames)}, but it is a {type(leaf).__name__}, not an array "
        f"(a Python value has no axis to map); {_unmap_hint(name, kwnames)}")


def _dtype(leaf: Any) -> str:
    return str(leaf.dtype) if hasattr(leaf, "dtype") else type(leaf).__name__


def _sizes(vf: VmapFunction, leaves: Sequence[Any], axes: Sequence[Any], names: Sequence[str],
           kwnames: Any) -> tuple[int, list[Any]]:
    """The batch size, and each leaf's axis normalized (in range; None stays None)."""
    found: list[tuple[int, int, str, Any]] = []
    norm: list[Any] = []
    for leaf, ax, name in zip(leaves, axes, names):
        if ax is None:
            norm.append(None)
            continue
        shape = _batched_shape(leaf, name, vf.name, ax, kwnames)
        if not shape:
            raise FusebindValueError(
                f"fusebind.vmap: {_mapped(name, vf.name, ax, kwnames)}, which needs rank at least 1, but it has "
                f"rank 0 ({_dtype(leaf)}[]); {_unmap_hint(name, kwnames)}")
        if not -len(shape) <= ax < len(shape):
            raise FusebindAxisError(
                f"fusebind.vmap: {_mapped(name, vf.name, ax, kwnames)}, which is out of range for its rank "
                f"{len(shape)} ({_dtype(leaf)}{_shape_str(shape)})")
        a = ax % len(shape)
        norm.append(a)
        found.append((shape[a], a, name, (leaf, shape)))
    if not found:
        raise FusebindValueError(
            f"fusebind.vmap: '{vf.name}' was called with no mapped argument (in_axes {vf.in_axes!r} maps none of "
            "its arrays), so there is no batch size; map at least one array argument (in_axes not None)")
    if len({f[0] for f in found}) > 1:
        lines = "\n".join(f"  * one axis had size {size}: axis {a} of argument '{name}' of type "
                          f"{_dtype(t[0])}{_shape_str(t[1])}" for size, a, name, t in found)
        raise FusebindValueError(f"fusebind.vmap: '{vf.name}' got inconsistent sizes for array axes to be "
                                 f"mapped:\n{lines}")
    return found[0][0], norm


def _current_graph(leaves: Sequence[Any]) -> Graph:
    """The graph to batch into: the innermost one any traced argument belongs to (an argument of an
    enclosing trace, closed over, may come first), else this thread's innermost trace."""
    graphs = [leaf.graph for leaf in leaves if isinstance(leaf, Tracer)]
    if not graphs:  # numpy arrays passed inside a trace
        return trace_mod.current_graph()
    depth = {id(g): i for i, g in enumerate(ROUTING.inner)}
    return max(graphs, key=lambda g: depth.get(id(g), -1))


def _move(graph: Graph, t: Tracer, src: int, dst: int) -> Tracer:
    if src == dst:
        return t
    perm = [i for i in range(t.ndim) if i != src]
    perm.insert(dst, src)
    return graph.add(prim.TransposeOp(t.value, perm))


def batch_call(vf: VmapFunction, leaves: list[Any], axes: list[Any], names: list[str], trees: list[Any],
               nargs: int, kwnames: list[str]) -> Any:
    """vf's function mapped over `leaves` in the current trace: the result pytree of Tracers."""
    size, axes = _sizes(vf, leaves, axes, names, kwnames)
    graph = _current_graph(leaves)
    # the caller's value of every array leaf (mapped ones with the batch dim at 0); None: a Python value
    outer: list[tuple[Tracer, bool] | None] = []
    for leaf, ax in zip(leaves, axes):
        if ax is None and not isinstance(leaf, (Tracer, np.ndarray, np.generic)):
            outer.append(None)
            continue
        t = as_tracer(graph, leaf)
        outer.append((t if ax is None else _move(graph, t, ax, 0), ax is not None))
    arrays = [np.broadcast_to(np.zeros((), v[0].dtype), v[0].shape[1:] if v[1] else v[0].shape)
              for v in outer if v is not None]
    arg_names = [n for n, v in zip(names, outer) if v is not None]
    out_tree: list[Any] = []

    def call(*tracers: Any) -> Any:
        inner = tracers[0].graph
        ROUTING.inner.append(inner)
        it = iter(tracers)
        values = []
        for leaf, v in zip(leaves, outer):
            if v is None:
                values.append(leaf)
                continue
            t = next(it)
            weak = graph.weak.get(v[0].value)
            if weak is not None and not v[1]:  # an unmapped Python scalar stays weak (its recipe is the caller's)
                inner.weak[t.value] = weak
            values.append(t)
        it = iter(values)
        rebuilt = [unflatten(t, it) for t in trees]
        out = vf.fn(*rebuilt[:nargs], **dict(zip(kwnames, rebuilt[nargs:])))
        out_leaves, tree, _ = flatten(out, "")
        if not out_leaves:
            raise UnsupportedOperation(f"fusebind.vmap: '{vf.name}' returned {out!r}, with no array in it; a mapped "
                                       "function must return at least one array")
        out_tree.append(tree)
        return tuple(out_leaves)

    depth = len(ROUTING.inner)
    route(graph, +1)
    try:
        _, inner = trace_graph(vf.fn, arrays, arg_names, vf.name, call=call)
    finally:
        route(graph, -1)
        del ROUTING.inner[depth:]
    inner_values = [v for v in outer if v is not None]
    unchecked: dict[int, bool] = {}  # per-example positions whose check the caller cannot run: guarded?
    for check in inner.checks:
        mapped, positions = caller_check(graph, check, inner_values)
        if mapped is not None:
            graph.checks.append(mapped)
        elif not positions:
            raise UnsupportedOperation(f"fusebind.vmap: in '{vf.name}': a call-time check of the traced function "
                                       "reads no argument; vmap cannot map it")
        unchecked.update((p, False) for p in positions)
    for f in inner.fns:  # arrays fn captures are captured by the caller's trace too (found in fn's closure)
        if all(f is not g for g in graph.fns):
            graph.fns.append(f)
    env: dict[Any, tuple[Tracer, bool]] = dict(zip(inner.block.args, inner_values))
    for cap, t in inner.captures.values():
        env[t.value] = (capture_array(graph, cap.obj), False)
    ret = None
    marker = graph.block.last_op  # the ops after it are the re-emitted ones
    for op in inner.block.ops:
        if isinstance(op, func_d.ReturnOp):
            ret = op
            continue
        if unchecked:
            unguard(inner, op, unchecked)
        ins = [look(env, graph, o) for o in op.operands]
        t, batched = emit_batched(graph, op, ins, size, vf.name)
        env[op.results[0]] = (t, batched)
        weak = inner.weak.get(op.results[0])
        if weak is not None and not batched:
            graph.weak[t.value] = weak
    bare = [p for p, guarded in unchecked.items() if not guarded]
    if bare:  # a check that guards no op's promise (a one-hot update): it cannot be dropped
        raise UnsupportedOperation(
            f"fusebind.vmap: in '{vf.name}': traced indices whose range is checked before each call (by the index "
            f"argument #{bare[0]} of '{vf.name}') are computed in the enclosing function, not one of its arguments, "
            "so fusebind cannot check their range; pass them as an argument (or as a constant)")
    results = [look(env, graph, o) for o in ret.operands]  # type: ignore[union-attr]
    outs = _outputs(vf, graph, results, out_tree[0], size)
    drop_dead(graph, marker, {t.value for t in outs})
    return unflatten(out_tree[0], outs)


def _outputs(vf: VmapFunction, graph: Graph, results: list[tuple[Tracer, bool]], tree: Any,
             size: int) -> list[Tracer]:
    """The result leaves with their batch dims at out_axes (an unmapped one broadcast, or as it is)."""
    spec = vf.out_axes
    axes: list[Any] = []
    _assign(spec, tree, "the result", "out_axes", axes)
    outs = []
    for i, ((t, batched), ax) in enumerate(zip(results, axes)):
        where = "the result" if tree is LEAF else f"result leaf #{i}"
        if ax is None:
            if batched:
                raise FusebindValueError(
                    f"fusebind.vmap: out_axes is None for {where} of '{vf.name}', but it depends on a mapped "
                    "argument (it differs per example); give it an out axis (an int), or return it reduced over "
                    "the batch")
            outs.append(t)
            continue
        rank = t.ndim + (0 if batched else 1)
        if not -rank <= ax < rank:
            raise FusebindAxisError(
                f"fusebind.vmap: out_axes {ax} for {where} of '{vf.name}' is out of range for its rank {rank} "
                f"(mapped: {t.dtype}{_shape_str((size, *(t.shape[1:] if batched else t.shape)))})")
        if not batched:  # the same value for every example: stacking it repeats it
            t = graph.add(prim.BroadcastToOp(t.value, (size, *t.shape)))
        outs.append(_move(graph, t, 0, ax % rank))
    return outs


def vmap(fn: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0) -> VmapFunction:
    """`fn` mapped over a batch dim, as `jax.vmap`: `vmap(f)(xs)` is `np.stack([f(x) for x in xs])`.

    in_axes: the axis of each positional argument that is mapped: an int (negative counts from the
    end), None (not mapped: every example sees the whole argument), or a tuple with one entry per
    positional argument, each an int, None, or a tuple/list/dict prefix of that argument's pytree.
    Keyword arguments are mapped along axis 0 (JAX's rule). Every mapped axis must have the same size.
    An unmapped Python value (a flag, a mode) is passed to fn as it is, so it may steer Python control
    flow; outside fb.jit each distinct value compiles once.

    out_axes: where the batch dim goes in each result (the same forms, a prefix of the result's
    pytree); None only for a result that does not depend on a mapped argument.

    Works on numpy arrays (compiled once per call structure and shapes, like fb.jit), under fb.jit
    (fb.jit(fb.vmap(f)), vmap inside a jitted function) and nested (vmap(vmap(f))). fn is traced once
    at the per-example shapes and its IR is batched op by op (every prim op has a batching rule, or a
    clear fb.UnsupportedOperation)."""
    return VmapFunction(fn, in_axes, out_axes)
