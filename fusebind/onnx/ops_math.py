"""ONNX handlers for elementwise math, logic, comparison and casts, reductions, arg-reductions,
MatMul / Gemm, Clip and Where.

Each handler takes its node's inputs (traced arrays, or numpy arrays when constant at import) and
writes numpy on them, so the same code builds prim IR and folds constants. Where ONNX and numpy
differ, the ONNX meaning is built explicitly:
- integer `Div` truncates toward zero (numpy's `//` floors);
- `Mod` is numpy's `remainder` (sign of the divisor) for fmod=0 and `fmod` (sign of the dividend)
  for fmod=1;
- `Pow`'s result has the base's element type (numpy would promote int ** float, f32 ** i64);
- reductions keep the input's element type (numpy's sum of int32 is int64, mean of ints float64)
  and give the ONNX value of an empty reduction (ReduceMax of nothing is -inf, ReduceProd 1);
- `Gemm`'s C broadcasts to (M, N) one way only; `ArgMax`'s select_last_index.
`Cast` is numpy's astype: its saturation rules concern the float8 types, which fusebind does not have
(the importer refuses those element types by name).

Must not: build shape/layout/indexing ops (ops_shape.py) or composites (ops_nn.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import fusebind as fb
from fusebind.onnx.dtypes import numpy_dtype_of
from fusebind.onnx.registry import NodeContext, onnx_op


def _is_const(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic))


def _elem_dtype(ctx: NodeContext, to: int) -> np.dtype:
    return numpy_dtype_of(int(to), ctx.where())


def _legacy_broadcast(ctx: NodeContext) -> None:
    """Opsets < 7 broadcast with `broadcast`/`axis` attributes; an explicit axis is not numpy's rule."""
    if ctx.opset < 7 and ctx.attr("broadcast", 0) and ctx.attr("axis") is not None:
        raise ctx.unsupported("the legacy broadcast with an explicit axis (opset < 7)")


# ---- unary elementwise -------------------------------------------------------------------------

def _sigmoid(x: Any) -> Any:
    return 1 / (1 + np.exp(-x))


def _erf(x: Any) -> Any:
    if _is_const(x):
        return np.vectorize(math.erf, otypes=[x.dtype])(x).astype(x.dtype)
    return fb.erf(x)


_UNARY = {
    "Abs": np.abs, "Neg": np.negative, "Exp": np.exp, "Log": np.log, "Sqrt": np.sqrt,
    "Floor": np.floor, "Ceil": np.ceil, "Sin": np.sin, "Cos": np.cos, "Tan": np.tan, "Asin": np.arcsin,
    "Acos": np.arccos, "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh, "Asinh": np.arcsinh,
    "Acosh": np.arccosh, "Atanh": np.arctanh, "Sign": np.sign, "Tanh": np.tanh, "Sigmoid": _sigmoid,
    "Not": np.logical_not, "IsNaN": np.isnan, "BitwiseNot": np.invert, "Erf": _erf,
    # ONNX Round is round half to even: numpy's rint
    "Round": np.rint,
}


def _unary(ctx: NodeContext, x: Any) -> Any:
    return _UNARY[ctx.op_type](x)


onnx_op(*_UNARY)(_unary)


@onnx_op("Reciprocal")
def reciprocal(ctx: NodeContext, x: Any) -> Any:
    return np.reciprocal(x) if x.dtype.kind == "f" else 1 // x


@onnx_op("Relu")
def relu(ctx: NodeContext, x: Any) -> Any:
    return np.maximum(x, 0)


@onnx_op("IsInf")
def isinf(ctx: NodeContext, x: Any) -> Any:
    pos, neg = ctx.attr("detect_positive", 1), ctx.attr("detect_negative", 1)
    if pos and neg:
        return np.isinf(x)
    if pos:
        return np.isposinf(x)
    if neg:
        return np.isneginf(x)
    return np.zeros_like(x, dtype=bool)


# ---- binary elementwise ------------------------------------------------------------------------

_BINARY = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "And": np.logical_and, "Or": np.logical_or,
    "Xor": np.logical_xor, "Equal": np.equal, "Less": np.less, "LessOrEqual": np.less_equal,
    "Greater": np.greater, "GreaterOrEqual": np.greater_equal, "BitwiseAnd": np.bitwise_and,
    "BitwiseOr": np.bitwise_or, "BitwiseXor": np.bitwise_xor,
}


def _binary(ctx: NodeContext, a: Any, b: Any) -> Any:
    _legacy_broadcast(ctx)
    return _BINARY[ctx.op_type](a, b)


onnx_op(*_BINARY)(_binary)


def trunc_divide(a: Any, b: Any) -> Any:
    """Integer division truncating toward zero (C's, ONNX's): numpy's floor quotient, plus one where
    the remainder is not zero and the operands' signs differ."""
    q = np.floor_divide(a, b)
    if a.dtype.kind == "u":
        return q
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return np.where(fix, q + 1, q)


@onnx_op("Div")
def div(ctx: NodeContext, a: Any, b: Any) -> Any:
    _legacy_broadcast(ctx)
    if a.dtype.kind in "iu":
        return trunc_divide(a, b)
    return np.divide(a, b)


@onnx_op("Mod")
def mod(ctx: NodeContext, a: Any, b: Any) -> Any:
    # fmod=0 is Python's/numpy's remainder (the divisor's sign; defined for floats since opset 28)
    return np.fmod(a, b) if ctx.attr("fmod", 0) else np.remainder(a, b)


@onnx_op("Pow")
def power(ctx: NodeContext, a: Any, b: Any) -> Any:
    _legacy_broadcast(ctx)
    if a.dtype == b.dtype:
        return np.power(a, b)
    if a.dtype.kind == "f":
        return np.power(a, b.astype(a.dtype))
    # an integer base with another exponent type: computed in the common type, the base's type out
    wide = np.result_type(a.dtype, b.dtype)
    return np.power(a.astype(wide), b.astype(wide)).astype(a.dtype)


@onnx_op("BitShift")
def bitshift(ctx: NodeContext, a: Any, b: Any) -> Any:
    direction = ctx.attr("direction")
    if direction == "LEFT":
        return np.left_shift(a, b)
    if direction == "RIGHT":
        return np.right_shift(a, b)
    raise ctx.unsupported(f"the direction {direction!r}")


def _variadic(ctx: NodeContext, fn: Any, args: tuple[Any, ...]) -> Any:
    vals = [a for a in args if a is not None]
    if not vals:
        raise ctx.unsupported("no inputs")
    out = vals[0]
    for v in vals[1:]:
        out = fn(out, v)
    return out


@onnx_op("Sum")
def sum_(ctx: NodeContext, *args: Any) -> Any:
    return _variadic(ctx, np.add, args)


@onnx_op("Mean")
def mean(ctx: NodeContext, *args: Any) -> Any:
    vals = [a for a in args if a is not None]
    return _variadic(ctx, np.add, args) / np.asarray(len(vals), dtype=vals[0].dtype)


@onnx_op("Max")
def maximum(ctx: NodeContext, *args: Any) -> Any:
    return _variadic(ctx, np.maximum, args)


@onnx_op("Min")
def minimum(ctx: NodeContext, *args: Any) -> Any:
    return _variadic(ctx, np.minimum, args)


@onnx_op("Where")
def where(ctx: NodeContext, cond: Any, a: Any, b: Any) -> Any:
    return np.where(cond, a, b)


@onnx_op("Clip")
def clip(ctx: NodeContext, x: Any, lo: Any = None, hi: Any = None) -> Any:
    if ctx.opset < 11:
        lo, hi = ctx.attr("min"), ctx.attr("max")
        lo = None if lo is None else np.asarray(lo, dtype=x.dtype)
        hi = None if hi is None else np.asarray(hi, dtype=x.dtype)
    out = x
    if lo is not None:
        out = np.maximum(out, lo)
    if hi is not None:
        out = np.minimum(out, hi)
    return out


# ---- casts ---------------------------------------------------------------------------------------

@onnx_op("Cast")
def cast(ctx: NodeContext, x: Any) -> Any:
    return x.astype(_elem_dtype(ctx, ctx.attr("to")))


@onnx_op("CastLike")
def cast_like(ctx: NodeContext, x: Any, like: Any) -> Any:
    return x.astype(like.dtype)


# ---- reductions ----------------------------------------------------------------------------------

#: op -> (since which opset axes are an input, the value of an empty reduction)
_REDUCE_AXES_INPUT = {"ReduceSum": 13}


def _axes(ctx: NodeContext, x: Any, axes_in: Any) -> tuple[int, ...] | None:
    """The reduced axes (normalized, sorted), or None for "every axis"; () for the noop."""
    since = _REDUCE_AXES_INPUT.get(ctx.op_type, 18)
    if ctx.opset >= since:
        if axes_in is None:
            axes = None
        elif not _is_const(axes_in):
            raise ctx.unsupported("axes that are not constant at import")
        else:
            axes = [int(a) for a in np.asarray(axes_in).reshape(-1)]
    else:
        axes = ctx.attr("axes")
    if not axes:
        return () if ctx.attr("noop_with_empty_axes", 0) else None
    return tuple(sorted(a + x.ndim if a < 0 else a for a in axes))


def _empty_value(op: str, dtype: np.dtype) -> Any:
    if op in ("ReduceSum", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceMean"):
        return 0 if op != "ReduceMean" else np.nan
    if op == "ReduceProd":
        return 1
    if op in ("ReduceMax", "ReduceLogSum", "ReduceLogSumExp"):
        return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min if dtype.kind in "iu" else False
    if op == "ReduceMin":
        return np.inf if dtype.kind == "f" else np.iinfo(dtype).max if dtype.kind in "iu" else True
    raise KeyError(op)


def _reduce(ctx: NodeContext, x: Any, axes_in: Any = None) -> Any:
    op = ctx.op_type
    axes = _axes(ctx, x, axes_in)
    if axes == ():
        return x
    keep = bool(ctx.attr("keepdims", 1))
    red = tuple(range(x.ndim)) if axes is None else axes
    shape = tuple(int(d) for d in x.shape)
    if any(shape[a] == 0 for a in red):
        out_shape = tuple(1 if i in red else d for i, d in enumerate(shape)) if keep else \
            tuple(d for i, d in enumerate(shape) if i not in red)
        return np.full(out_shape, _empty_value(op, x.dtype), dtype=x.dtype)
    dt = x.dtype
    if op == "ReduceSum":
        out = np.sum(x, axis=red, keepdims=keep)
    elif op == "ReduceMean":
        out = np.mean(x, axis=red, keepdims=keep)
    elif op == "ReduceMax":
        out = np.max(x, axis=red, keepdims=keep)
    elif op == "ReduceMin":
        out = np.min(x, axis=red, keepdims=keep)
    elif op == "ReduceProd":
        out = np.prod(x, axis=red, keepdims=keep)
    elif op == "ReduceL1":
        out = np.sum(np.abs(x), axis=red, keepdims=keep)
    elif op == "ReduceL2":
        out = np.sqrt(np.sum(x * x, axis=red, keepdims=keep))
    elif op == "ReduceSumSquare":
        out = np.sum(x * x, axis=red, keepdims=keep)
    elif op == "ReduceLogSum":
        out = np.log(np.sum(x, axis=red, keepdims=keep))
    elif op == "ReduceLogSumExp":
        # shifted by the max (as the reference does), so large inputs do not overflow exp
        m = np.max(x, axis=red, keepdims=True)
        m = np.where(np.isinf(m), np.zeros((), dt), m)
        out = np.log(np.sum(np.exp(x - m), axis=red, keepdims=True)) + m
        if not keep:
            out = np.squeeze(out, axis=red)
    else:
        raise ctx.unsupported("not a reduction")
    return out if out.dtype == dt else out.astype(dt)


onnx_op("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
        "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")(_reduce)


def _arg(ctx: NodeContext, x: Any) -> Any:
    axis = int(ctx.attr("axis", 0))
    axis = axis + x.ndim if axis < 0 else axis
    keep = bool(ctx.attr("keepdims", 1))
    fn = np.argmax if ctx.op_type == "ArgMax" else np.argmin
    if ctx.attr("select_last_index", 0):
        n = int(x.shape[axis])
        idx = (n - 1) - fn(np.flip(x, axis=axis), axis=axis)
    else:
        idx = fn(x, axis=axis)
    idx = idx.astype(np.int64)
    return np.expand_dims(idx, axis) if keep else idx


onnx_op("ArgMax", "ArgMin")(_arg)


#: TopK compares every pair along its axis: beyond this length it is refused rather than built
TOPK_LIMIT = 1024


@onnx_op("TopK", since=10)
def topk(ctx: NodeContext, x: Any, k_in: Any) -> Any:
    """The k largest (smallest) along the axis, sorted, ties to the lower index (the spec's order),
    by ranks: an element's rank is the count of elements before it in that order (a pairwise
    comparison, so values and indices are exact; fusebind has no sort)."""
    if not _is_const(k_in):
        raise ctx.unsupported("a k computed from the model's inputs")
    k = int(np.asarray(k_in).reshape(-1)[0])
    axis = int(ctx.attr("axis", -1)) % x.ndim
    n = int(x.shape[axis])
    if n > TOPK_LIMIT:
        raise ctx.unsupported(f"TopK along {n} elements (fusebind ranks pairwise; at most {TOPK_LIMIT})")
    v = np.moveaxis(x, axis, -1)
    a, b = np.expand_dims(v, -1), np.expand_dims(v, -2)  # a[..., i, 0] vs b[..., 0, j]
    before = (b > a) if ctx.attr("largest", 1) else (b < a)
    j_lt_i = np.arange(n)[None, :] < np.arange(n)[:, None]
    rank = np.sum(before | ((b == a) & j_lt_i), axis=-1)  # [..., n]
    pick = np.expand_dims(rank, -2) == np.arange(k)[:, None]  # [..., k, n]: the element of rank r
    values = np.sum(np.where(pick, np.expand_dims(v, -2), np.zeros((), x.dtype)), axis=-1).astype(x.dtype)
    index = np.sum(np.where(pick, np.arange(n, dtype=np.int64), np.zeros((), np.int64)), axis=-1)
    return np.moveaxis(values, -1, axis), np.moveaxis(index, -1, axis)


# ---- matrix products -------------------------------------------------------------------------------

@onnx_op("MatMul")
def matmul(ctx: NodeContext, a: Any, b: Any) -> Any:
    return np.matmul(a, b)


@onnx_op("Gemm")
def gemm(ctx: NodeContext, a: Any, b: Any, c: Any = None) -> Any:
    if ctx.attr("transA", 0):
        a = np.swapaxes(a, 0, 1)
    if ctx.attr("transB", 0):
        b = np.swapaxes(b, 0, 1)
    alpha, beta = ctx.attr("alpha", 1.0), ctx.attr("beta", 1.0)
    out = np.matmul(a, b)
    if alpha != 1.0:
        out = out * np.asarray(alpha, dtype=out.dtype)
    if c is not None and beta != 0.0:
        # C broadcasts to (M, N) one way: numpy's rule gives that shape for every C the spec allows
        out = out + (c if beta == 1.0 else c * np.asarray(beta, dtype=c.dtype))
    return out


# ---- losses: a gather of the target class, weighted, reduced ---------------------------------

def _class_loss(ctx: NodeContext, logp: Any, target: Any, weight: Any) -> Any:
    """NegativeLogLikelihoodLoss over log-probabilities `logp` [N, C, d...] and `target` [N, d...],
    as the spec's reference computes it: -logp[n, target, d] * weight[target], ignore_index giving
    0 loss and 0 weight; reduction none | sum | mean (mean divides by the summed weights)."""
    reduction = ctx.attr("reduction", "mean")
    ignore = ctx.attr("ignore_index")
    n, c = int(logp.shape[0]), int(logp.shape[1])
    x3 = np.reshape(logp, (n, c, -1))
    t2 = np.reshape(target, (n, -1))
    keep = None if ignore is None else t2 != np.asarray(ignore, dtype=t2.dtype)
    safe = t2 if keep is None else np.where(keep, t2, np.zeros((), t2.dtype))  # an ignored class may be out of range
    picked = np.take_along_axis(x3, np.expand_dims(safe, 1), axis=1)
    loss = -np.reshape(picked, (n, -1))
    w = None
    if weight is not None:
        w = np.take(weight, safe)
        if keep is not None:
            w = np.where(keep, w, np.zeros((), w.dtype))
    elif keep is not None:
        w = keep.astype(logp.dtype)
    if w is not None:
        loss = loss * w
    loss = np.reshape(loss, tuple(int(d) for d in target.shape))
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.sum(loss)
    if reduction != "mean":
        raise ctx.unsupported(f"the reduction {reduction!r}")
    return np.sum(loss) / np.sum(w) if w is not None else np.mean(loss)


@onnx_op("NegativeLogLikelihoodLoss")
def nll_loss(ctx: NodeContext, x: Any, target: Any, weight: Any = None) -> Any:
    return _class_loss(ctx, x, target, weight)


@onnx_op("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(ctx: NodeContext, x: Any, target: Any, weight: Any = None) -> Any:
    # log-softmax along the class axis, shifted by the max as the reference does
    shifted = x - np.max(x, axis=1, keepdims=True)
    logp = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    loss = _class_loss(ctx, logp, target, weight)
    return (loss, logp) if len([o for o in ctx.node.output if o]) > 1 else loss


__all__ = ["trunc_divide"]
