"""Convolution and pooling on traced arrays (and on numpy arrays, where they compute eagerly).

Layout: channels first, as ONNX and PyTorch: `x` is (N, C, *spatial), the weight of a conv is
(F, C / groups, *kernel). `pads` is `(lo_1, ..., lo_d, hi_1, ..., hi_d)` (ONNX's order);
`strides` and `dilations` one entry per spatial dim (default 1).

SEAM (coordinator, 2026-12-01): these bodies are a first, correct composition over existing prims
(a padded copy, one strided slice per kernel tap, a stack and one matmul); the window index map
replaces them. Signatures are the contract the ONNX handlers build on.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

import numpy as np


def _spatial(x: Any, what: str) -> int:
    if x.ndim < 3:
        raise ValueError(f"{what}: the input must be (N, C, *spatial) with at least one spatial dim, "
                         f"got shape {tuple(x.shape)}")
    return x.ndim - 2


def _per_dim(v: Sequence[int] | None, d: int, default: int, what: str) -> tuple[int, ...]:
    if v is None:
        return (default,) * d
    v = tuple(int(i) for i in v)
    if len(v) != d:
        raise ValueError(f"{what}: expected {d} entries, got {len(v)}")
    return v


def _pads(pads: Sequence[int] | None, d: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if pads is None:
        return (0,) * d, (0,) * d
    p = tuple(int(i) for i in pads)
    if len(p) != 2 * d:
        raise ValueError(f"pads: expected {2 * d} entries (lo..., hi...), got {len(p)}")
    return p[:d], p[d:]


def out_size(n: int, k: int, s: int, d: int, lo: int, hi: int, ceil_mode: bool = False) -> int:
    """Output length along one dim: floor (or ceil) of (n + lo + hi - d*(k-1) - 1) / s + 1."""
    span = n + lo + hi - d * (k - 1) - 1
    q = -(-span // s) if ceil_mode else span // s
    if ceil_mode and q * s >= n + lo:  # the last window must start inside the input or its lo padding
        q -= 1
    return q + 1


def _taps(xp: Any, kernel: tuple[int, ...], strides: tuple[int, ...], dilations: tuple[int, ...],
          outs: tuple[int, ...]) -> list[Any]:
    """One strided slice of the padded input per kernel tap, each (N, C, *outs), in C order of taps."""
    taps = []
    for k in itertools.product(*(range(n) for n in kernel)):
        idx = (slice(None), slice(None)) + tuple(
            slice(k_i * d_i, k_i * d_i + s_i * (o_i - 1) + 1, s_i)
            for k_i, d_i, s_i, o_i in zip(k, dilations, strides, outs))
        taps.append(xp[idx])
    return taps


def conv(x: Any, w: Any, bias: Any = None, *, strides: Sequence[int] | None = None,
         pads: Sequence[int] | None = None, dilations: Sequence[int] | None = None, groups: int = 1) -> Any:
    """ONNX Conv (cross-correlation): (N, C, *in) * (F, C/groups, *k) -> (N, F, *out)."""
    d = _spatial(x, "conv")
    kernel = tuple(int(k) for k in w.shape[2:])
    strides = _per_dim(strides, d, 1, "conv strides")
    dilations = _per_dim(dilations, d, 1, "conv dilations")
    lo, hi = _pads(pads, d)
    n, c = int(x.shape[0]), int(x.shape[1])
    f = int(w.shape[0])
    if c % groups or f % groups or int(w.shape[1]) * groups != c:
        raise ValueError(f"conv: {c} input channels, weight {tuple(w.shape)} and groups={groups} do not agree")
    outs = tuple(out_size(int(x.shape[2 + i]), kernel[i], strides[i], dilations[i], lo[i], hi[i]) for i in range(d))
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple(zip(lo, hi))) if any(lo) or any(hi) else x
    taps = _taps(xp, kernel, strides, dilations, outs)
    col = taps[0][:, :, None] if len(taps) == 1 else np.stack(taps, axis=2)  # (N, C, K, *out)
    kk, oo = math.prod(kernel), math.prod(outs)
    col = np.reshape(col, (n, groups, (c // groups) * kk, oo))
    wm = np.reshape(w, (groups, f // groups, (c // groups) * kk))
    y = np.reshape(np.matmul(wm, col), (n, f) + outs)
    if bias is not None:
        y = y + np.reshape(bias, (1, f) + (1,) * d)
    return y


def conv_transpose(x: Any, w: Any, bias: Any = None, *, strides: Sequence[int] | None = None,
                   pads: Sequence[int] | None = None, dilations: Sequence[int] | None = None, groups: int = 1,
                   output_padding: Sequence[int] | None = None) -> Any:
    """ONNX ConvTranspose: (N, C, *in) with weight (C, F/groups, *k) -> (N, F, *out),
    out_i = s_i*(in_i - 1) + output_padding_i + d_i*(k_i - 1) + 1 - lo_i - hi_i."""
    raise NotImplementedError("conv_transpose: the window index map builds it (seam)")


def _pool_fill(dtype: Any) -> Any:
    dt = np.dtype(dtype)
    return -np.inf if dt.kind == "f" else np.iinfo(dt).min


def _pool_geometry(x: Any, kernel: Sequence[int], strides: Sequence[int] | None, pads: Sequence[int] | None,
                   dilations: Sequence[int] | None, ceil_mode: bool, what: str):
    d = _spatial(x, what)
    kernel = _per_dim(kernel, d, 1, f"{what} kernel")
    strides = _per_dim(strides, d, 1, f"{what} strides")
    dilations = _per_dim(dilations, d, 1, f"{what} dilations")
    lo, hi = _pads(pads, d)
    ins = tuple(int(x.shape[2 + i]) for i in range(d))
    outs = tuple(out_size(ins[i], kernel[i], strides[i], dilations[i], lo[i], hi[i], ceil_mode) for i in range(d))
    # ceil mode: the last window may run past the hi padding; pad that far too (never read as data)
    extra = tuple(max(0, (outs[i] - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1 - (ins[i] + lo[i] + hi[i]))
                  for i in range(d))
    return d, kernel, strides, dilations, lo, hi, ins, outs, extra


def max_pool(x: Any, kernel: Sequence[int], *, strides: Sequence[int] | None = None,
             pads: Sequence[int] | None = None, dilations: Sequence[int] | None = None,
             ceil_mode: bool = False) -> Any:
    """ONNX MaxPool (the values; padding never wins)."""
    d, kernel, strides, dilations, lo, hi, ins, outs, extra = _pool_geometry(x, kernel, strides, pads, dilations,
                                                                            ceil_mode, "max_pool")
    widths = ((0, 0), (0, 0)) + tuple((lo[i], hi[i] + extra[i]) for i in range(d))
    xp = np.pad(x, widths, constant_values=_pool_fill(x.dtype)) if any(map(any, widths)) else x
    out = None
    for t in _taps(xp, kernel, strides, dilations, outs):
        out = t if out is None else np.maximum(out, t)
    return out


def avg_pool(x: Any, kernel: Sequence[int], *, strides: Sequence[int] | None = None,
             pads: Sequence[int] | None = None, dilations: Sequence[int] | None = None,
             ceil_mode: bool = False, count_include_pad: bool = False) -> Any:
    """ONNX AveragePool: the sum over each window divided by its count (the window's size within
    the padded input when count_include_pad, else its elements inside the input)."""
    d, kernel, strides, dilations, lo, hi, ins, outs, extra = _pool_geometry(x, kernel, strides, pads, dilations,
                                                                            ceil_mode, "avg_pool")
    widths = ((0, 0), (0, 0)) + tuple((lo[i], hi[i] + extra[i]) for i in range(d))
    xp = np.pad(x, widths) if any(map(any, widths)) else x
    out = None
    for t in _taps(xp, kernel, strides, dilations, outs):
        out = t if out is None else out + t
    # the count per output position, a constant: ones over the input (or the padded input), pooled
    inside = np.zeros(tuple(ins[i] + lo[i] + hi[i] + extra[i] for i in range(d)), np.float64)
    region = tuple(slice(0, ins[i] + lo[i] + hi[i]) if count_include_pad else slice(lo[i], lo[i] + ins[i])
                   for i in range(d))
    inside[region] = 1.0
    count = sum(t for t in _taps(inside[None, None], kernel, strides, dilations, outs))
    return out / np.maximum(count, 1.0).astype(np.dtype(x.dtype))


__all__ = ["avg_pool", "conv", "conv_transpose", "max_pool", "out_size"]
