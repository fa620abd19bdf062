"""numpy ufuncs on traced arrays (NEP 13): `Tracer.__array_ufunc__` and the operators.

Owns, for every numpy ufunc: its dtypes, resolved by numpy itself
(`ufunc.resolve_dtypes`, Python scalars weak as in NEP 50, `dtype=`,
`signature=` and `casting=` honoured); the operands cast to the loop's
dtypes; and the prim ops that compute it (`ELEMENTWISE`). The methods:
`__call__` and `outer` for the ufuncs mapped here, `reduce` for the
reorderable ones (numpy_reductions), `accumulate` for add / multiply /
maximum / minimum (numpy_scans: one prim.scan); `reduceat` and `at` are
refused. `out=` and `where=` are refused (a traced array cannot be written
into; `where=` without `out=` leaves elements unset). A ufunc not mapped is
refused, named, with what to use instead where something exists.

Must not: promote by its own rules (numpy's resolver decides, except that
bfloat16 follows JAX's lattice: api/promotion.py, docs/DTYPES.md), or give an
answer in a dtype numpy would not (an unsupported loop dtype is refused).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from fusebind.api import numpy_kernels as K
from fusebind.api import numpy_rounding, numpy_scans
from fusebind.api.handlers import NUMPY
from fusebind.api.numpy_kernels import unsupported
from fusebind.api.promotion import is_floating, narrow_result
from fusebind.api.tracer import (
    SUPPORTED, Graph, Tracer, _check_broadcast, _weak_operand, as_tracer, binary, exact_int_compare,
    weak_bool_as_int, weak_kind,
)
from fusebind.dialect import prim
from fusebind.dialect.errors import OpRegistrationError
from fusebind.dialect.registry import registered_ops

_GUFUNCS = ("matmul", "vecdot", "matvec", "vecmat")
_COMPARE = {"less": "lt", "less_equal": "le", "greater": "gt", "greater_equal": "ge", "equal": "eq",
            "not_equal": "ne"}


# ---------------------------------------------------------------- operands
def operand_key(graph: Graph, v: Any, what: str, strong: bool = False) -> Any:
    """What numpy's resolver is told about an operand: its dtype, or `int` /
    `float` for a weak Python scalar (a Python bool is numpy's bool).
    `strong`: as numpy sees a Python scalar it has converted to an array."""
    kind = None if strong else weak_kind(v)
    if kind is bool:
        return np.dtype(np.bool_)
    if kind is not None:
        return kind
    if isinstance(v, Tracer):
        return v.dtype
    if isinstance(v, complex) or (isinstance(v, (np.ndarray, np.generic)) and v.dtype.kind == "c"):
        raise unsupported(graph, f"{what}: complex numbers are not supported")
    try:
        dt = np.asarray(v).dtype
    except Exception:  # noqa: BLE001 - numpy could not make an array of it
        dt = np.dtype(object)
    if dt == object or (dt.kind in "USVOMm" and not is_floating(dt)):  # bfloat16 is kind "V"
        raise unsupported(graph, f"{what}: an operand of type {type(v).__name__} is not an array of numbers")
    return dt


def to_dtype(graph: Graph, v: Any, dt: np.dtype, strong: bool = False) -> Tracer:
    """The operand as a tracer of `dt`, converted as numpy converts it."""
    kind = weak_kind(v)
    if kind is not None and not strong:
        return _weak_operand(graph, v, kind, np.dtype(dt))
    if kind is not None and not isinstance(v, Tracer):
        v = K.constant(graph, v, np.asarray(v).dtype)
    return K.cast(as_tracer(graph, v), dt)


def describe_keys(keys: list[Any]) -> str:
    def one(k: Any) -> str:
        return f"a Python {k.__name__}" if isinstance(k, type) else f"a {k} array"
    return one(keys[0]) if len(keys) == 1 else " and ".join(one(k) for k in keys)


def _advice(dt: np.dtype) -> str:
    return "float32" if is_floating(dt) else "int32" if dt.kind in "iu" else "float64"


def resolve(graph: Graph, ufunc: np.ufunc, inputs: tuple, what: str, dtype: Any = None, signature: Any = None,
            casting: str = "same_kind", strong: bool = False) -> tuple[list[np.dtype], list[np.dtype]]:
    """numpy's loop dtypes (inputs, outputs) for these operands; a dtype
    fusebind does not have is refused, saying what to cast to."""
    keys = [operand_key(graph, v, what, strong) for v in inputs]
    if ufunc is np.negative and keys[0] == np.dtype(np.bool_):
        raise unsupported(graph, f"{what} of a bool array is not supported (numpy refuses it too); use ~x or "
                                 "np.logical_not(x)")
    if dtype is not None:
        if signature is not None:
            raise unsupported(graph, f"{what}: cannot specify both 'signature' and 'dtype'")
        signature = (None,) * ufunc.nin + (np.dtype(dtype),) * ufunc.nout
    try:
        extra = {"signature": signature} if signature is not None else {}
        dts = ufunc.resolve_dtypes(tuple(keys) + (None,) * ufunc.nout, casting=casting, **extra)
    except Exception as exc:  # noqa: BLE001 - numpy's refusal, in numpy's words
        raise K.from_numpy_error(graph, exc, what) from None
    ins, outs = list(dts[:ufunc.nin]), list(dts[ufunc.nin:])
    narrow = narrow_result(ufunc, keys, ins, outs)  # bfloat16 on JAX's lattice (api/promotion.py)
    if narrow is not None:
        ins, outs = narrow
    if ufunc.__name__ in _COMPARE and any(k is int for k in keys) and {d.kind for d in ins} <= set("iu"):
        # numpy compares a Python int with an int array exactly: in int64, or for a uint64 array against a
        # negative or traced Python int, as a mixed-sign pair (tracer.exact_int_compare)
        weak = next(i for i, k in enumerate(keys) if k is int)  # (`keys.index(int)` finds dtype int64 too)
        value = inputs[weak]
        if ins[1 - weak] != np.uint64:
            ins = [np.dtype(np.int64)] * 2
        elif isinstance(value, Tracer) or value < 0:
            ins[weak] = np.dtype(np.int64)
    for dt in ins + outs:
        if dt not in SUPPORTED:
            raise unsupported(graph, f"{what} of {describe_keys(keys)} computes in {dt}, which fusebind has no dtype "
                                     f"for; cast first: x.astype(np.{_advice(dt)})")
    return ins, outs


# ---------------------------------------------------------------- implementations
def _bool_or(numeric: Any, on_bool: Callable[[Tracer, Tracer], Tracer]) -> Callable[..., Tracer]:
    def f(a: Tracer, b: Tracer) -> Tracer:
        return on_bool(a, b) if a.dtype == np.bool_ else K.op(numeric, a, b)
    return f


def _fmax(cls: Any) -> Callable[..., Tracer]:
    def f(a: Tracer, b: Tracer) -> Tracer:  # NaN only where both are NaN
        if not is_floating(a.dtype):
            return (K.logical_or if cls is prim.MaxOp else K.logical_and)(a, b) if a.dtype == np.bool_ \
                else K.op(cls, a, b)
        return K.select(K.isnan(a), b, K.select(K.isnan(b), a, K.op(cls, a, b)))
    return f


def _compare(pred: str, a: Tracer, b: Tracer) -> Tracer:
    """numpy's comparison loop: one dtype, or the exact mixed-sign pair (int64 against uint64)."""
    if a.dtype != b.dtype:
        exact = exact_int_compare(pred, a, b)
        if exact is not None:
            return exact
    return K.compare(pred, a, b)


def _sign(x: Tracer) -> Tracer:  # NaN stays NaN; both zeros give +0, as numpy
    zero = K.like(x, 0)
    if x.dtype.kind == "u":  # 0 or 1 (numpy 2 has no -1 of an unsigned dtype)
        return K.select(K.compare("gt", x, zero), K.like(x, 1), zero)
    rest = K.select(K.isnan(x), x, zero) if is_floating(x.dtype) else zero
    return K.select(K.compare("gt", x, zero), K.like(x, 1), K.select(K.compare("lt", x, zero), K.like(x, -1), rest))


def _heaviside(x: Tracer, h0: Tracer) -> Tracer:
    zero = K.like(x, 0)
    return K.select(K.compare("lt", x, zero), zero, K.select(K.compare("gt", x, zero), K.like(x, 1),
                                                           K.select(K.compare("eq", x, zero), h0, x)))


def _reciprocal(x: Tracer) -> Tracer:
    if not is_floating(x.dtype):
        raise unsupported(x.graph, "numpy.reciprocal of an integer array (C integer division 1/x, truncating) is "
                                   "not supported; use 1 / x for a float result")
    return K.op(prim.DivOp, K.like(x, 1), x)


def _is(kind: str) -> Callable[[Tracer], Tracer]:
    def f(x: Tracer) -> Tracer:
        if not is_floating(x.dtype):
            return K.full(x.graph, kind == "isfinite", np.bool_, x.shape)
        if kind == "isnan":
            return K.isnan(x)
        a = K.op(prim.AbsOp, x)
        return K.compare("eq" if kind == "isinf" else "lt", a, K.like(x, np.inf))
    return f


def _scale(factor: float) -> Callable[[Tracer], Tracer]:
    return lambda x: K.op(prim.MulOp, x, K.like(x, np.asarray(factor, x.dtype)))


def _identity(x: Tracer) -> Tracer:
    return x


def _op(cls: Any) -> Callable[..., Tracer]:
    """The ufunc an op implements (its NUMPY_UFUNC): the op on operands already in the loop dtype."""
    return lambda *xs: K.op(cls, *xs)


#: ufunc name -> its implementation on operands in numpy's loop dtypes. Generated: every registered op's
#: NUMPY_UFUNC (negative, exp, log, sqrt, tanh, subtract, divide, floor_divide, remainder, fmod, power, the
#: bitwise and shift ufuncs of prim_bitwise, ...);
#: then the ufuncs that need more than one op, or bool rules, written here.
ELEMENTWISE: dict[str, Callable[..., Any]] = {
    cls.NUMPY_UFUNC: _op(cls) for cls in registered_ops()
    if cls.NUMPY_UFUNC and cls.NUMPY_UFUNC not in _GUFUNCS and "." not in cls.KIND}  # built-ins: user ops map_op
ELEMENTWISE.update({
    "add": _bool_or(prim.AddOp, K.logical_or), "multiply": _bool_or(prim.MulOp, K.logical_and),
    "divmod": lambda a, b: (K.op(prim.FloorDivOp, a, b), K.op(prim.RemOp, a, b)),
    "float_power": lambda a, b: K.op(prim.PowOp, a, b),
    "maximum": _bool_or(prim.MaxOp, K.logical_or), "minimum": _bool_or(prim.MinOp, K.logical_and),
    "fmax": _fmax(prim.MaxOp), "fmin": _fmax(prim.MinOp), "positive": _identity,
    "absolute": lambda x: x if x.dtype == np.bool_ else K.op(prim.AbsOp, x), "fabs": lambda x: K.op(prim.AbsOp, x),
    "sign": _sign, "square": lambda x: K.op(prim.MulOp, x, x), "reciprocal": _reciprocal,
    "conjugate": _identity,
    "logical_and": lambda a, b: K.logical_and(K.truth(a), K.truth(b)),
    "logical_or": lambda a, b: K.logical_or(K.truth(a), K.truth(b)),
    "logical_xor": lambda a, b: K.compare("ne", K.truth(a), K.truth(b)),
    "logical_not": lambda x: K.logical_not(K.truth(x)),
    "isnan": _is("isnan"), "isinf": _is("isinf"), "isfinite": _is("isfinite"),
    **numpy_rounding.UFUNCS,  # floor, ceil, trunc, rint: exact float compositions (integers as they are)
    "deg2rad": _scale(np.pi / 180), "rad2deg": _scale(180 / np.pi), "heaviside": _heaviside,
    **{name: (lambda pred: lambda a, b: _compare(pred, a, b))(pred) for name, pred in _COMPARE.items()},
})
ELEMENTWISE["radians"], ELEMENTWISE["degrees"] = ELEMENTWISE["deg2rad"], ELEMENTWISE["rad2deg"]

#: why the other ufuncs are refused, and what to use
ADVICE: dict[str, str] = {
    "gcd": "fusebind has no integer gcd op", "lcm": "fusebind has no integer lcm op",
}


def check_mappable(ufunc_name: str, cls: Any) -> None:
    """A user op may implement a numpy ufunc fusebind does not compute yet (np.hypot), never replace one."""
    ufunc = getattr(np, ufunc_name, None)
    if not isinstance(ufunc, np.ufunc) or ufunc_name != ufunc.__name__:
        raise OpRegistrationError(f"register_op: {cls.__qualname__} sets NUMPY_UFUNC = {ufunc_name!r}, which is not "
                                  "the name of a numpy ufunc (ufunc.__name__, e.g. 'hypot')")
    if ufunc_name in ELEMENTWISE or ufunc_name in _GUFUNCS or ufunc.nin != len(cls.get_irdl_definition().operands):
        raise OpRegistrationError(f"register_op: {cls.__qualname__} sets NUMPY_UFUNC = {ufunc_name!r}, which fusebind "
                                  "already computes (or whose operand count differs); leave NUMPY_UFUNC out")


def map_op(cls: Any) -> None:
    """numpy's `cls.NUMPY_UFUNC` on traced arrays is now the user op (checked by check_mappable), in numpy's
    loop dtype when the op takes it."""
    what = f"numpy.{cls.NUMPY_UFUNC}"

    def impl(*xs: Tracer) -> Tracer:
        elem = SUPPORTED[xs[0].dtype]
        if elem not in cls.DTYPES:
            raise unsupported(xs[0].graph, f"{what} of a {xs[0].dtype} array is not supported: {cls.name} takes "
                                           f"{', '.join(sorted(cls.DTYPES))}; cast first: x.astype(np.float32)")
        return K.op(cls, *xs)
    ELEMENTWISE[cls.NUMPY_UFUNC] = impl


# ---------------------------------------------------------------- methods
def _refuse_out_where(graph: Graph, kwargs: dict, what: str) -> None:
    out = kwargs.pop("out", None)
    outs = out if isinstance(out, tuple) else (out,)
    if any(o is not None for o in outs):
        raise unsupported(graph, f"{what}(..., out=...) cannot write into an array inside a traced function "
                                 "(traced arrays are immutable); use the result: y = " + what + "(...)")
    where = kwargs.pop("where", True)
    if where is not True:
        raise unsupported(graph, f"{what}(..., where=...) is not supported on traced arrays (without out= numpy "
                                 "leaves the other elements unset); use fb.where(mask, " + what + "(...), other)")


def call(ufunc: np.ufunc, inputs: tuple, kwargs: dict, what: str | None = None, strong: bool = False,
         symbol: str | None = None) -> Any:
    """`ufunc(*inputs, **kwargs)` on traced operands, as numpy computes it
    (`strong`: Python scalars as numpy arrays, as ufunc.outer takes them;
    `symbol`: the operator's kind in messages, for `a + b`)."""
    name = ufunc.__name__
    what = what or f"numpy.{name}"
    graph = K.graph_of(inputs, kwargs)
    kwargs = dict(kwargs)
    _refuse_out_where(graph, kwargs, what)
    dtype, signature = kwargs.pop("dtype", None), kwargs.pop("signature", None)
    casting = kwargs.pop("casting", "same_kind")
    kwargs.pop("order", None)
    kwargs.pop("subok", None)
    axis = kwargs.pop("axis", -1) if name == "vecdot" else -1  # the summed axis of each operand
    if name in _GUFUNCS:
        for k in ("axes", "axis", "keepdims"):
            if kwargs.pop(k, None) not in (None, False):
                raise unsupported(graph, f"{what}(..., {k}=...) is not supported on traced arrays; move the axes "
                                         "with np.moveaxis first")
    if kwargs:
        raise unsupported(graph, f"{what}() got unexpected keyword arguments {sorted(kwargs)}")
    impl = ELEMENTWISE.get(name)
    if impl is None and name not in _GUFUNCS:
        advice = ADVICE.get(name, "compute it outside the jitted function")
        raise unsupported(graph, f"{what} is not supported by fusebind on traced arrays; {advice}")
    ins, outs = resolve(graph, ufunc, inputs, what, dtype, signature, casting, strong)
    xs = [to_dtype(graph, v, dt, strong) for v, dt in zip(inputs, ins)]
    if impl is None:
        result = K.gufunc(name, xs, what, axis)
    else:
        if len(xs) > 1:
            _check_broadcast(graph, symbol or what, *xs)
        result = impl(*xs)
    results = result if isinstance(result, tuple) else (result,)
    fixed = tuple(K.cast(r, dt) for r, dt in zip(results, outs))  # the loop's output dtype, or dtype=
    for r in fixed:
        if r.value not in (x.value for x in xs):
            r.graph.weak.pop(r.value, None)  # a numpy function returns numpy scalars (strong), not Python ones
    return fixed if isinstance(result, tuple) else fixed[0]


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """`Tracer.__array_ufunc__`."""
    name = f"numpy.{ufunc.__name__}"
    graph = K.graph_of(inputs, kwargs)
    if method == "__call__":
        return call(ufunc, inputs, kwargs)
    if method == "reduce":
        return NUMPY.ufunc_reduce(ufunc, inputs, kwargs)  # numpy_reductions (above this module), bound late
    if method == "accumulate":
        return numpy_scans.ufunc_accumulate(ufunc, inputs, kwargs)
    if method == "outer":
        if ufunc.nin != 2 or ufunc.__name__ in _GUFUNCS:
            raise unsupported(graph, f"{name}.outer: outer product only for binary ufuncs (numpy refuses it too)")
        a, b = inputs  # numpy makes arrays of both (a Python scalar is strong here) and lays a's axes first
        b_nd = np.ndim(b) if not isinstance(b, Tracer) else b.ndim
        if isinstance(a, Tracer) and b_nd:
            a = K.reshape(a, a.shape + (1,) * b_nd)
        elif b_nd and np.ndim(a):
            a = K.reshape(as_tracer(graph, a), np.shape(a) + (1,) * b_nd)
        return call(ufunc, (a, b), kwargs, f"{name}.outer", strong=True)
    reasons = {"reduceat": "fusebind has no segmented reduction; reduce slices with np.sum(x, axis) instead",
               "at": "it writes into its operand in place, and traced arrays are immutable; use "
                     "y = fb.at(x)[idx].add(v) for np.add.at (.mul / .min / .max / .set for the others)"}
    raise unsupported(graph, f"{name}.{method} is not supported on traced arrays: "
                             f"{reasons.get(method, 'unknown ufunc method')}")


# ---------------------------------------------------------------- operators
#: ufunc -> the kind of trace.binary, which gives Python's answer when both operands are Python scalars
_PYTHON_KIND = {np.add: "add", np.subtract: "sub", np.multiply: "mul", np.true_divide: "div", np.power: "pow",
                np.less: "lt", np.less_equal: "le", np.greater: "gt", np.greater_equal: "ge", np.equal: "eq",
                np.not_equal: "ne"}
_OPERATOR_KIND = {**_PYTHON_KIND, np.floor_divide: "floordiv", np.remainder: "mod", np.matmul: "@",
                  np.bitwise_and: "&", np.bitwise_or: "|", np.bitwise_xor: "^", np.left_shift: "<<",
                  np.right_shift: ">>", np.divmod: "divmod"}


def binop(ufunc: np.ufunc, a: Any, b: Any) -> Any:
    """`a <op> b` for a Python operator: numpy's ufunc, or Python's answer for two Python scalars."""
    kind = _PYTHON_KIND.get(ufunc)
    ka, kb = weak_kind(a), weak_kind(b)
    if kind is not None and ka is not None and kb is not None:
        return binary(kind, a, b)
    if ufunc is np.power and isinstance(a, Tracer) and ka is None and kb is not None:
        return _array_power(a, b)
    return call(ufunc, (a, b), {}, symbol=_OPERATOR_KIND.get(ufunc))


def _array_power(x: Tracer, e: Any) -> Any:
    """`array ** python_scalar` as ndarray.__pow__ computes it: numpy takes np.square
    for an int 2 (so bool ** 2 is int8), np.reciprocal for an int -1 and np.sqrt
    for a float 0.5 on float arrays (sqrt(-inf) is NaN, pow(-inf, 0.5) is inf)."""
    floating = is_floating(x.dtype)
    if not isinstance(e, Tracer):
        if type(e) is int and e == 2:
            return call(np.square, (x,), {}, "**")
        if type(e) is int and e == -1 and floating:
            return call(np.reciprocal, (x,), {}, "**")
        if type(e) is float and e == 0.5 and floating:
            return call(np.sqrt, (x,), {}, "**")
        return call(np.power, (x, e), {}, symbol="pow")
    kind = weak_kind(e)
    if kind is int and x.dtype == np.bool_:
        raise unsupported(x.graph, "bool_array ** (a Python int argument): numpy computes ** 2 as np.square (int8) "
                                   "and other powers in int64, so the dtype depends on the value; cast the array "
                                   "first, e.g. x.astype(np.int64) ** n")
    out = call(np.power, (x, e), {}, symbol="pow")
    if kind is float and floating:  # the value decides at run time whether numpy takes np.sqrt
        root = call(np.sqrt, (x,), {}, "**")
        out = K.select(K.compare("eq", to_dtype(x.graph, e, np.dtype(np.float64)),
                                 K.constant(x.graph, 0.5, np.float64)), root, out)
    return out


def inplace(ufunc: np.ufunc, x: Tracer, o: Any) -> Any:
    """`x <op>= o`: numpy's `ufunc(x, o, out=x)`: the result keeps x's dtype
    (casting 'same_kind') and shape. The name is rebound to the new traced
    value; views of x taken earlier do not see it (traced arrays are immutable)."""
    if weak_kind(x) is not None:
        return binop(ufunc, x, o)  # x is a Python scalar in the eager program: Python rebinds it
    graph = x.graph
    what = f"numpy.{ufunc.__name__}"
    keys = [x.dtype, operand_key(graph, o, what)]
    try:
        ufunc.resolve_dtypes((*keys, x.dtype), casting="same_kind")
    except Exception as exc:  # noqa: BLE001 - numpy's UFuncTypeError, in numpy's words
        raise K.from_numpy_error(graph, exc, f"in-place {_OPERATOR_KIND.get(ufunc, what)}") from None
    result = binop(ufunc, x, o)
    if result.shape != x.shape:
        raise K.value_error(graph, f"non-broadcastable output operand with shape {x.shape} doesn't match the "
                                   f"broadcast shape {result.shape}")
    return K.cast(result, x.dtype)


def unary_operator(symbol: str, x: Tracer) -> Any:
    """`-x`, `+x`, `abs(x)`, `~x`: numpy's ufunc; of a Python scalar (weak), Python's answer, a Python
    scalar still (Graph.add keeps -s and abs(s) weak; -True is -1, ~True is -2)."""
    kind = weak_kind(x)
    if symbol == "+":
        return x if kind is not None else call(np.positive, (x,), {}, "unary plus")
    if symbol == "~":
        return binary("sub", -1, x) if kind is not None else call(np.invert, (x,), {}, "~")
    neg = symbol == "-"
    if kind is bool:
        t = weak_bool_as_int(x)
        return unary_operator(symbol, t)
    if kind is not None:
        return x.graph.add((prim.NegOp if neg else prim.AbsOp)(x.value))
    return call(np.negative if neg else np.absolute, (x,), {}, "unary minus" if neg else "abs")
