"""Tracing a Python function over arrays into a module of prim ops.

Owns `Tracer` (a symbolic array with numpy-style operators and methods),
`trace(fn, arrays, names)` and the dtype rules: numpy promotion between
arrays, NEP 50 for Python scalars (weak: `f32_array * 2.0` stays float32),
numpy scalars are strong (`np.float64(2) * f32_array` is float64).

Must not: run anything (the executor does), or know about kernels.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

import numpy as np
from xdsl.dialects import func as func_d
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region

from fusebind.api.errors import TraceError, UnsupportedOperation

SUPPORTED = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.int32): "i32",
             np.dtype(np.int64): "i64", np.dtype(np.bool_): "i1"}


def elem_name(dtype: np.dtype) -> str:
    return SUPPORTED[np.dtype(dtype)]


class Graph:
    """The block being built and what the error messages need."""

    def __init__(self, fn_name: str, arg_desc: str) -> None:
        self.fn_name = fn_name
        self.arg_desc = arg_desc
        self.block = Block()

    def add(self, op: Any) -> "Tracer":
        self.block.add_op(op)
        return Tracer(self, op.results[0])

    def error(self, what: str) -> TraceError:
        return TraceError(f"fusebind: in '{self.fn_name}' ({self.arg_desc}): {what}")


def _shape_str(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


class Tracer:
    """A symbolic array inside a traced function."""

    __array_priority__ = 1000

    def __init__(self, graph: Graph, value: Any) -> None:
        from fusebind.dialect.types import elem_of, numpy_dtype, shape_of

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

    def __bool__(self) -> bool:
        raise self.graph.error("a traced array has no truth value (Python `if`/`and`/`or` on an array); "
                               "use fb.where(cond, a, b)")

    # ------------------------------------------------------------ conversions
    def astype(self, dtype: Any) -> "Tracer":
        from fusebind.dialect.prim import CastOp

        dt = np.dtype(dtype)
        if dt not in SUPPORTED:
            raise UnsupportedOperation(f"fusebind: in '{self.graph.fn_name}': astype({dt}) is not supported; "
                                       "use float32, float64, int32, int64 or bool")
        if dt == self.dtype:
            return self
        return self.graph.add(CastOp(self.value, elem_name(dt)))

    # ------------------------------------------------------------ operators
    def __add__(self, o: Any) -> "Tracer": return binary("add", self, o)
    def __radd__(self, o: Any) -> "Tracer": return binary("add", o, self)
    def __sub__(self, o: Any) -> "Tracer": return binary("sub", self, o)
    def __rsub__(self, o: Any) -> "Tracer": return binary("sub", o, self)
    def __mul__(self, o: Any) -> "Tracer": return binary("mul", self, o)
    def __rmul__(self, o: Any) -> "Tracer": return binary("mul", o, self)
    def __truediv__(self, o: Any) -> "Tracer": return binary("div", self, o)
    def __rtruediv__(self, o: Any) -> "Tracer": return binary("div", o, self)
    def __pow__(self, o: Any) -> "Tracer": return binary("pow", self, o)
    def __rpow__(self, o: Any) -> "Tracer": return binary("pow", o, self)
    def __matmul__(self, o: Any) -> "Tracer": return matmul(self, o)
    def __rmatmul__(self, o: Any) -> "Tracer": return matmul(o, self)
    def __lt__(self, o: Any) -> "Tracer": return binary("lt", self, o)
    def __le__(self, o: Any) -> "Tracer": return binary("le", self, o)
    def __gt__(self, o: Any) -> "Tracer": return binary("gt", self, o)
    def __ge__(self, o: Any) -> "Tracer": return binary("ge", self, o)
    def __eq__(self, o: Any) -> "Tracer": return binary("eq", self, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> "Tracer": return binary("ne", self, o)  # type: ignore[override]
    __hash__ = object.__hash__

    def __neg__(self) -> "Tracer":
        from fusebind.dialect.prim import NegOp

        if self.dtype == np.bool_:
            raise UnsupportedOperation(f"fusebind: in '{self.graph.fn_name}': unary minus of a bool array is "
                                       "not supported (numpy refuses it too); use ~x or x ^ True")
        return self.graph.add(NegOp(self.value))

    def __pos__(self) -> "Tracer":
        return self

    def __abs__(self) -> "Tracer":
        from fusebind.dialect.prim import AbsOp

        return self.graph.add(AbsOp(self.value))

    # ------------------------------------------------------------ methods
    def sum(self, axis: Any = None, keepdims: bool = False) -> "Tracer":
        from fusebind.dialect.prim import ReduceSumOp

        x = self.astype(np.int64) if self.dtype in (np.dtype(np.bool_), np.dtype(np.int32)) else self
        return x._reduce(ReduceSumOp, axis, keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> "Tracer":
        from fusebind.dialect.prim import ReduceMaxOp

        return self._reduce(ReduceMaxOp, axis, keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> "Tracer":
        from fusebind.dialect.prim import ReduceMeanOp

        x = self if self.dtype.kind == "f" else self.astype(np.float64)
        return x._reduce(ReduceMeanOp, axis, keepdims)

    def _reduce(self, cls: Any, axis: Any, keepdims: bool) -> "Tracer":
        axes = _axes(self, axis)
        if not axes:
            return self
        return self.graph.add(cls(self.value, axes, bool(keepdims)))

    def reshape(self, *shape: Any) -> "Tracer":
        from fusebind.dialect.prim import ReshapeOp

        dims = list(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else list(shape)
        if dims.count(-1) > 1:
            raise self.graph.error(f"reshape{tuple(dims)}: at most one dimension may be -1")
        known = int(np.prod([d for d in dims if d != -1]))
        if -1 in dims:
            if known == 0 or self.size % known:
                raise self.graph.error(f"cannot reshape {self.dtype}{_shape_str(self.shape)} into {tuple(dims)}")
            dims[dims.index(-1)] = self.size // known
        if int(np.prod(dims)) != self.size:
            raise self.graph.error(f"cannot reshape {self.dtype}{_shape_str(self.shape)} into {tuple(dims)}")
        if tuple(dims) == self.shape:
            return self
        return self.graph.add(ReshapeOp(self.value, [int(d) for d in dims]))

    def transpose(self, *axes: Any) -> "Tracer":
        from fusebind.dialect.prim import TransposeOp

        perm = list(axes[0]) if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else list(axes)
        if not perm:
            perm = list(reversed(range(self.ndim)))
        perm = [int(p) % max(self.ndim, 1) for p in perm]
        if sorted(perm) != list(range(self.ndim)):
            raise self.graph.error(f"transpose{tuple(axes)} is not a permutation of the {self.ndim} axes")
        if perm == list(range(self.ndim)):
            return self
        return self.graph.add(TransposeOp(self.value, perm))

    @property
    def T(self) -> "Tracer":
        return self.transpose()

    # ------------------------------------------------------------ numpy protocol
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        from fusebind.api import functions as F

        if method != "__call__" or kwargs:
            raise UnsupportedOperation(f"fusebind: in '{self.graph.fn_name}': numpy.{ufunc.__name__}.{method}"
                                       f"{' with ' + ', '.join(kwargs) if kwargs else ''} is not supported")
        table: dict[str, Callable[..., Any]] = {
            "add": lambda a, b: binary("add", a, b), "subtract": lambda a, b: binary("sub", a, b),
            "multiply": lambda a, b: binary("mul", a, b), "true_divide": lambda a, b: binary("div", a, b),
            "divide": lambda a, b: binary("div", a, b), "power": lambda a, b: binary("pow", a, b),
            "less": lambda a, b: binary("lt", a, b), "less_equal": lambda a, b: binary("le", a, b),
            "greater": lambda a, b: binary("gt", a, b), "greater_equal": lambda a, b: binary("ge", a, b),
            "equal": lambda a, b: binary("eq", a, b), "not_equal": lambda a, b: binary("ne", a, b),
            "maximum": F.maximum, "minimum": F.minimum, "matmul": matmul, "negative": lambda a: -as_tracer(
                self.graph, a, self.dtype), "exp": F.exp, "log": F.log, "sqrt": F.sqrt, "tanh": F.tanh,
            "absolute": lambda a: abs(as_tracer(self.graph, a, self.dtype)),
        }
        fn = table.get(ufunc.__name__)
        if fn is None:
            raise UnsupportedOperation(f"fusebind: in '{self.graph.fn_name}': numpy.{ufunc.__name__} is not "
                                       f"supported by fusebind; supported ufuncs: {', '.join(sorted(table))}")
        return fn(*inputs)


def _axes(x: Tracer, axis: Any) -> list[int]:
    if axis is None:
        return list(range(x.ndim))
    items = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    out = []
    for a in items:
        a = int(a)
        if not -x.ndim <= a < x.ndim:
            raise x.graph.error(f"axis {a} is out of bounds for an array of dimension {x.ndim}")
        out.append(a % x.ndim)
    return sorted(set(out))


def _const(graph: Graph, value: Any, dtype: np.dtype) -> Tracer:
    from fusebind.dialect.prim import ConstantOp

    return graph.add(ConstantOp.from_array(np.asarray(value, dtype=dtype)))


def _weak_result(t: np.dtype, scalar: Any) -> np.dtype:
    """NEP 50: a Python scalar takes the array's dtype unless its kind is higher."""
    if isinstance(scalar, bool):
        return t
    if isinstance(scalar, int):
        return t if t.kind in "fi" else np.dtype(np.int64)
    if isinstance(scalar, float):
        return t if t.kind == "f" else np.dtype(np.float64)
    raise TypeError(f"unsupported scalar {scalar!r}")


def as_tracer(graph: Graph, value: Any, like: np.dtype | None = None) -> Tracer:
    """A Tracer for a Tracer, a Python/numpy scalar or an array constant."""
    if isinstance(value, Tracer):
        return value
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        return _const(graph, value, like if like is not None else np.asarray(value).dtype)
    arr = np.asarray(value)
    if arr.dtype not in SUPPORTED:
        raise UnsupportedOperation(f"fusebind: in '{graph.fn_name}': a constant of dtype {arr.dtype} is not "
                                   "supported; use float32, float64, int32, int64 or bool")
    return _const(graph, arr, arr.dtype)


def _operands(a: Any, b: Any) -> tuple[Tracer, Tracer]:
    graph = a.graph if isinstance(a, Tracer) else b.graph
    ta = a if isinstance(a, Tracer) else None
    tb = b if isinstance(b, Tracer) else None
    def weak(v: Any) -> bool:  # np.float64 subclasses float, but numpy scalars are strong
        return isinstance(v, (bool, int, float)) and not isinstance(v, np.generic)

    if ta is not None and tb is None and weak(b):
        dt = _weak_result(ta.dtype, b)
        return ta.astype(dt), as_tracer(graph, b, dt)
    if tb is not None and ta is None and weak(a):
        dt = _weak_result(tb.dtype, a)
        return as_tracer(graph, a, dt), tb.astype(dt)
    ta = ta if ta is not None else as_tracer(graph, a)
    tb = tb if tb is not None else as_tracer(graph, b)
    dt = np.result_type(ta.dtype, tb.dtype)
    return ta.astype(dt), tb.astype(dt)


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
    """`a <kind> b` with numpy's promotion and broadcasting."""
    from fusebind.dialect import prim

    x, y = _operands(a, b)
    graph = x.graph
    _check_broadcast(graph, kind, x, y)
    if kind in ("lt", "le", "gt", "ge", "eq", "ne"):
        return graph.add(prim.CompareOp(kind, x.value, y.value))
    if kind == "div" and x.dtype.kind != "f":
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


def matmul(a: Any, b: Any) -> Tracer:
    from fusebind.dialect.prim import MatmulOp

    x, y = _operands(a, b)
    if x.ndim < 2 or y.ndim < 2 or x.shape[-1] != y.shape[-2]:
        raise x.graph.error(f"operands of '@' have shapes {_shape_str(x.shape)} and {_shape_str(y.shape)}, "
                            "which do not match for matmul (need [..., m, k] @ [..., k, n])")
    if x.dtype == np.bool_:
        raise UnsupportedOperation(f"fusebind: in '{x.graph.fn_name}': '@' of bool arrays is not supported")
    try:
        return x.graph.add(MatmulOp(x.value, y.value))
    except ValueError as exc:
        raise x.graph.error(f"'@': {exc}") from None


def describe_args(names: Sequence[str], arrays: Sequence[np.ndarray]) -> str:
    return ", ".join(f"'{n}' (#{i}) {a.dtype}{_shape_str(a.shape)}" for i, (n, a) in enumerate(zip(names, arrays)))


def trace(fn: Callable[..., Any], arrays: Sequence[np.ndarray], names: Sequence[str], fn_name: str) -> ModuleOp:
    """A module with one `func.func @<fn_name>` computing `fn` on arrays like these."""
    from fusebind.dialect.types import tensor_type

    graph = Graph(fn_name, "arguments " + describe_args(names, arrays))
    types = [tensor_type(a.shape, elem_name(a.dtype)) for a in arrays]
    block = graph.block
    for t, n in zip(types, names):
        arg = block.insert_arg(t, len(block.args))
        arg.name_hint = n if n.isidentifier() else None
    tracers = [Tracer(graph, a) for a in block.args]
    out = fn(*tracers)
    many = isinstance(out, (tuple, list))
    outs = list(out) if many else [out]
    results = []
    for i, o in enumerate(outs):
        if not isinstance(o, Tracer):
            o = as_tracer(graph, o)
        results.append(o)
    block.add_op(func_d.ReturnOp(*(r.value for r in results)))
    f = func_d.FuncOp(fn_name, (types, [r.value.type for r in results]), Region(block))
    return ModuleOp([f])


def parameter_names(fn: Callable[..., Any], count: int) -> list[str]:
    """The names of fn's parameters (for error messages), `arg<i>` past them."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"arg{i}" for i in range(count)]
