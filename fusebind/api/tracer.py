"""The traced array and the graph it builds: `Tracer`, `Graph` and numpy's dtype rules for operands.

Owns `Tracer` (a symbolic array; its operators and methods are
numpy_operators.ArrayMethods), `Graph` (the block being built), the
conversion of operands to tracers (`as_tracer`: Python scalars weak,
numpy scalars and `fb.constant` arrays baked in, other arrays captured as
hidden arguments, `capture_array`), and the dtype rules: numpy promotion
between arrays, NEP 50 for Python scalars (weak: `f32_array * 2.0` stays
float32; the rules themselves are in weak.py), numpy scalars are strong
(`np.float64(2) * f32_array` is float64). Python scalars are weak wherever
they come from: literals, scalar arguments (0-d arguments whose value is not
in the trace), and Python arithmetic on them (`Graph.weak`, with a recipe per
value for the call-time checks).

Why a module of its own: the numpy_* modules build Tracers, and a Tracer's
methods reach them; so the Tracer imports none of them and calls them
through `handlers.NUMPY`, which trace.py fills. The import graph stays a
tree-like order: handlers < numpy_operators < tracer < numpy_* < trace.

Must not: import a numpy_* module above numpy_operators, run anything (the
executor does), or know about kernels.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Sequence

import numpy as np
from xdsl.ir import Block

from fusebind.api.capture import (
    CANONICAL, SUPPORTED, SUPPORTED_NAMES, Capture, ConstantArray, FusebindOverflowError, make_capture, scalar_kind,
)
from fusebind.api.errors import TraceError, UnsupportedOperation
from fusebind.api.handlers import NUMPY
from fusebind.api.numpy_operators import ArrayMethods
from fusebind.api.promotion import bf16_lattice, is_floating
from fusebind.api.weak import COMPARE, PY_OP, Recipe, fits_check, python_kind, type_check, weak_dtype
from fusebind.dialect import prim
from fusebind.dialect.prim_bitwise import BitwiseAndOp, BitwiseOrOp, InvertOp
from fusebind.dialect.types import elem_of, numpy_dtype, shape_of, tensor_type


def elem_name(dtype: np.dtype) -> str:
    return SUPPORTED[np.dtype(dtype)]


def cast(x: "Tracer", dtype: Any) -> "Tracer":
    """x in `dtype` (numpy's astype, casting 'unsafe'); x itself when it has it already."""
    dt = np.dtype(dtype)
    if dt == x.dtype:
        return x
    if dt not in SUPPORTED:
        raise UnsupportedOperation(f"fusebind: in '{x.graph.fn_name}': a cast of {x.dtype} to {dt} needs dtype "
                                   f"{dt}, which fusebind does not support (it has {SUPPORTED_NAMES})")
    return x.graph.add(prim.CastOp(x.value, elem_name(dt)))


#: unary ops that keep a Python scalar a Python scalar (Graph.add): op class name -> (Python op, text)
_WEAK_UNARY: dict[str, tuple[Callable[[Any], Any], str]] = {"NegOp": (operator.neg, "-"), "AbsOp": (abs, "abs")}


class Graph:
    """The block being built and what the error messages need.

    `weak`: the values that are Python scalars in the eager program (scalar
    arguments, literals and Python arithmetic on them), each with its
    Python type, a recipe computing it from the call's arguments and its
    text; `checks`: what the call must verify first (capture.Binding);
    `captures`: arrays read from outside the arguments, by id (one hidden
    argument each, see `capture_array`); `fn`: the traced function;
    `fns`: it and the jitted functions inlined into it (nested @fb.jit), in
    whose closures and globals a captured array is looked up."""

    def __init__(self, fn_name: str, arg_desc: str, fn: Any = None) -> None:
        self.fn_name = fn_name
        self.arg_desc = arg_desc
        self.block = Block()
        self.fn = fn
        self.fns: list[Any] = [fn]
        self.weak: dict[Any, tuple[type, Recipe, str]] = {}
        self.checks: list[Callable[[Sequence[Any]], None]] = []
        self.captures: dict[int, tuple[Capture, "Tracer"]] = {}
        # while set, `add` hands each op to it (fb.vmap sends an op whose operands belong to a
        # per-example trace inside this one to that trace: vmap_rules.route); it calls `add_here`
        self.router: Callable[[Any], "Tracer"] | None = None

    def add(self, op: Any) -> "Tracer":
        return self.add_here(op) if self.router is None else self.router(op)

    def add_here(self, op: Any) -> "Tracer":
        """Append `op` to this graph's block (what `add` does with no router)."""
        self.block.add_op(op)
        unary = _WEAK_UNARY.get(type(op).__name__)
        if unary is not None and op.operands[0] in self.weak:
            kind, recipe, text = self.weak[op.operands[0]]  # -s and abs(s) of a Python int/float stay one
            if kind is not bool:
                py, name = unary
                self.weak[op.results[0]] = (kind, lambda args: py(recipe(args)), f"{name}({text})")
        return Tracer(self, op.results[0])

    def error(self, what: str) -> TraceError:
        return TraceError(f"fusebind: in '{self.fn_name}' ({self.arg_desc}): {what}")


def _shape_str(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


class Tracer(ArrayMethods):
    """A symbolic array inside a traced function."""

    __array_priority__ = 1000

    def __init__(self, graph: Graph, value: Any) -> None:
        self.graph = graph
        self.value = value
        self.shape: tuple[int, ...] = tuple(int(d) for d in shape_of(value.type))
        self.dtype: np.dtype = numpy_dtype(elem_of(value.type))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def __repr__(self) -> str:
        return f"Tracer({self.dtype}{_shape_str(self.shape)})"

    # ------------------------------------------------------------ conversions
    def astype(self, dtype: Any, order: str = "K", casting: str = "unsafe", subok: bool = True,
               copy: bool = True) -> "Tracer":
        """numpy's astype (casting 'unsafe': float to int truncates toward zero)."""
        dt = np.dtype(dtype)
        if dt not in SUPPORTED:
            raise UnsupportedOperation(f"fusebind: in '{self.graph.fn_name}': astype({dt}) is not supported; "
                                       f"use {SUPPORTED_NAMES}")
        if casting != "unsafe" and not np.can_cast(self.dtype, dt, casting):
            raise UnsupportedOperation(f"fusebind: in '{self.graph.fn_name}': Cannot cast array data from "
                                       f"dtype('{self.dtype}') to dtype('{dt}') according to the rule '{casting}'")
        return cast(self, dt)

    # ------------------------------------------------------------ the array API standard
    def __array_namespace__(self, /, *, api_version: str | None = None) -> Any:
        """The array API namespace of traced values (array_api.py), so array-API-generic code traces."""
        from fusebind.api.array_api import namespace_for

        return namespace_for(api_version)

    @property
    def device(self) -> str:
        """The array API device: fusebind runs on one, "cpu"."""
        return "cpu"

    def to_device(self, device: Any, /, *, stream: Any = None) -> "Tracer":
        if device != "cpu" or stream is not None:
            raise UnsupportedOperation(f"fusebind: in '{self.graph.fn_name}': to_device({device!r}"
                                       f"{', stream=...' if stream is not None else ''}): fusebind's only device is "
                                       "'cpu' (with no streams)")
        return self

    # ------------------------------------------------------------ numpy protocols (NEP 13, NEP 18)
    # (numpy_ufuncs.array_ufunc and numpy_dispatch.array_function, bound late: handlers.py)
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return NUMPY.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return NUMPY.array_function(func, types, args, kwargs)


def _const(graph: Graph, value: Any, dtype: np.dtype) -> Tracer:
    try:
        arr = np.asarray(value, dtype=dtype)
    except OverflowError as exc:  # numpy's message: "Python integer 1099511627776 out of bounds for int32"
        raise FusebindOverflowError(f"fusebind: in '{graph.fn_name}': {exc}") from None
    return graph.add(prim.ConstantOp.from_array(arr))


def weak_kind(value: Any) -> type | None:
    """bool, int or float when `value` is a Python scalar of the eager program
    (a literal, a scalar argument, or Python arithmetic on them); None for
    arrays and numpy scalars (strong)."""
    if isinstance(value, Tracer):
        w = value.graph.weak.get(value.value)
        return w[0] if w is not None else None
    return scalar_kind(value)


def weak_bool_as_int(t: Tracer) -> Tracer:
    """A Python bool (weak) as the Python int it is in arithmetic (`-True`
    is -1): an int64 tracer, weak, for unary ops that take no bool."""
    kind, recipe, text = t.graph.weak[t.value]
    out = t.astype(np.int64)
    t.graph.weak[out.value] = (int, lambda args: int(recipe(args)), f"int({text})")
    return out


def _recipe(graph: Graph, value: Any) -> tuple[Recipe, str]:
    """How the call's arguments give this Python scalar (a literal or a weak traced value), and its text."""
    if isinstance(value, Tracer):
        _, recipe, text = graph.weak[value.value]
        return recipe, text
    return (lambda _args: value), repr(value)


def _weak_operand(graph: Graph, value: Any, kind: type, dt: np.dtype) -> Tracer:
    """A Python scalar operand converted to `dt`, as numpy converts it: a
    literal becomes a constant (out of range raises, as numpy does); a traced
    one is cast, after a call-time check that it fits an integer `dt`."""
    if not isinstance(value, Tracer):
        return _const(graph, value, dt)
    if kind is int and dt.kind in "iu" and dt != value.dtype:
        graph.checks.append(fits_check(*_recipe(graph, value), dt, graph.fn_name))
    return value.astype(dt)


def capture_array(graph: Graph, value: Any) -> Tracer:
    """An array (or list/tuple) the function reads from outside its
    arguments: a hidden argument of the trace, passed at every call
    (capture.py), one per object however often it is used."""
    hit = graph.captures.get(id(value))
    if hit is not None:
        return hit[1]
    if type(value) not in (np.ndarray, list, tuple):
        raise UnsupportedOperation(f"fusebind: in '{graph.fn_name}': a captured {type(value).__name__} (an ndarray "
                                   "subclass) is not supported; use np.asarray(value), or fb.constant(value) to "
                                   "bake it in")
    for fn in graph.fns:  # the closure or global of the function that reads it (outer or inlined)
        cap = make_capture(fn, value, len(graph.captures))
        if cap.cell is not None or cap.namespace is not None:
            break
    if cap.dtype not in SUPPORTED:
        raise UnsupportedOperation(f"fusebind: in '{graph.fn_name}': the captured array '{cap.name}' has dtype "
                                   f"{cap.dtype}, which is not supported; use {SUPPORTED_NAMES}")
    arg = graph.block.insert_arg(tensor_type(cap.shape, elem_name(cap.dtype)), len(graph.block.args))
    if cap.name.isidentifier() and all(a.name_hint != cap.name for a in graph.block.args):
        arg.name_hint = cap.name  # `%W` in .mlir(), unless a parameter has that name
    t = Tracer(graph, arg)
    graph.captures[id(value)] = (cap, t)
    return t


def as_tracer(graph: Graph, value: Any, like: np.dtype | None = None) -> Tracer:
    """A Tracer for a Tracer, a Python scalar (weak; of dtype `like` when
    given), a numpy scalar or `fb.constant` (baked in), or an array, list or
    tuple read from outside the arguments (a hidden argument: capture_array)."""
    if isinstance(value, Tracer):
        return value
    kind = scalar_kind(value)
    if kind is not None:
        if like is not None:
            return _const(graph, value, like)
        t = _const(graph, value, CANONICAL[kind])
        graph.weak[t.value] = (kind, lambda _args: value, repr(value))
        return t
    if isinstance(value, (np.ndarray, list, tuple)) and not isinstance(value, ConstantArray):
        return capture_array(graph, value)
    if value is None or not isinstance(value, (np.ndarray, np.generic)):
        raise UnsupportedOperation(f"fusebind: in '{graph.fn_name}': an operand of type {type(value).__name__} is "
                                   "not an array; use arrays, Python or numpy scalars")
    arr = np.asarray(value)
    if arr.dtype not in SUPPORTED:
        raise UnsupportedOperation(f"fusebind: in '{graph.fn_name}': a constant of dtype {arr.dtype} is not "
                                   f"supported; use {SUPPORTED_NAMES}")
    return _const(graph, arr, arr.dtype)


def _operands(a: Any, b: Any, op: str | None = None) -> tuple[Tracer, Tracer]:
    """Both operands of `a <op> b` as tracers of one dtype, promoted as numpy
    does: arrays and numpy scalars by `np.result_type`; a Python scalar
    (weak, NEP 50) takes the other operand's dtype unless its kind is higher
    (int with a bool array: int64; float with an int array: float64); two
    Python scalars follow Python (int * float is a float, True + True an int)."""
    graph = a.graph if isinstance(a, Tracer) else b.graph
    ka, kb = weak_kind(a), weak_kind(b)
    if ka is None and kb is None:
        ta, tb = as_tracer(graph, a), as_tracer(graph, b)
        dt = bf16_lattice([ta.dtype, tb.dtype]) or np.result_type(ta.dtype, tb.dtype)  # api/promotion.py
        return ta.astype(dt), tb.astype(dt)
    if ka is not None and kb is not None:
        dt = CANONICAL[python_kind(ka, kb, op)]
        return _weak_operand(graph, a, ka, dt), _weak_operand(graph, b, kb, dt)
    if ka is None:
        ta = as_tracer(graph, a)
        dt = bf16_lattice([ta.dtype]) or weak_dtype(ta.dtype, kb, op)  # type: ignore[arg-type]
        return ta.astype(dt), _weak_operand(graph, b, kb, dt)  # type: ignore[arg-type]
    tb = as_tracer(graph, b)
    dt = bf16_lattice([tb.dtype]) or weak_dtype(tb.dtype, ka, op)
    return _weak_operand(graph, a, ka, dt), tb.astype(dt)


_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**", "max": "maximum", "min": "minimum",
           "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _check_broadcast(graph: Graph, kind: str, *xs: Tracer) -> None:
    try:
        np.broadcast_shapes(*(x.shape for x in xs))
    except ValueError:
        shapes = " and ".join(_shape_str(x.shape) for x in xs)
        raise graph.error(f"operands of '{_SYMBOL.get(kind, kind)}' have shapes {shapes}, which do not broadcast") \
            from None


def binary(kind: str, a: Any, b: Any) -> Tracer:
    """`a <kind> b` with numpy's promotion and broadcasting. Of two Python
    scalars (weak) the result is a Python scalar too (except maximum and
    minimum, numpy functions that return numpy scalars), checked at call time."""
    ka, kb = weak_kind(a), weak_kind(b)
    out = _binary(kind, a, b)
    py = PY_OP.get(kind)
    if ka is not None and kb is not None and py is not None:
        graph = out.graph
        (ra, ta), (rb, tb) = _recipe(graph, a), _recipe(graph, b)
        kind_out = bool if kind in COMPARE else {"b": bool, "i": int, "f": float}[out.dtype.kind]

        def recipe(args: Sequence[Any]) -> Any:
            return py(ra(args), rb(args))

        text = f"({ta} {_SYMBOL.get(kind, kind)} {tb})"
        graph.weak[out.value] = (kind_out, recipe, text)
        graph.checks.append(type_check(recipe, text, kind_out, graph.fn_name))
    return out


_SWAPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _strong_dtype(value: Any) -> np.dtype | None:
    if isinstance(value, Tracer):
        return value.dtype
    if isinstance(value, (np.ndarray, np.generic)):
        return value.dtype
    return None


def _mixed_sign_pair(a: Any, b: Any) -> tuple[Any, Any, bool] | None:
    """(the signed operand, the unsigned one, swapped) of a comparison numpy computes exactly but no
    common dtype holds: a uint64 operand against a signed array (numpy's `qQ` loop; their result type
    is float64, which rounds), or against a negative or traced Python int (which uint64 cannot hold)."""
    ka, kb = weak_kind(a), weak_kind(b)
    if ka is not None and kb is not None:
        return None
    da, db = _strong_dtype(a), _strong_dtype(b)
    if ka is None and kb is None:
        if da is None or db is None or {da.kind, db.kind} != {"i", "u"} or np.result_type(da, db).kind != "f":
            return None
        return (a, b, False) if da.kind == "i" else (b, a, True)
    weak, arr, dt = (a, b, db) if ka is not None else (b, a, da)
    if (ka or kb) is not int or dt is None or dt != np.uint64:
        return None
    if not isinstance(weak, Tracer) and weak >= 0:
        return None  # a literal uint64 holds: the usual path converts it
    return (weak, arr, ka is None)


def exact_int_compare(kind: str, a: Any, b: Any) -> Tracer | None:
    """`a <kind> b` for a mixed-sign pair (`_mixed_sign_pair`), exactly as numpy: the signed side s and
    the unsigned side u compare as (s < 0) or (uint64(s) < u) for <, <= and !=, and as
    (s >= 0) and (uint64(s) > u) for >, >= and ==. None for any other pair."""
    pair = _mixed_sign_pair(a, b)
    if pair is None:
        return None
    signed, unsigned, swapped = pair
    graph = (a if isinstance(a, Tracer) else b).graph
    k = _SWAPPED[kind] if swapped else kind
    i64, u64 = np.dtype(np.int64), np.dtype(np.uint64)
    s = _weak_operand(graph, signed, int, i64) if weak_kind(signed) is int else as_tracer(graph, signed).astype(i64)
    u = as_tracer(graph, unsigned).astype(u64)
    _check_broadcast(graph, kind, s, u)
    negative = graph.add(prim.CompareOp("lt", s.value, _const(graph, 0, i64).value))
    c = graph.add(prim.CompareOp(k, s.astype(u64).value, u.value))
    if k in ("lt", "le", "ne"):
        return graph.add(BitwiseOrOp(negative.value, c.value))
    return graph.add(BitwiseAndOp(graph.add(InvertOp(negative.value)).value, c.value))


def _binary(kind: str, a: Any, b: Any) -> Tracer:
    if kind in COMPARE:
        exact = exact_int_compare(kind, a, b)
        if exact is not None:
            return exact
    x, y = _operands(a, b, kind)
    graph = x.graph
    _check_broadcast(graph, kind, x, y)
    if kind in ("lt", "le", "gt", "ge", "eq", "ne"):
        return graph.add(prim.CompareOp(kind, x.value, y.value))
    if kind == "div" and not is_floating(x.dtype):
        x, y = x.astype(np.float64), y.astype(np.float64)
    if x.dtype == np.bool_ and kind in ("sub", "div", "pow"):
        raise UnsupportedOperation(f"fusebind: in '{graph.fn_name}': '{_SYMBOL[kind]}' of bool arrays is not "
                                   "supported; cast with astype first")
    if x.dtype == np.bool_ and kind in ("add", "mul", "max", "min"):
        x, y = x.astype(np.int64), y.astype(np.int64)  # fusebind's numeric ops take no i1 operands
        out = binary(kind, x, y)
        return out.astype(np.bool_) if kind in ("max", "min", "mul") else out.astype(np.bool_)
    cls = {"add": prim.AddOp, "sub": prim.SubOp, "mul": prim.MulOp, "div": prim.DivOp, "pow": prim.PowOp,
           "max": prim.MaxOp, "min": prim.MinOp}[kind]
    return graph.add(cls(x.value, y.value))
