"""ONNX `GridSample` (opset 16..; 2-D and N-D since 20): X sampled at the grid's normalized
coordinates, nearest / linear / cubic, padding zeros / border / reflection, align_corners,
as the reference computes it (onnx/reference/ops/op_grid_sample.py) but vectorized: per spatial
dim, the source coordinate (denormalized, border-clamped or reflected), then its taps (an
integer index and a weight each, with the padding rule applied to the index); the taps of
all dims combine into flat positions into X's spatial block, one gather per tap combination
(`take_along_axis`), weighted and summed. The grid is traced: the positions are computed
values, range-safe by construction (clipped; a `zeros` tap outside has weight 0).
Must not: build cubic taps for more than 3 spatial dims (64 gathers per output).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from fusebind.onnx.values import const_ints, lift
from fusebind.onnx.registry import NodeContext, onnx_op

_A = -0.75  # the cubic convolution's alpha (Keys)


def _reflect(x: Any, lo: float, hi: float) -> Any:
    """Reflect x by the near border until it lies in [lo, hi] (the reference's _gs_reflect)."""
    span = hi - lo
    if span <= 0:
        return np.clip(x, lo, hi)
    below, above = lo - x, x - hi

    def fold(d: Any, near: float, far: float) -> Any:
        n = np.floor(d / span)
        r = d - n * span
        even = (n - 2.0 * np.floor(n * 0.5)) == 0
        return np.where(even, near + r if near == lo else near - r, far - r if far == hi else far + r)

    return np.where(below > 0, fold(below, lo, hi), np.where(above > 0, fold(above, hi, lo), x))


def _cubic(t: Any) -> list[Any]:
    u, v, w = t + 1.0, 1.0 - t, 2.0 - t
    return [((_A * u - 5 * _A) * u + 8 * _A) * u - 4 * _A, ((_A + 2) * t - (_A + 3)) * t * t + 1.0,
            ((_A + 2) * v - (_A + 3)) * v * v + 1.0, ((_A * w - 5 * _A) * w + 8 * _A) * w - 4 * _A]


def _pixel_index(i: Any, weight: Any, dim: int, lo: float, hi: float, padding: str) -> tuple[Any, Any]:
    """An integer tap index made safe by the padding rule: zeros -> weight 0 outside; border ->
    clamped; reflection -> reflected (then truncated, as int() does)."""
    if padding == "zeros":
        inside = np.logical_and(i >= 0, i < dim)
        return np.clip(i, 0, dim - 1), np.where(inside, weight, np.zeros((), weight.dtype))
    if padding == "border":
        return np.clip(i, 0, dim - 1), weight
    r = _reflect(i.astype(weight.dtype), lo, hi)
    return np.clip(np.trunc(r).astype(np.int64), 0, dim - 1), weight


@onnx_op("GridSample", since=16)
def grid_sample(ctx: NodeContext, x: Any, grid: Any) -> Any:
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(ctx.attr("mode", "linear"), ctx.attr("mode", "linear"))
    padding = ctx.attr("padding_mode", "zeros")
    align = bool(ctx.attr("align_corners", 0))
    dims = list(x.shape[2:])
    nd = len(dims)
    if mode not in ("nearest", "linear", "cubic") or padding not in ("zeros", "border", "reflection") or \
            (mode == "cubic" and nd > 3) or grid.shape[-1] != nd:
        raise ctx.unsupported(f"mode {mode!r}, padding {padding!r} over {nd} spatial dims")
    n, c = x.shape[0], x.shape[1]
    out = tuple(grid.shape[1:-1])
    g = np.reshape(grid, (n, math.prod(out), nd))
    ftype = grid.dtype
    one = np.ones((), ftype)
    taps_per_dim = []
    for i, dim in enumerate(dims):
        lo, hi = (0.0, dim - 1.0) if align else (-0.5, dim - 0.5)
        gi = g[:, :, nd - 1 - i]  # the grid's last axis is (x, y, z): the innermost dim first
        xi = (gi + 1.0) * 0.5 * (dim - 1) if align else ((gi + 1.0) * dim - 1.0) * 0.5
        if mode == "nearest":
            xi = np.rint(xi)
        outside = np.logical_or(xi < lo, xi > hi)
        if padding == "border":
            xi = np.where(outside, np.clip(xi, 0.0, dim - 1.0), xi)
        elif padding == "reflection":
            xi = np.where(outside, _reflect(xi, lo, hi), xi)
        if mode == "nearest":
            taps = [(np.trunc(xi).astype(np.int64), one)]
        else:
            x0 = np.floor(xi)
            t = xi - x0
            base = x0.astype(np.int64)
            if mode == "linear":
                taps = [(base, 1.0 - t), (base + 1, t)]
            else:
                taps = [(base + k - 1, w) for k, w in enumerate(_cubic(t))]
        taps_per_dim.append([_pixel_index(idx, np.broadcast_to(w, tuple(idx.shape)).astype(ftype) if not
                                          hasattr(w, "ndim") or w.ndim == 0 else w, dim, lo, hi, padding)
                             for idx, w in taps])
    strides = [math.prod(dims[i + 1:]) for i in range(nd)]
    flat_x = lift(np.reshape(x, (n, c, math.prod(dims))), g)
    total = None
    for combo in itertools.product(*taps_per_dim):
        pos = sum(idx * s for (idx, _), s in zip(combo, strides))
        weight = combo[0][1]
        for _, w in combo[1:]:
            weight = weight * w
        picked = np.take_along_axis(flat_x, np.broadcast_to(np.expand_dims(pos, 1), (n, c, pos.shape[1])), axis=2)
        term = picked * np.expand_dims(weight, 1).astype(x.dtype)
        total = term if total is None else total + term
    return np.reshape(total, (n, c) + out)


def _base_grid(sizes: list[int], align: bool) -> np.ndarray:
    """The identity grid of the spatial `sizes` in normalized coordinates, homogeneous:
    (..., (x, y[, z], 1)), as the reference builds it (np.arange steps, float64)."""
    axes = []
    for size in sizes:
        if align:
            axes.append(np.arange(-1, 1 + 0.0001, 2.0 / (size - 1)) if size > 1 else np.array([-1.0]))
        else:
            step = 2.0 / size
            axes.append(np.arange(-1 + step / 2, 1, step))
    mesh = np.meshgrid(*axes, indexing="ij")  # (D, H, W) order
    return np.stack([*mesh[::-1], np.ones(tuple(sizes))], axis=-1)


@onnx_op("AffineGrid", since=20)
def affine_grid(ctx: NodeContext, theta: Any, size: Any) -> Any:
    """theta (N, d, d+1) applied to the identity grid of size's spatial dims: (N, *dims, d) float32."""
    _, _, *sizes = const_ints(ctx, size, "size")
    base = _base_grid(sizes, bool(ctx.attr("align_corners", 0)))
    homo = np.reshape(base, (-1, len(sizes) + 1)).T  # (d+1, P)
    grid = np.matmul(theta.astype(np.float64), homo)  # (N, d, P)
    n = theta.shape[0]
    return np.reshape(np.transpose(grid, (0, 2, 1)), (n, *sizes, len(sizes))).astype(np.float32)


affine_grid.const_inputs = (1,)
