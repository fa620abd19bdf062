"""ONNX `Resize` (opsets 10..): nearest, linear and cubic interpolation with every coordinate
transformation mode, antialiasing, `exclude_outside`, `tf_crop_and_resize`'s extrapolation,
`keep_aspect_ratio_policy` and `axes`, as the reference computes it (onnx/reference/ops/op_resize.py).

Resize is separable: each resized axis is one step. Its source coordinates, neighbour indices
and weights depend only on the shapes and the (constant) scales, sizes and roi, so they are
numpy constants; the step on the data is one gather of the neighbours along the axis (constant
indices), a multiply by the weights and a sum over the taps, which fusion sees as prims. Like
the reference, the data is computed in float64 and cast back (integers rounded and saturated).
Must not: take scales, sizes or roi computed from the model's inputs (UnsupportedModel).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from fusebind.onnx.values import const_array, const_inputs, norm_axis
from fusebind.onnx.registry import NodeContext, onnx_op

Coeffs = Callable[[float, float], np.ndarray]


def _nearest(mode: str) -> Coeffs:
    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if float(ratio).is_integer():
            return np.array([0, 1])
        return {"round_prefer_floor": np.array([ratio <= 0.5, ratio > 0.5]),
                "round_prefer_ceil": np.array([ratio < 0.5, ratio >= 0.5]),
                "floor": np.array([1, 0]), "ceil": np.array([0, 1])}[mode]
    return coeffs


def _linear(antialias: bool) -> Coeffs:
    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            return np.array([1 - ratio, ratio])
        scale = min(scale, 1.0)
        start = int(np.floor(-1 / scale) + 1)
        w = np.clip(1 - np.abs((np.arange(start, start + 2 - 2 * start) - ratio) * scale), 0, 1)
        return w / w.sum()
    return coeffs


def _cubic(a: float, antialias: bool) -> Coeffs:
    def kernel(x: float) -> float:
        x = abs(x)
        if x <= 1:
            return (a + 2) * x ** 3 - (a + 3) * x * x + 1
        return a * x ** 3 - 5 * a * x * x + 8 * a * x - 4 * a if x < 2 else 0.0

    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            return np.array([kernel(ratio + 1), kernel(ratio), kernel(1 - ratio), kernel(2 - ratio)])
        scale = min(scale, 1.0)
        start = int(np.floor(-2 / scale) + 1)
        w = np.array([kernel(scale * (i - ratio)) for i in range(start, 2 - start)])
        return w / w.sum()
    return coeffs


def _source(mode: str, y: np.ndarray, scale: float, n_in: int, n_out: int, roi: Any) -> tuple[np.ndarray, Any]:
    """Each output index's source coordinate, and (tf_crop_and_resize) which fall outside."""
    width = scale * n_in
    if mode == "align_corners":
        return (np.zeros(n_out) if width == 1 else y * (n_in - 1) / (width - 1)), None
    if mode == "asymmetric":
        return y / scale, None
    if mode == "tf_crop_and_resize":
        x = np.full(n_out, (roi[1] - roi[0]) * (n_in - 1) / 2) if width == 1 else \
            y * (roi[1] - roi[0]) * (n_in - 1) / (width - 1)
        x = x + roi[0] * (n_in - 1)
        return x, (x < 0) | (x > n_in - 1)
    if mode == "pytorch_half_pixel":
        return (np.full(n_out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5), None
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if mode == "half_pixel_symmetric":
        return n_in / 2 * (1 - n_out / width) + (y + 0.5) / scale - 0.5, None
    raise ValueError(mode)


def _along(ctx: NodeContext, data: Any, axis: int, scale: float, n_out: int, coeffs: Coeffs, roi: Any) -> Any:
    """One axis resized: gather the taps (constant indices), weight them, sum them."""
    n_in = data.shape[axis]
    x, outside = _source(ctx.attr("coordinate_transformation_mode", "half_pixel" if ctx.opset >= 11 else "asymmetric"),
                         np.arange(n_out, dtype=np.float64), scale, n_in, n_out, roi)
    base = np.floor(x).astype(np.int64)
    ratios = np.where(x == base, 1.0, x - base)
    w = np.array([coeffs(float(r), scale) for r in ratios], dtype=np.float64)
    taps = w.shape[1]
    pad = int(np.ceil(taps / 2))
    padded = x + pad
    p = np.floor(padded).astype(np.int64)
    frac = padded - p
    if taps % 2 == 0:
        offset = np.where(frac == 0, -(taps // 2), -(taps // 2) + 1)
    else:
        offset = np.where(frac <= 0.5, -((taps - 1) // 2), -((taps - 1) // 2) + 1)
    idx = (p + offset)[:, None] + np.arange(taps)[None, :] - pad
    if ctx.attr("exclude_outside", 0):
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        total = w.sum(axis=-1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    gathered = np.take(data, np.clip(idx, 0, n_in - 1), axis=axis)
    shape = (1,) * axis + w.shape + (1,) * (data.ndim - axis - 1)
    out = np.sum(gathered * w.reshape(shape), axis=axis + 1)
    if outside is not None and outside.any():
        mask = outside.reshape((1,) * axis + (n_out,) + (1,) * (data.ndim - axis - 1))
        out = np.where(mask, np.float64(ctx.attr("extrapolation_value", 0.0)), out)
    return out


def _given(ctx: NodeContext, v: Any, what: str) -> Any:
    if v is None:
        return None
    arr = const_array(ctx, v, what)
    return None if arr.size == 0 else arr.reshape(-1)


@onnx_op("Resize", since=10)
@const_inputs(1, 2, 3)
def resize(ctx: NodeContext, x: Any, roi: Any = None, scales: Any = None, sizes: Any = None) -> Any:
    if ctx.opset < 11:  # Resize-10: (X, scales)
        roi, scales = None, roi
    mode = ctx.attr("mode", "nearest")
    antialias = bool(ctx.attr("antialias", 0))
    if mode == "nearest":
        if antialias:
            raise ctx.unsupported("antialias with mode 'nearest'")
        coeffs = _nearest(ctx.attr("nearest_mode", "round_prefer_floor"))
    elif mode == "linear":
        coeffs = _linear(antialias)
    elif mode == "cubic":
        coeffs = _cubic(ctx.attr("cubic_coeff_a", -0.75), antialias)
    else:
        raise ctx.unsupported(f"the mode {mode!r}")
    r = x.ndim
    roi_v, scale_v, size_v = _given(ctx, roi, "roi"), _given(ctx, scales, "scales"), _given(ctx, sizes, "sizes")
    axes = [norm_axis(ctx, a, r) for a in (ctx.attr("axes") or range(r))]
    full_roi = None
    if roi_v is not None:
        full_roi = [0.0] * r + [1.0] * r
        for i, a in enumerate(axes):
            full_roi[a], full_roi[r + a] = float(roi_v[i]), float(roi_v[len(axes) + i])
    if size_v is not None:
        out = list(x.shape)
        for i, a in enumerate(axes):
            out[a] = int(size_v[i])
        factors = [out[i] / x.shape[i] for i in range(r)]
        policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            s = pick(factors[a] for a in axes)
            factors = [s if i in axes else 1.0 for i in range(r)]
            out = [int(s * x.shape[i] + 0.5) if i in axes else x.shape[i] for i in range(r)]
    elif scale_v is not None:
        factors = [1.0] * r
        for i, a in enumerate(axes):
            factors[a] = float(scale_v[i])
        out = [int(f * d) for f, d in zip(factors, x.shape)]
    else:
        raise ctx.unsupported("neither scales nor sizes is given")
    y = x.astype(np.float64)
    for a in axes:
        trivial_roi = full_roi is None or (math.isclose(full_roi[a], 0.0) and math.isclose(full_roi[a + r], 1.0))
        if math.isclose(factors[a], 1.0) and out[a] == y.shape[a] and trivial_roi:
            continue
        y = _along(ctx, y, a, factors[a], out[a], coeffs, None if full_roi is None else [full_roi[a], full_roi[a + r]])
    dtype = np.dtype(x.dtype)
    if dtype.kind in "iu":  # the reference's saturate_cast: rounded (half to even), clipped
        info = np.iinfo(dtype)
        return np.clip(np.rint(y), info.min, info.max).astype(dtype)
    return y.astype(dtype)
