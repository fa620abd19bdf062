"""ONNX handlers for quantization: QuantizeLinear / DequantizeLinear (per tensor, per axis, blocked),
DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, as the spec's reference computes them (round half
to even, then saturation to the code type; the float arithmetic in the reference's dtypes).

The float8 / int4 / int2 code types are element types fusebind does not have: the importer refuses
them by name before a handler runs.
Must not: build the elementwise ops themselves (ops_math.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.onnx.ops_math import _elem_dtype
from fusebind.onnx.registry import NodeContext, onnx_op

# ---- quantization: integer codes <-> floats, with the reference's rounding and saturation ------

_RINT = np.rint  # round half to even, as the reference


def _q_param(v: Any, shape: tuple[int, ...], axis: int, block: int) -> Any:
    """A scale or zero point broadcastable to `shape`: per tensor, per `axis`, or blocked along it."""
    if v.ndim == 0:
        return v
    if int(v.size) == 1:
        return np.reshape(v, ())
    if not block:
        dims = [1] * len(shape)
        dims[axis] = int(v.size)
        return np.reshape(v, tuple(dims))
    v = np.repeat(v, block, axis=axis)
    if int(v.shape[axis]) != shape[axis]:  # the last block is partial
        v = np.take(v, np.arange(shape[axis]), axis=axis)
    return v


def _q_layout(ctx: NodeContext, x: Any) -> tuple[tuple[int, ...], int, int]:
    """(x's shape, the normalized `axis` attribute, `block_size`): where scales and zero points apply."""
    shape = tuple(int(d) for d in x.shape)
    axis = int(ctx.attr("axis", 1))
    return shape, axis + len(shape) if axis < 0 else axis, int(ctx.attr("block_size", 0))


def _saturate(ctx: NodeContext, x: Any, dtype: np.dtype) -> Any:
    if dtype.kind not in "iu":
        raise ctx.unsupported(f"quantization to {dtype}")
    info = np.iinfo(dtype)
    return np.clip(x, info.min, info.max).astype(dtype)


@onnx_op("DequantizeLinear")
def dequantize_linear(ctx: NodeContext, x: Any, scale: Any, zero_point: Any = None) -> Any:
    shape, axis, block = _q_layout(ctx, x)
    dx = x.astype(np.float32)
    if zero_point is not None:
        dx = dx - _q_param(zero_point, shape, axis, block).astype(np.float32)
    y = dx * _q_param(scale, shape, axis, block)
    out = _elem_dtype(ctx, ctx.attr("output_dtype")) if ctx.attr("output_dtype") else scale.dtype
    return y.astype(out)


@onnx_op("QuantizeLinear")
def quantize_linear(ctx: NodeContext, x: Any, scale: Any, zero_point: Any = None) -> Any:
    shape, axis, block = _q_layout(ctx, x)
    if zero_point is not None:
        dtype = zero_point.dtype
    elif ctx.attr("output_dtype"):
        dtype = _elem_dtype(ctx, ctx.attr("output_dtype"))
    else:
        dtype = np.dtype(np.uint8)
    s = _q_param(scale, shape, axis, block)
    if ctx.attr("precision"):
        p = _elem_dtype(ctx, ctx.attr("precision"))
        xs = x.astype(p) / s.astype(p)
    else:
        xs = x / s
    xi = _RINT(xs).astype(np.int32)
    if zero_point is not None:
        xi = xi + _q_param(zero_point, shape, axis, block).astype(np.int32)
    return _saturate(ctx, xi, np.dtype(dtype))


@onnx_op("DynamicQuantizeLinear")
def dynamic_quantize_linear(ctx: NodeContext, x: Any) -> Any:
    f32 = np.float32
    maxx = np.maximum(np.zeros((), f32), np.max(x).astype(f32))
    minx = np.minimum(np.zeros((), f32), np.min(x).astype(f32))
    span = maxx - minx
    scale = np.where(span == 0, np.ones((), f32), span) / np.asarray(255, f32)
    zp = _RINT(np.clip(np.zeros((), f32) - minx / scale, f32(0), f32(255)))
    y = np.clip(_RINT(x / scale) + zp, f32(0), f32(255))
    return y.astype(np.uint8), scale.astype(x.dtype), zp.astype(np.uint8)


@onnx_op("MatMulInteger")
def matmul_integer(ctx: NodeContext, a: Any, b: Any, a_zero: Any = None, b_zero: Any = None) -> Any:
    a32, b32 = a.astype(np.int32), b.astype(np.int32)
    if a_zero is not None:
        a32 = a32 - a_zero.astype(np.int32)
    if b_zero is not None:
        b32 = b32 - b_zero.astype(np.int32)
    return np.matmul(a32, b32)


@onnx_op("QLinearMatMul")
def qlinear_matmul(ctx: NodeContext, a: Any, a_scale: Any, a_zero: Any, b: Any, b_scale: Any, b_zero: Any,
                   y_scale: Any, y_zero: Any = None) -> Any:
    c = matmul_integer(ctx, a, b, a_zero, b_zero)
    d = c * (a_scale * b_scale / y_scale)  # int32 times a float 0-d array: float64, as the reference
    if y_zero is not None:
        d = d + y_zero
    return _saturate(ctx, _RINT(d), np.dtype(y_zero.dtype if y_zero is not None else a.dtype))
