"""The `fb.*` function of an op class, generated from the op registry, and `fb.register_op`.

Owns `op_function(cls)`: the function an elementwise op class provides
(its `API_NAME`, or a user op's), made from the class's facts alone:
- an op implementing a numpy ufunc (`NUMPY_UFUNC`) is that ufunc on traced
  arrays (numpy_ufuncs.call), so `fb.exp(x)` and `np.exp(x)` agree in every
  dtype;
- an op whose API name is a numpy function fusebind maps (`where`) is that
  function (numpy_dispatch.call);
- any other op (erf, sigmoid, relu, user ops) computes in the dtype numpy's
  promotion gives its operands (Python scalars weak, NEP 50); an op that
  takes only floats follows numpy's float-function table (np.exp's:
  integers compute in float64, bool in float16; bfloat16 on JAX's lattice,
  api/promotion.py); a
  dtype outside the op's `DTYPES` is an `fb.UnsupportedOperation` naming the
  op and the dtypes.

On operands none of which is traced, the function gives numpy's answer:
numpy's own ufunc or function, or the op's `reference` (same dtype rule).

`register_op(cls)` registers a user op class in the dialect registry (name
clashes and the `prim.` prefix are refused there) and returns its function.
A user op that names a `NUMPY_UFUNC` also answers that ufunc on traced
arrays (np.hypot(x, y) inside @fb.jit).

Must not: hand-write a per-op function (the composites live in functions.py).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np
from xdsl.ir import Block

from fusebind.api import numpy_dispatch, numpy_ufuncs
from fusebind.api import numpy_kernels as K
from fusebind.api.errors import UnsupportedOperation
from fusebind.api.tracer import SUPPORTED, Tracer, _check_broadcast
from fusebind.dialect import registry
from fusebind.dialect.errors import OpRegistrationError
from fusebind.dialect.types import FLOAT_TYPES, numpy_dtype, tensor_type

#: the numpy ufunc whose float table an op taking only floats follows, by operand count
_FLOAT_TABLE = {1: np.exp, 2: np.arctan2}
#: the ufunc whose promotion a numeric op follows, by operand count (unary: the operand's own dtype)
_PROMOTE = {2: np.add}


def public_name(cls: type) -> str:
    """What messages call the function: `fusebind.erf`, or a user op's full name `mylib.cube`."""
    return f"fusebind.{cls.API_NAME}" if cls.API_NAME and "." not in cls.KIND else cls.name


def op_dtype(cls: type, graph: Any, args: tuple, what: str) -> np.dtype:
    """The dtype `cls` computes in for these operands, by numpy's rules, or a clear refusal."""
    n = len(args)
    table = _FLOAT_TABLE.get(n) if cls.DTYPES <= FLOAT_TYPES else _PROMOTE.get(n)
    if table is not None:
        (dt, *_), _outs = numpy_ufuncs.resolve(graph, table, args, what)
    else:
        dt = np.dtype(numpy_ufuncs.operand_key(graph, args[0], what, strong=True))
        if dt not in SUPPORTED:
            raise K.unsupported(graph, f"{what} of a {dt} array: fusebind has no dtype {dt}")
    if SUPPORTED[dt] not in cls.DTYPES:
        keys = [numpy_ufuncs.operand_key(graph, v, what) for v in args]
        takes = ", ".join(str(numpy_dtype(e)) for e in sorted(cls.DTYPES))
        advice = "float32" if cls.DTYPES & FLOAT_TYPES else "int64"
        raise K.unsupported(graph, f"{what} of {numpy_ufuncs.describe_keys(keys)} is not supported: {cls.name} "
                                   f"takes {takes}; cast first: x.astype(np.{advice})")
    return dt


def trace_op(cls: type, args: tuple, what: str) -> Tracer:
    """`cls` applied to traced (or scalar) operands, in the dtype `op_dtype` gives."""
    graph = K.graph_of(args)
    dt = op_dtype(cls, graph, args, what)
    xs = [numpy_ufuncs.to_dtype(graph, v, dt) for v in args]
    if len(xs) > 1:
        _check_broadcast(graph, what, *xs)
    out = graph.add(cls(*(x.value for x in xs)))
    graph.weak.pop(out.value, None)  # an op's result is an array (strong), as numpy's functions return
    return out


def reference(cls: type, args: tuple, what: str) -> np.ndarray:
    """`cls` on numpy arrays (no trace): its numpy reference, in the dtype `op_dtype` gives."""
    dt = op_dtype(cls, None, args, what)
    arrays = [np.asarray(v, dtype=dt) for v in args]
    block = Block(arg_types=[tensor_type(a.shape, SUPPORTED[dt]) for a in arrays])
    return cls(*block.args).reference(*arrays)


def op_function(cls: type) -> Callable[..., Any]:
    """The `fb.*` function of an op class (see the module docstring). On operands none of which is traced
    it gives numpy's answer: numpy's own ufunc or function, or the op's reference."""
    what = public_name(cls)
    user = "." in cls.KIND
    numpy_fn = getattr(np, cls.API_NAME or "", None)
    if cls.NUMPY_UFUNC and not user:
        ufunc = getattr(np, cls.NUMPY_UFUNC)

        def traced(*args: Any) -> Any:
            return numpy_ufuncs.call(ufunc, args, {}, what)
        eager: Callable[..., Any] = ufunc
    elif numpy_fn is not None and numpy_fn in numpy_dispatch.TABLE and not user:
        def traced(*args: Any) -> Any:
            return numpy_dispatch.call(numpy_fn, args, {})
        eager = numpy_fn
    else:
        def traced(*args: Any) -> Any:
            return trace_op(cls, args, what)

        def eager(*args: Any) -> Any:
            return reference(cls, args, what)

    operands = [name for name, _ in cls.get_irdl_definition().operands]

    def fn(*args: Any) -> Any:
        if len(args) != len(operands):
            raise UnsupportedOperation(f"{what}() takes {len(operands)} operand{'s' * (len(operands) > 1)} "
                                       f"({', '.join(operands)}), {len(args)} given")
        for v in args:
            if isinstance(v, Tracer):
                return traced(*args)
        return eager(*args)

    fn.__name__ = fn.__qualname__ = cls.API_NAME or cls.name.split(".", 1)[1]
    fn.__doc__ = (f"`{cls.name}` on arrays: inside @fb.jit it is traced, on numpy arrays it computes numpy's "
                  f"answer (generated from the op class {cls.__qualname__}).")
    fn.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in operands])
    fn.op_class = cls  # type: ignore[attr-defined]
    return fn


def register_op(cls: type, *, source: str | None = None) -> Callable[..., Any]:
    """Register a user op class (`fusebind.dialect.UnaryOp` / `BinaryOp` subclass with `name`, `DTYPES`,
    `scalar_body` and `reference`) and return its function: inside @fb.jit it adds the op to the trace
    (it then verifies, prints, parses, fuses, lowers and runs like a built-in); on numpy arrays it computes
    the op's reference. Its name must use the user's own dialect prefix (`mylib.cube`), never `prim.`."""
    ufunc = getattr(cls, "NUMPY_UFUNC", None)
    if ufunc is not None:
        numpy_ufuncs.check_mappable(ufunc, cls)  # before registering: the registry is append-only
    registry.register_op(cls, source=source)
    if ufunc is not None:
        numpy_ufuncs.map_op(cls)
    return op_function(cls)


__all__ = ["OpRegistrationError", "op_function", "register_op"]
