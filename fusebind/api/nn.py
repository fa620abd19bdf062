"""Convolution and pooling on traced arrays (and on numpy arrays, where they compute eagerly).

Layout: channels first, as ONNX and PyTorch: `x` is (N, C, *spatial), the weight of a conv is
(F, C / groups, *kernel). `pads` is `(lo_1, ..., lo_d, hi_1, ..., hi_d)` (ONNX's order);
`strides` and `dilations` one entry per spatial dim (default 1).

Each is built on one `prim.window` (the sliding-window index map, padding and input dilation
included: dialect/prim_window.py), whose result is (N, C, *kernel, *out):
- conv: the window reshaped to (N, G, C/G * K, P) (the im2col buffer, written by one loop), one
  `prim.matmul` with the weight as (G, F/G, C/G * K) (its own layout, no transpose), reshaped to
  (N, F, *out); the bias and whatever follows are an elementwise epilogue. A 1x1, stride-1,
  unpadded conv has no window: a reshape and the matmul;
- conv_transpose: a conv over the input dilated by the strides (`lhs_dilation`), padded by
  d*(k-1) - pad (+ output_padding at the end; a negative amount crops the result), with the
  weight flipped along its kernel dims and its channel dims swapped per group;
- max / avg pooling: the window reduced over its kernel dims (max; sum divided by the count per
  output position, a constant), which fusion makes one loop over x with no window tensor
  (the window is the reduction's prologue, an index map); global pooling: a reduction.
On traced arrays these trace prims; on numpy arrays they compute with numpy (the window by its
reference). Signatures are the contract the ONNX handlers build on.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from fusebind.api import numpy_kernels as K
from fusebind.api.errors import FusebindValueError
from fusebind.api.tracer import as_tracer
from fusebind.dialect.prim_window import WindowOp, window_out_size, window_values


def _spatial(x: Any, what: str) -> int:
    if x.ndim < 3:
        raise FusebindValueError(f"{what}: the input must be (N, C, *spatial) with at least one spatial dim, "
                         f"got shape {tuple(x.shape)}")
    return x.ndim - 2


def _per_dim(v: Sequence[int] | None, d: int, default: int, what: str) -> tuple[int, ...]:
    if v is None:
        return (default,) * d
    v = tuple(int(i) for i in v)
    if len(v) != d:
        raise FusebindValueError(f"{what}: expected {d} entries, got {len(v)}")
    return v


def _pads(pads: Sequence[int] | None, d: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if pads is None:
        return (0,) * d, (0,) * d
    p = tuple(int(i) for i in pads)
    if len(p) != 2 * d:
        raise FusebindValueError(f"pads: expected {2 * d} entries (lo..., hi...), got {len(p)}")
    return p[:d], p[d:]


def out_size(n: int, k: int, s: int, d: int, lo: int, hi: int, ceil_mode: bool = False) -> int:
    """Output length along one dim: floor (or ceil) of (n + lo + hi - d*(k-1) - 1) / s + 1."""
    span = n + lo + hi - d * (k - 1) - 1
    q = -(-span // s) if ceil_mode else span // s
    if ceil_mode and q * s >= n + lo:  # the last window must start inside the input or its lo padding
        q -= 1
    return q + 1



#: The largest window (im2col) fusebind builds: 2^32 elements (16 GiB of f32). Checked before any
#: allocation, so pads or strides that claim more (a hostile or broken model: the importer fuzzer's
#: Conv with pads of 2^31 asked numpy for 16 GiB while tracing) are a clear error.
MAX_WINDOW_ELEMENTS = 1 << 32


def _window(x: Any, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
            lhs_dilation: Sequence[int], lo: Sequence[int], hi: Sequence[int], fill: float, what: str) -> Any:
    """prim.window of the last len(kernel) dims: (lead..., *kernel, *out)."""
    d = len(kernel)
    ins = tuple(int(n) for n in x.shape[x.ndim - d:])
    for i in range(d):
        span = dilations[i] * (kernel[i] - 1) + 1
        room = (0 if ins[i] == 0 else lhs_dilation[i] * (ins[i] - 1) + 1) + lo[i] + hi[i]
        if span > room:
            raise FusebindValueError(f"{what}: spatial dim {i}: the (dilated) kernel spans {span} elements, more "
                                     f"than the {room} of the padded input; pad the input or use a smaller kernel")
    outs = [window_out_size(ins[i], kernel[i], strides[i], dilations[i], lhs_dilation[i], lo[i], hi[i])
            for i in range(d)]
    size = math.prod(int(n) for n in x.shape[:x.ndim - d]) * math.prod(kernel) * math.prod(outs)
    if size > MAX_WINDOW_ELEMENTS:
        raise FusebindValueError(
            f"{what}: the window of this input (kernel {tuple(kernel)}, {tuple(outs)} output positions, pads "
            f"{tuple(lo)}/{tuple(hi)}, strides {tuple(strides)}) has {size} elements, more than fusebind builds "
            f"(2^32); check the pads, strides and dilations (a model's attributes claim this size)")
    geo = {"strides": tuple(strides), "dilations": tuple(dilations), "lhs_dilation": tuple(lhs_dilation),
           "pads_lo": tuple(lo), "pads_hi": tuple(hi)}
    graph = K.graph_of(x)
    if graph is None:
        return window_values(np.asarray(x), {"window": tuple(kernel), **geo}, fill)
    return graph.add(WindowOp(x.value, tuple(kernel), fill=fill, **geo))


def _conv(x: Any, w: Any, bias: Any, strides: tuple[int, ...], lo: tuple[int, ...], hi: tuple[int, ...],
          dilations: tuple[int, ...], lhs_dilation: tuple[int, ...], groups: int, what: str) -> Any:
    """The conv of (N, C, *in) by the weight (F, C/groups, *k), over the input dilated by
    lhs_dilation: window -> (N, G, C/G*K, P) -> matmul -> (N, F, *out) (+ bias)."""
    graph = K.graph_of(x, w, bias)
    if graph is not None:
        x, w = as_tracer(graph, x), as_tracer(graph, w)
    d = x.ndim - 2
    kernel = tuple(int(k) for k in w.shape[2:])
    n, c, f = int(x.shape[0]), int(x.shape[1]), int(w.shape[0])
    if groups < 1 or c % groups or f % groups or int(w.shape[1]) * groups != c or w.ndim != x.ndim:
        raise FusebindValueError(f"{what}: {c} input channels, weight {tuple(w.shape)} and groups={groups} do not "
                                 "agree (the weight is (F, C / groups, *kernel), F a multiple of groups)")
    ones = (1,) * d
    plain = (math.prod(kernel) == 1 and strides == ones and lhs_dilation == ones and not any(lo) and not any(hi))
    if plain:  # a 1x1 conv: the input is already its own im2col
        outs = tuple(int(s) for s in x.shape[2:])
        col = np.reshape(x, (n, groups, c // groups, math.prod(outs)))
    else:
        win = _window(x, kernel, strides, dilations, lhs_dilation, lo, hi, 0.0, what)  # (N, C, *k, *out)
        outs = tuple(int(s) for s in win.shape[2 + d:])
        col = np.reshape(win, (n, groups, (c // groups) * math.prod(kernel), math.prod(outs)))
    ck = (c // groups) * math.prod(kernel)
    if groups == 1:  # drop the unit group dim (and a unit batch): a 2-D GEMM binds to BLAS directly
        col = np.reshape(col, (ck, math.prod(outs)) if n == 1 else (n, ck, math.prod(outs)))
        wm = np.reshape(w, (f, ck))
    else:
        wm = np.reshape(w, (groups, f // groups, ck))
    y = np.reshape(np.matmul(wm, col), (n, f) + outs)
    if bias is not None:
        # a (1, F, 1...) operand the add broadcasts (a constant bias stays F values; an explicit
        # broadcast_to of a numpy bias would be captured as a full-size view and copied per call).
        # (Such an operand once got a kernel compiled for dynamic shapes that read it as full-shaped,
        # above the split threshold: fixed in compiler/splitting.py; test_conv_bias_relu_past_half_a_million_elements.)
        y = y + np.reshape(bias, (1, f) + (1,) * d)
    return y


def conv(x: Any, w: Any, bias: Any = None, *, strides: Sequence[int] | None = None,
         pads: Sequence[int] | None = None, dilations: Sequence[int] | None = None, groups: int = 1) -> Any:
    """ONNX Conv (cross-correlation): (N, C, *in) * (F, C/groups, *k) -> (N, F, *out)."""
    d = _spatial(x, "conv")
    strides = _per_dim(strides, d, 1, "conv strides")
    dilations = _per_dim(dilations, d, 1, "conv dilations")
    lo, hi = _pads(pads, d)
    _positive(strides, "conv strides")
    _positive(dilations, "conv dilations")
    if any(p < 0 for p in lo + hi):
        raise FusebindValueError(f"conv: pads must be >= 0, got {list(lo + hi)}")
    return _conv(x, w, bias, strides, lo, hi, dilations, (1,) * d, int(groups), "conv")


def conv_transpose(x: Any, w: Any, bias: Any = None, *, strides: Sequence[int] | None = None,
                   pads: Sequence[int] | None = None, dilations: Sequence[int] | None = None, groups: int = 1,
                   output_padding: Sequence[int] | None = None) -> Any:
    """ONNX ConvTranspose: (N, C, *in) with weight (C, F/groups, *k) -> (N, F, *out),
    out_i = s_i*(in_i - 1) + output_padding_i + d_i*(k_i - 1) + 1 - lo_i - hi_i.

    The conv of the input dilated by the strides, padded by d*(k-1) - lo before and
    d*(k-1) - hi + output_padding after, with the weight (C, F/G, *k) flipped along its kernel
    dims and regrouped to (F, C/G, *k); a negative padding amount crops the result instead."""
    d = _spatial(x, "conv_transpose")
    strides = _per_dim(strides, d, 1, "conv_transpose strides")
    dilations = _per_dim(dilations, d, 1, "conv_transpose dilations")
    outpad = _per_dim(output_padding, d, 0, "conv_transpose output_padding")
    lo, hi = _pads(pads, d)
    _positive(strides, "conv_transpose strides")
    _positive(dilations, "conv_transpose dilations")
    if any(p < 0 for p in lo + hi + outpad):
        raise FusebindValueError(f"conv_transpose: pads and output_padding must be >= 0, got pads {list(lo + hi)}, "
                                 f"output_padding {list(outpad)}")
    groups = int(groups)
    c = int(x.shape[1])
    if w.ndim != x.ndim or groups < 1 or c % groups or int(w.shape[0]) != c:
        raise FusebindValueError(f"conv_transpose: {c} input channels, weight {tuple(w.shape)} and groups={groups} "
                                 "do not agree (the weight is (C, F / groups, *kernel), C a multiple of groups)")
    graph = K.graph_of(x, w, bias)
    if graph is not None:
        w = as_tracer(graph, w)
    kernel = tuple(int(k) for k in w.shape[2:])
    fg = int(w.shape[1])
    # (C, F/G, *k) -> (G, C/G, F/G, *k) -> (G, F/G, C/G, *k) -> (F, C/G, *k), flipped along *k
    wt = np.reshape(w, (groups, c // groups, fg) + kernel)
    wt = np.transpose(wt, (0, 2, 1) + tuple(range(3, 3 + d)))
    wt = np.reshape(wt, (groups * fg, c // groups) + kernel)
    wt = np.flip(wt, axis=tuple(range(2, 2 + d)))
    full = tuple(dilations[i] * (kernel[i] - 1) for i in range(d))
    want_lo = tuple(full[i] - lo[i] for i in range(d))
    want_hi = tuple(full[i] - hi[i] + outpad[i] for i in range(d))
    ins = tuple(int(n) for n in x.shape[2:])
    outs = tuple(strides[i] * (ins[i] - 1) + outpad[i] + full[i] + 1 - lo[i] - hi[i] for i in range(d))
    if any(o < 1 for o in outs):
        raise FusebindValueError(f"conv_transpose: the output would have shape {outs}: the pads are too large")
    y = _conv(x, wt, bias, (1,) * d, tuple(max(p, 0) for p in want_lo), tuple(max(p, 0) for p in want_hi),
              dilations, strides, groups, "conv_transpose")
    if any(p < 0 for p in want_lo + want_hi):  # a pad larger than the kernel's reach: crop
        key = (slice(None), slice(None)) + tuple(slice(max(-want_lo[i], 0), max(-want_lo[i], 0) + outs[i])
                                                  for i in range(d))
        y = y[key]
    return y


def _positive(v: tuple[int, ...], what: str) -> None:
    if any(i < 1 for i in v):
        raise FusebindValueError(f"{what}: entries must be >= 1, got {list(v)}")


def _pool_fill(dtype: Any) -> float:
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return 0.0
    if dt.kind in "iu":
        return float(np.iinfo(dt).min)
    return float("-inf")  # float16 / 32 / 64, and bfloat16 (ml_dtypes: kind 'V')


def _pool_geometry(x: Any, kernel: Sequence[int], strides: Sequence[int] | None, pads: Sequence[int] | None,
                   dilations: Sequence[int] | None, ceil_mode: bool, what: str):
    d = _spatial(x, what)
    kernel = _per_dim(kernel, d, 1, f"{what} kernel")
    strides = _per_dim(strides, d, 1, f"{what} strides")
    dilations = _per_dim(dilations, d, 1, f"{what} dilations")
    for v, name in ((kernel, "kernel"), (strides, "strides"), (dilations, "dilations")):
        _positive(v, f"{what} {name}")
    lo, hi = _pads(pads, d)
    if any(p < 0 for p in lo + hi):
        raise FusebindValueError(f"{what}: pads must be >= 0, got {list(lo + hi)}")
    ins = tuple(int(x.shape[2 + i]) for i in range(d))
    outs = tuple(out_size(ins[i], kernel[i], strides[i], dilations[i], lo[i], hi[i], ceil_mode) for i in range(d))
    # ceil mode: the last window may run past the hi padding; pad that far too (never read as data)
    extra = tuple(max(0, (outs[i] - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1 - (ins[i] + lo[i] + hi[i]))
                  for i in range(d))
    return d, kernel, strides, dilations, lo, hi, ins, outs, extra


def max_pool(x: Any, kernel: Sequence[int], *, strides: Sequence[int] | None = None,
             pads: Sequence[int] | None = None, dilations: Sequence[int] | None = None,
             ceil_mode: bool = False) -> Any:
    """ONNX MaxPool (the values; padding never wins): the window (fill: the dtype's lowest
    value) reduced by max over its kernel dims, one fused loop over x."""
    d, kernel, strides, dilations, lo, hi, ins, outs, extra = _pool_geometry(x, kernel, strides, pads, dilations,
                                                                            ceil_mode, "max_pool")
    hi = tuple(hi[i] + extra[i] for i in range(d))
    win = _window(x, kernel, strides, dilations, (1,) * d, lo, hi, _pool_fill(x.dtype), "max_pool")
    return np.max(win, axis=tuple(range(2, 2 + d)))


def avg_pool(x: Any, kernel: Sequence[int], *, strides: Sequence[int] | None = None,
             pads: Sequence[int] | None = None, dilations: Sequence[int] | None = None,
             ceil_mode: bool = False, count_include_pad: bool = False) -> Any:
    """ONNX AveragePool: the sum over each window divided by its count (the window's size within
    the padded input when count_include_pad, else its elements inside the input): the window
    (fill 0) summed over its kernel dims, divided by a constant (a scalar when every window
    counts the same)."""
    d, kernel, strides, dilations, lo, hi, ins, outs, extra = _pool_geometry(x, kernel, strides, pads, dilations,
                                                                            ceil_mode, "avg_pool")
    hi_x = tuple(hi[i] + extra[i] for i in range(d))
    win = _window(x, kernel, strides, dilations, (1,) * d, lo, hi_x, 0.0, "avg_pool")
    total = np.sum(win, axis=tuple(range(2, 2 + d)))
    # the count per output position, a constant: ones over the input (or the padded input), windowed
    if count_include_pad:
        ones = np.ones(tuple(ins[i] + lo[i] + hi[i] for i in range(d)), np.float64)
        geo = {"window": kernel, "strides": strides, "dilations": dilations, "lhs_dilation": (1,) * d,
               "pads_lo": (0,) * d, "pads_hi": extra}
    else:
        ones = np.ones(ins, np.float64)
        geo = {"window": kernel, "strides": strides, "dilations": dilations, "lhs_dilation": (1,) * d,
               "pads_lo": lo, "pads_hi": hi_x}
    count = np.maximum(window_values(ones, geo, 0.0).sum(axis=tuple(range(d))), 1.0)
    dt = np.dtype(x.dtype) if np.dtype(x.dtype).kind not in "biu" else np.dtype(np.float64)
    if (count == count.flat[0]).all():
        return total / dt.type(count.flat[0])
    graph = K.graph_of(total)
    if graph is not None:  # baked into the kernel, not a hidden argument
        return total / K.constant(graph, count, dt)
    return total / count.astype(dt)


def global_max_pool(x: Any) -> Any:
    """ONNX GlobalMaxPool: the max over the spatial dims, kept as size-1 dims."""
    d = _spatial(x, "global_max_pool")
    return np.max(x, axis=tuple(range(2, 2 + d)), keepdims=True)


def global_avg_pool(x: Any) -> Any:
    """ONNX GlobalAveragePool: the mean over the spatial dims, kept as size-1 dims."""
    d = _spatial(x, "global_avg_pool")
    return np.mean(x, axis=tuple(range(2, 2 + d)), keepdims=True)


__all__ = ["avg_pool", "conv", "conv_transpose", "global_avg_pool", "global_max_pool", "max_pool", "out_size"]
