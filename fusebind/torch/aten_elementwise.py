"""aten's elementwise ops and reductions as numpy on traced values (registered into rules.RULES).

Each rule computes in the dtype torch does (rules.compute_dtype / the node's result dtype) and
hands back to eager whatever fusebind would answer differently: integer division and powers
(torch and numpy disagree on zero divisors and negative exponents), `sign` and `round` of
integers, Python ints outside the tensor's range.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch.fx import Node

import fusebind as fb
from fusebind.torch.rules import (
    FLOATS, aten, cast, compute_dtype, floats_only, int_scalars_fit, meta, rule, wide,
)


def _out(node: Node) -> torch.dtype:
    return meta(node).dtype


# -- binary arithmetic: both operands in torch's common dtype, then numpy's op ------------------------

def _arith(fn: Any) -> Any:
    def impl(node: Node, a: Any, b: Any, alpha: Any = 1) -> Any:
        dt = _out(node)
        b = cast(b, dt)
        if alpha != 1:
            b = b * alpha
        return fn(cast(a, dt), b)
    return impl


def _not_bool_alpha(node: Node) -> str | None:
    alpha = node.kwargs.get("alpha", 1)
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
        return f"{node.target}: alpha={alpha!r}"
    return int_scalars_fit(node)


rule(aten.add.Tensor, aten.add.Scalar, check=_not_bool_alpha)(_arith(np.add))
rule(aten.sub.Tensor, aten.sub.Scalar, check=_not_bool_alpha)(_arith(np.subtract))
rule(aten.mul.Tensor, aten.mul.Scalar, check=int_scalars_fit)(_arith(np.multiply))
rule(aten.maximum.default, check=int_scalars_fit)(_arith(np.maximum))
rule(aten.minimum.default, check=int_scalars_fit)(_arith(np.minimum))


def _true_division(node: Node) -> str | None:
    if _out(node) not in FLOATS:
        return f"{node.target} with an integer result"
    return None


@rule(aten.div.Tensor, aten.div.Scalar, check=_true_division)
def _div(node: Node, a: Any, b: Any) -> Any:
    dt = _out(node)  # int / int is float32 in torch (the default dtype), float64 in numpy: cast first
    return np.divide(cast(a, dt), cast(b, dt))


def _float_mode(node: Node) -> str | None:
    return floats_only(node)


@rule(aten.div.Tensor_mode, aten.div.Scalar_mode, check=_float_mode)
def _div_mode(node: Node, a: Any, b: Any, rounding_mode: str | None = None) -> Any:
    dt = _out(node)
    if rounding_mode == "floor":  # not floor(a / b): torch, as Python and numpy, floors (a - fmod(a, b)) / b
        return np.floor_divide(cast(a, dt), cast(b, dt))
    q = np.divide(cast(a, dt), cast(b, dt))
    if rounding_mode == "trunc":
        return _rounding(np.trunc)(node, q)
    return q


def _float_power(node: Node) -> str | None:
    if _out(node) not in FLOATS:
        return f"{node.target} with an integer result (negative exponents: torch and numpy differ)"
    return None


@rule(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, aten.pow.Scalar, check=_float_power)
def _pow(node: Node, a: Any, b: Any) -> Any:
    dt = _out(node)
    return np.power(cast(a, dt), cast(b, dt))


# -- comparisons and logic: compared in torch's common dtype, a bool result ---------------------------

def _compare(fn: Any) -> Any:
    def impl(node: Node, a: Any, b: Any) -> Any:
        dt = compute_dtype(node.args[0], node.args[1])
        return fn(cast(a, dt), cast(b, dt))
    return impl


for _name, _fn in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                   ("gt", np.greater), ("ge", np.greater_equal)):
    _op = getattr(aten, _name)
    rule(_op.Tensor, _op.Scalar, check=int_scalars_fit)(_compare(_fn))


def _logical(fn: Any) -> Any:
    def impl(node: Node, a: Any, b: Any) -> Any:
        return fn(cast(a, torch.bool), cast(b, torch.bool))
    return impl


rule(aten.logical_and.default)(_logical(np.logical_and))
rule(aten.logical_or.default)(_logical(np.logical_or))
rule(aten.logical_xor.default)(_logical(np.logical_xor))


@rule(aten.logical_not.default)
def _logical_not(node: Node, x: Any) -> Any:
    return np.logical_not(cast(x, torch.bool))


@rule(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar, check=int_scalars_fit)
def _where(node: Node, cond: Any, a: Any, b: Any) -> Any:
    dt = _out(node)
    return np.where(cast(cond, torch.bool), cast(a, dt), cast(b, dt))


@rule(aten.clamp.default, aten.clamp.Tensor, check=int_scalars_fit)
def _clamp(node: Node, x: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002 (aten's names)
    dt = _out(node)
    y = cast(x, dt)
    if min is not None:
        y = np.maximum(y, cast(min, dt))
    if max is not None:  # applied last: min > max gives max, as torch
        y = np.minimum(y, cast(max, dt))
    return y


@rule(aten.clamp_min.default, aten.clamp_min.Tensor, check=int_scalars_fit)
def _clamp_min(node: Node, x: Any, m: Any) -> Any:
    return np.maximum(cast(x, _out(node)), cast(m, _out(node)))


@rule(aten.clamp_max.default, aten.clamp_max.Tensor, check=int_scalars_fit)
def _clamp_max(node: Node, x: Any, m: Any) -> Any:
    return np.minimum(cast(x, _out(node)), cast(m, _out(node)))


# -- unary: the operand in the result's dtype (exp(int) is float32 in torch), then the function -------

def _float_unary(*pairs: tuple[Any, Any]) -> None:
    for target, fn in pairs:
        def impl(node: Node, x: Any, fn: Any = fn) -> Any:
            return fn(cast(x, _out(node)))
        rule(target, check=_true_division)(impl)


_float_unary(
    (aten.exp.default, np.exp), (aten.exp2.default, np.exp2), (aten.expm1.default, np.expm1),
    (aten.log.default, np.log), (aten.log2.default, np.log2), (aten.log10.default, np.log10),
    (aten.log1p.default, np.log1p), (aten.sqrt.default, np.sqrt), (aten.rsqrt.default, lambda x: 1 / np.sqrt(x)),
    (aten.sin.default, np.sin), (aten.cos.default, np.cos), (aten.tan.default, np.tan),
    (aten.tanh.default, np.tanh), (aten.sigmoid.default, fb.sigmoid), (aten.erf.default, fb.erf),
    (aten.reciprocal.default, np.reciprocal),
)


def _float_operand(node: Node) -> str | None:
    return floats_only(node)


def _rounding(fn: Any) -> Any:
    def impl(node: Node, x: Any) -> Any:
        if x.dtype.itemsize == 2:  # fusebind rounds f32/f64 only; a narrow value's rounding is exact in f32
            return fn(x.astype(np.float32)).astype(x.dtype)
        return fn(x)
    return impl


for _target, _fn in ((aten.floor.default, np.floor), (aten.ceil.default, np.ceil), (aten.trunc.default, np.trunc),
                     (aten.round.default, np.rint)):  # torch rounds half to even, as rint
    rule(_target, check=_float_operand)(_rounding(_fn))


def _signed(node: Node) -> str | None:
    if _out(node) in (torch.bool, torch.uint8):
        return f"{node.target} on {_out(node)}"
    return None


@rule(aten.neg.default, check=_signed)
def _neg(node: Node, x: Any) -> Any:
    return np.negative(x)


@rule(aten.abs.default, check=_signed)
def _abs(node: Node, x: Any) -> Any:
    return np.abs(x)


@rule(aten.relu.default, check=_signed)
def _relu(node: Node, x: Any) -> Any:
    return np.maximum(x, 0)  # NaN stays NaN, as torch


@rule(aten.gelu.default, check=_float_operand)
def _gelu(node: Node, x: Any, approximate: str = "none") -> Any:
    if approximate == "tanh":
        return fb.gelu(x)  # the catalog's tanh form (one fused pattern)
    return 0.5 * x * (1.0 + fb.erf(x * (1.0 / math.sqrt(2.0))))


@rule(aten.silu.default, check=_float_operand)
def _silu(node: Node, x: Any) -> Any:
    return x * fb.sigmoid(x)


@rule(aten.leaky_relu.default, check=_float_operand)
def _leaky_relu(node: Node, x: Any, slope: float = 0.01) -> Any:
    return np.where(x > 0, x, x * slope)


@rule(aten.hardtanh.default, check=_float_operand)
def _hardtanh(node: Node, x: Any, lo: float = -1.0, hi: float = 1.0) -> Any:
    return np.minimum(np.maximum(x, lo), hi)


# -- reductions: over torch's dims (none or [] is every dim), in the result's dtype ------------------

def _axes(x: Any, dim: Any) -> Any:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0) or x.ndim == 0:
        return None
    return tuple(dim) if isinstance(dim, (list, tuple)) else int(dim)


@rule(aten.sum.dim_IntList, aten.sum.default)
def _sum(node: Node, x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
    return np.sum(cast(x, _out(node)), axis=_axes(x, dim), keepdims=keepdim)


@rule(aten.mean.dim, aten.mean.default, check=_float_operand)
def _mean(node: Node, x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
    return cast(np.mean(wide(cast(x, _out(node))), axis=_axes(x, dim), keepdims=keepdim), _out(node))


@rule(aten.amax.default)
def _amax(node: Node, x: Any, dim: Any = (), keepdim: bool = False) -> Any:
    return np.max(x, axis=_axes(x, dim), keepdims=keepdim)


@rule(aten.amin.default)
def _amin(node: Node, x: Any, dim: Any = (), keepdim: bool = False) -> Any:
    return np.min(x, axis=_axes(x, dim), keepdims=keepdim)


@rule(aten.any.dim, aten.any.dims, aten.any.default)
def _any(node: Node, x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return np.any(cast(x, torch.bool), axis=_axes(x, dim), keepdims=keepdim)


@rule(aten.all.dim, aten.all.dims, aten.all.default)
def _all(node: Node, x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return np.all(cast(x, torch.bool), axis=_axes(x, dim), keepdims=keepdim)


@rule(aten.var.correction, check=_float_operand)
def _var(node: Node, x: Any, dim: Any = None, *, correction: Any = None, keepdim: bool = False) -> Any:
    ddof = 1 if correction is None else correction
    return cast(np.var(wide(x), axis=_axes(x, dim), ddof=ddof, keepdims=keepdim), _out(node))


def _arg(fn: Any) -> Any:
    def impl(node: Node, x: Any, dim: Any = None, keepdim: bool = False) -> Any:
        if dim is None:
            r = fn(np.reshape(x, (-1,)))
            r = np.reshape(r, (1,) * x.ndim) if keepdim else r
        else:
            r = fn(x, axis=int(dim))
            r = np.expand_dims(r, int(dim)) if keepdim else r
        return cast(r, _out(node))
    return impl


rule(aten.argmax.default)(_arg(np.argmax))
rule(aten.argmin.default)(_arg(np.argmin))


# -- bitwise (integers and bool): in the result's dtype, as torch ---------------------------------------

def _integral(node: Node) -> str | None:
    for t in [a for a in node.args if isinstance(a, Node)] + [node]:
        if meta(t).dtype in FLOATS:
            return f"{node.target} on {meta(t).dtype}"
    return int_scalars_fit(node)


for _name, _fn in (("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or), ("bitwise_xor", np.bitwise_xor)):
    _op = getattr(aten, _name)
    rule(_op.Tensor, _op.Scalar, check=_integral)(_arith(_fn))


@rule(aten.bitwise_not.default, check=_integral)
def _bitwise_not(node: Node, x: Any) -> Any:
    return np.logical_not(x) if _out(node) == torch.bool else np.invert(x)


@rule(aten.max.default)
def _max_all(node: Node, x: Any) -> Any:
    return np.max(x)


@rule(aten.min.default)
def _min_all(node: Node, x: Any) -> Any:
    return np.min(x)


def _norm_check(node: Node) -> str | None:
    ord_ = node.args[1] if len(node.args) > 1 else node.kwargs.get("ord", 2)
    if ord_ not in (1, 2, float("inf")):
        return f"linalg_vector_norm of order {ord_}"
    if node.kwargs.get("dtype") is not None:
        return "linalg_vector_norm with a dtype"
    return floats_only(node)


@rule(aten.linalg_vector_norm.default, check=_norm_check)
def _vector_norm(node: Node, x: Any, ord: Any = 2, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
                 dtype: Any = None) -> Any:
    axes = _axes(x, dim)
    if ord == 1:
        return np.sum(np.abs(x), axis=axes, keepdims=keepdim)
    if ord == 2:
        return np.sqrt(np.sum(x * x, axis=axes, keepdims=keepdim))
    return np.max(np.abs(x), axis=axes, keepdims=keepdim)


@rule(aten.elu.default, check=_float_operand)
def _elu(node: Node, x: Any, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> Any:
    return np.where(x > 0, x * scale, np.expm1(x * input_scale) * (alpha * scale))
