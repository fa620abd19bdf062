"""Tracing a Python function over arrays into a module of prim ops, and the wiring of the numpy layer.

Owns `trace(fn, arrays, names)` / `trace_graph` (the function's arguments
become block arguments, its arrays hidden ones; see tracer.py for the
traced array and its dtype rules, capture.py for the call boundary), and
the one place the numpy layer is wired: a `Tracer`'s operators and numpy
protocols are implemented by the numpy_* modules, which the tracer may not
import (they build Tracers: an import circle), so this module, above all of
them, installs them into `handlers.NUMPY` at its import. Every traced array
is made by `trace_graph`, so the handlers are in place before the first.

Re-exports the tracer's names (`Tracer`, `Graph`, `SUPPORTED`, ...) for the
modules above the numpy layer.

Must not: be imported by a numpy_* module or the tracer (the circle this
module exists to break), run anything (the executor does), or know about
kernels.
"""

from __future__ import annotations

import inspect
import re
import threading
from typing import Any, Callable, Sequence

import numpy as np
from xdsl.dialects import func as func_d
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Region

from fusebind.api import numpy_dispatch, numpy_indexing, numpy_reductions, numpy_shapes, numpy_ufuncs
from fusebind.api.capture import scalar_kind
from fusebind.api.errors import UnsupportedOperation
from fusebind.api.handlers import NUMPY
from fusebind.api.tracer import (  # noqa: F401 (re-exported)
    SUPPORTED, Graph, Tracer, _shape_str, as_tracer, binary, cast, elem_name, weak_kind,
)
from fusebind.dialect.types import tensor_type

NUMPY.install(
    binop=numpy_ufuncs.binop, inplace=numpy_ufuncs.inplace, unary=numpy_ufuncs.unary_operator,
    ufunc=numpy_ufuncs.call, array_ufunc=numpy_ufuncs.array_ufunc, ufunc_reduce=numpy_reductions.ufunc_reduce,
    function=numpy_dispatch.call, array_function=numpy_dispatch.array_function, getitem=numpy_indexing.getitem,
    no_value=numpy_dispatch.no_value, attribute=numpy_dispatch.attribute,
    has_attribute=numpy_dispatch.has_attribute,
)


#: how many traces this thread is inside (`tracing()`): a jitted function called then inlines
_STATE = threading.local()
#: [traces in progress in any thread]: one cheap read on jit's plain route before the per-thread one
ACTIVE = [0]
_ACTIVE_LOCK = threading.Lock()


def tracing() -> bool:
    """True while this thread is tracing a function (a nested fb.jit call then inlines into it)."""
    return ACTIVE[0] > 0 and getattr(_STATE, "depth", 0) > 0


def current_graph() -> Graph:
    """This thread's innermost trace (`tracing()` must be true)."""
    return _STATE.graphs[-1]


def inline_into_trace(fn: Callable[..., Any]) -> None:
    """`fn` (a nested jitted function's) runs inside this thread's innermost trace: the arrays
    it captures are then found in its closure and globals, and re-read per call."""
    graph = _STATE.graphs[-1]
    if all(f is not fn for f in graph.fns):
        graph.fns.append(fn)


def describe_args(names: Sequence[str], arrays: Sequence[np.ndarray], kinds: Sequence[type | None] = ()) -> str:
    """`'x' (#0) float32[4,8], 's' (#1) int` (a Python scalar argument shows its Python type)."""
    def one(i: int, a: np.ndarray) -> str:
        kind = kinds[i] if i < len(kinds) else None
        return kind.__name__ if kind is not None else f"{a.dtype}{_shape_str(a.shape)}"
    return ", ".join(f"'{n}' (#{i}) {one(i, a)}" for i, (n, a) in enumerate(zip(names, arrays)))


def trace(fn: Callable[..., Any], arrays: Sequence[np.ndarray], names: Sequence[str], fn_name: str,
          kinds: Sequence[type | None] = ()) -> ModuleOp:
    """A module with one `func.func @<fn_name>` computing `fn` on arrays like these."""
    return trace_graph(fn, arrays, names, fn_name, kinds)[0]


def trace_graph(fn: Callable[..., Any], arrays: Sequence[np.ndarray], names: Sequence[str], fn_name: str,
                kinds: Sequence[type | None] = (), call: Callable[..., Any] | None = None) -> tuple[ModuleOp, Graph]:
    """`trace`, and the graph: its weak values, call-time checks and captured
    arrays. The function's arguments are `arrays` (kinds[i] not None: a Python
    scalar of that type, passed as a 0-d bool/int64/float64 array and weak),
    then one hidden argument per captured array, in the order first used.
    `call`: what to call on the tracers (default `fn`; jit passes a wrapper
    that rebuilds pytrees), while captured arrays are looked up in `fn`."""
    graph = Graph(fn_name, "arguments " + describe_args(names, arrays, kinds), fn)
    block = graph.block
    for i, (a, n) in enumerate(zip(arrays, names)):
        arg = block.insert_arg(tensor_type(a.shape, elem_name(a.dtype)), len(block.args))
        arg.name_hint = _hint(n)
        kind = kinds[i] if i < len(kinds) else None
        if kind is not None:
            graph.weak[arg] = (kind, lambda args, i=i: args[i], n)
    tracers = [Tracer(graph, a) for a in block.args]
    _STATE.depth = getattr(_STATE, "depth", 0) + 1
    if not hasattr(_STATE, "graphs"):
        _STATE.graphs = []
    _STATE.graphs.append(graph)
    with _ACTIVE_LOCK:
        ACTIVE[0] += 1
    try:
        out = (call or fn)(*tracers)
    finally:
        with _ACTIVE_LOCK:
            ACTIVE[0] -= 1
        _STATE.depth -= 1
        _STATE.graphs.pop()
    many = isinstance(out, (tuple, list))
    outs = list(out) if many else [out]
    if not outs:
        raise UnsupportedOperation(f"fusebind: '{fn_name}' returned an empty {type(out).__name__}; a jitted "
                                   "function must return at least one array")
    results = [_result(graph, o, i if many else None) for i, o in enumerate(outs)]
    types = [a.type for a in block.args]  # the arguments, then the captured arrays
    block.add_op(func_d.ReturnOp(*(r.value for r in results)))
    f = func_d.FuncOp(fn_name, (types, [r.value.type for r in results]), Region(block))
    return ModuleOp([f]), graph


def _hint(name: str) -> str | None:
    """An SSA name for an argument: a pytree leaf's path `p['w'][0]` shows as `%p_w_0`."""
    if name.isidentifier():
        return name
    hint = "_".join(part for part in re.split(r"\W+", name) if part)
    return hint if hint.isidentifier() else None


def _result(graph: Graph, value: Any, index: int | None) -> Tracer:
    """One returned value as a tracer, or a clear error for what a jitted function cannot return."""
    if isinstance(value, Tracer):
        return value
    what = f"'{graph.fn_name}' returned" if index is None else f"result #{index} of '{graph.fn_name}' is"
    if value is None:
        raise UnsupportedOperation(f"fusebind: {what} None; a jitted function must return an array or a tuple "
                                   "of arrays (is a `return` missing?)")
    if isinstance(value, (dict, tuple, list)):
        # (fb.jit flattens pytree results before they get here: only a direct trace() sees this)
        raise UnsupportedOperation(f"fusebind: {what} a {type(value).__name__}; trace() takes an array or a flat "
                                   "tuple of arrays (fb.jit takes pytree results: it flattens them first)")
    if scalar_kind(value) is None and not isinstance(value, (np.ndarray, np.generic)):
        raise UnsupportedOperation(f"fusebind: {what} a {type(value).__name__}; a jitted function must return "
                                   "arrays (or Python/numpy scalars)")
    return as_tracer(graph, value)


def parameter_names(fn: Callable[..., Any], count: int) -> list[str]:
    """The names of fn's parameters (for error messages), `arg<i>` past them."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"arg{i}" for i in range(count)]
