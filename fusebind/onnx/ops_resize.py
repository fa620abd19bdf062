"""The ONNX Resize handler (opset 11+): per changed axis, a constant interpolation matrix.

Resize is separable (the spec's reference resizes one axis at a time) and, for a fixed input size,
linear in the data along each axis: out[i] = sum_j W[i, j] x[j], except rows whose coordinate falls
outside the ROI (tf_crop_and_resize), which are extrapolation_value. W is computed at import by the
reference's own 1-D routine applied to the identity (onnx is pinned, so its private
`_interpolate_1d_along_axis` is the spec's meaning), so every coordinate mode, nearest mode, cubic
coefficient, exclude_outside and antialias means exactly what the reference says; a nearest W (one
1 per row) becomes a gather, exact for every dtype. Linear and cubic modes of integer data are
refused (the reference rounds a float64 result; fusebind would not match it bit for bit).

Must not: know the other ops (ops_math.py, ops_shape.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fusebind.onnx.ops_math import _is_const
from fusebind.onnx.registry import NodeContext, onnx_op


def _resize_plan(ctx: NodeContext, shape: tuple[int, ...], roi: Any, scales: Any, sizes: Any) -> list[Any]:
    """[(axis, scale, out_len, roi pair or None)] for the axes that change, as the reference computes them."""
    r = len(shape)
    axes = ctx.attr("axes")
    axes = list(range(r)) if axes is None else [a + r if a < 0 else a for a in axes]
    full = list(range(r)) if ctx.attr("axes") is None else axes
    scale_f = None if scales is None or np.asarray(scales).size == 0 else [float(s) for s in np.asarray(scales)]
    size_l = None if sizes is None or np.asarray(sizes).size == 0 else [int(s) for s in np.asarray(sizes)]
    roi_l = None if roi is None or np.asarray(roi).size == 0 else [float(v) for v in np.asarray(roi)]
    if ctx.attr("axes") is not None:
        if scale_f is not None:
            s = [1.0] * r
            for i, d in enumerate(axes):
                s[d] = scale_f[i]
            scale_f = s
        if size_l is not None:
            s = list(shape)
            for i, d in enumerate(axes):
                s[d] = size_l[i]
            size_l = s
        if roi_l is not None:
            new = [0.0] * r + [1.0] * r
            for i, d in enumerate(axes):
                new[d], new[r + d] = roi_l[i], roi_l[len(axes) + i]
            roi_l = new
    if size_l is not None:
        scale_f = [size_l[i] / shape[i] for i in range(r)]
        policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            s = pick(scale_f[a] for a in full)
            scale_f = [s if i in full else 1.0 for i in range(r)]
            size_l = [int(s * shape[i] + 0.5) if i in full else shape[i] for i in range(r)]
    elif scale_f is not None:
        size_l = [int(v) for v in (np.array(scale_f) * np.array(shape))]
    else:
        raise ctx.unsupported("neither scales nor sizes")
    plan = []
    for a in full:
        pair = None if roi_l is None else [roi_l[a], roi_l[a + r]]
        unchanged = math.isclose(scale_f[a], 1.0) and size_l[a] == shape[a] and (
            pair is None or (math.isclose(pair[0], 0.0) and math.isclose(pair[1], 1.0)))
        if not unchanged:
            plan.append((a, scale_f[a], size_l[a], pair))
    return plan


def _resize_coeffs(ctx: NodeContext) -> Any:
    from onnx.reference.ops import op_resize as ref  # the spec's reference (onnx is pinned)

    mode, a_coef = ctx.attr("mode", "nearest"), float(ctx.attr("cubic_coeff_a", -0.75))
    antialias = bool(ctx.attr("antialias", 0))
    if mode == "nearest":
        nearest = ctx.attr("nearest_mode", "round_prefer_floor")
        return lambda x, scale: ref._nearest_coeffs(x, mode=nearest)
    if mode == "cubic":
        fn = ref._cubic_coeffs_antialias if antialias else ref._cubic_coeffs
        return lambda x, scale: fn(x, scale, A=a_coef)
    if mode == "linear":
        return ref._linear_coeffs_antialias if antialias else ref._linear_coeffs
    raise ctx.unsupported(f"the mode {mode!r}")


@onnx_op("Resize", since=11)
def resize(ctx: NodeContext, x: Any, roi: Any = None, scales: Any = None, sizes: Any = None) -> Any:
    from onnx.reference.ops import op_resize as ref

    for what, v in (("roi", roi), ("scales", scales), ("sizes", sizes)):
        if v is not None and not _is_const(v):
            raise ctx.unsupported(f"a {what} input computed from the model's inputs")
    shape = tuple(int(d) for d in x.shape)
    coeffs = _resize_coeffs(ctx)
    cmode = ctx.attr("coordinate_transformation_mode", "half_pixel")
    extrap = float(ctx.attr("extrapolation_value", 0.0))
    nearest = ctx.attr("mode", "nearest") == "nearest"
    if not nearest and x.dtype.kind != "f":
        raise ctx.unsupported(f"{ctx.attr('mode')} interpolation of {x.dtype} data")
    out = x
    for axis, scale, m, pair in _resize_plan(ctx, shape, roi, scales, sizes):
        n = shape[axis]
        kw = dict(roi=pair, coordinate_transformation_mode=cmode, exclude_outside=bool(ctx.attr("exclude_outside", 0)))
        w = ref._interpolate_1d_along_axis(np.eye(n), 0, scale, m, coeffs, extrapolation_value=0.0, **kw)
        outside = ref._interpolate_1d_along_axis(np.zeros((n, 1)), 0, scale, m, coeffs, extrapolation_value=1.0,
                                                 **kw)[:, 0] != 0
        rows_one_hot = ((w == 0) | (w == 1)).all() and (w.sum(axis=1)[~outside] == 1).all()
        if nearest and rows_one_hot:
            out = np.take(out, np.argmax(w, axis=1).astype(np.int64), axis=axis)
        else:
            moved = np.moveaxis(out, axis, -1)
            out = np.moveaxis(np.matmul(moved, w.T.astype(x.dtype)), -1, axis)
        if outside.any():
            mask = outside.reshape((1,) * axis + (m,) + (1,) * (len(shape) - axis - 1))
            out = np.where(mask, np.asarray(extrap, dtype=x.dtype), out)
    return out
