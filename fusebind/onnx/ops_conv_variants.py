"""Handlers of the convolution variants: ConvInteger and QLinearConv (the int32 convolution of the
zero-point-shifted int8/uint8 codes, then the reference's requantization) and DeformConv (bilinear
samples at offset kernel taps, then a grouped matmul). Registered by importing ops_conv; the
geometry (`conv_attrs.conv_args`: strides, pads with auto_pad resolved, dilations, group) is shared.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.api import nn
from fusebind.onnx.conv_attrs import check_dtype, conv_args, dims
from fusebind.onnx.registry import NodeContext, onnx_op
from fusebind.onnx.values import lift


def _check_int8(ctx: NodeContext, *xs: Any) -> None:
    for x in xs:
        if np.dtype(x.dtype).name not in ("int8", "uint8"):
            raise ctx.unsupported(f"an input of element type {np.dtype(x.dtype).name} (the op takes int8, uint8)")


def _int_conv(ctx: NodeContext, x: Any, w: Any, xz: Any, wz: Any, b: Any = None) -> Any:
    """The int32 convolution of (x - x_zero_point) and (w - w_zero_point, per tensor or per output
    channel), plus an int32 bias: padding is a real zero (the zero point's code)."""
    _check_int8(ctx, x, w)
    strides, pads, dilations, group = conv_args(ctx, x, w)
    x32, w32 = x.astype(np.int32), w.astype(np.int32)
    if xz is not None:
        x32 = x32 - np.reshape(xz, ()).astype(np.int32)
    if wz is not None:
        wz = wz.astype(np.int32)
        w32 = w32 - (np.reshape(wz, ()) if int(np.size(wz)) == 1 else np.reshape(wz, (-1,) + (1,) * (w.ndim - 1)))
    return nn.conv(x32, w32, b, strides=strides, pads=pads, dilations=dilations, groups=group)


@onnx_op("ConvInteger", since=10)
def conv_integer(ctx: NodeContext, x: Any, w: Any, xz: Any = None, wz: Any = None) -> Any:
    return _int_conv(ctx, x, w, xz, wz)


@onnx_op("QLinearConv", since=10)
def qlinear_conv(ctx: NodeContext, x: Any, x_scale: Any, xz: Any, w: Any, w_scale: Any, wz: Any, y_scale: Any,
                 yz: Any = None, b: Any = None) -> Any:
    """The reference's requantization: the int32 convolution times x_scale * w_scale / y_scale (w_scale
    per tensor or per output channel), plus y_zero_point, rounded half to even and saturated to
    y_zero_point's type (x's when absent)."""
    if b is not None and np.dtype(b.dtype).name != "int32":
        raise ctx.unsupported(f"a bias of element type {np.dtype(b.dtype).name} (QLinearConv's is int32)")
    acc = _int_conv(ctx, x, w, xz, wz, b)
    if int(np.size(w_scale)) > 1:
        w_scale = np.reshape(w_scale, (1, -1) + (1,) * (x.ndim - 2))
    r = acc * (x_scale * w_scale / y_scale)
    out = np.dtype(yz.dtype if yz is not None else x.dtype)
    if yz is not None:
        r = r + yz
    info = np.iinfo(out)
    return np.clip(np.rint(r), info.min, info.max).astype(out)


@onnx_op("DeformConv", since=19)
def deform_conv(ctx: NodeContext, x: Any, w: Any, offset: Any, b: Any = None, mask: Any = None) -> Any:
    """2-D deformable convolution, as the reference: each kernel tap of each output position samples x
    at its grid point plus its (dh, dw) offset (per offset group of channels), bilinearly with zeros
    outside the input, times the mask; the samples (N, C, taps, positions) then meet the weight in one
    grouped matmul, as a convolution's columns do. The sampling is four flat gathers per tap."""
    check_dtype(ctx, x)
    if x.ndim != 4:
        raise ctx.unsupported(f"an input of shape {tuple(x.shape)} (DeformConv is built for 2-D inputs)")
    strides, pads, dilations, group = conv_args(ctx, x, w)
    n, c, h, wd = dims(x)
    f, kh, kw = dims(w)[0], dims(w)[2], dims(w)[3]
    og = int(ctx.attr("offset_group", 1))
    oh, ow = (nn.out_size(h, kh, strides[0], dilations[0], pads[0], pads[2]),
              nn.out_size(wd, kw, strides[1], dilations[1], pads[1], pads[3]))
    if og < 1 or c % og or dims(offset) != (n, og * 2 * kh * kw, oh, ow) or (
            mask is not None and dims(mask) != (n, og * kh * kw, oh, ow)):
        raise ctx.unsupported(f"offset {dims(offset)} / mask {None if mask is None else dims(mask)} for "
                              f"offset_group {og}, a {kh}x{kw} kernel and a {oh}x{ow} output")
    dt = np.dtype(x.dtype)
    off = np.reshape(offset, (n, og, kh * kw, 2, oh * ow))
    msk = None if mask is None else np.reshape(mask, (n, og, kh * kw, oh * ow))
    grid_h = (np.arange(oh) * strides[0] - pads[0]).repeat(ow).astype(dt)  # (positions,)
    grid_w = np.tile(np.arange(ow) * strides[1] - pads[1], oh).astype(dt)
    # the flat position of channel (n, offset group, channel in group) in x, before the pixel
    base = (np.arange(n * c, dtype=np.int64) * (h * wd)).reshape(n, og, c // og, 1)
    flat = np.reshape(x, (-1,))
    taps = []
    for k in range(kh * kw):
        ph = grid_h + (k // kw) * dilations[0] + off[:, :, k, 0]  # (N, og, positions)
        pw = grid_w + (k % kw) * dilations[1] + off[:, :, k, 1]
        h0, w0 = np.floor(ph), np.floor(pw)
        fh, fw = ph - h0, pw - w0
        sample = None
        for dy, dx, wgt in ((0, 0, (1 - fh) * (1 - fw)), (0, 1, (1 - fh) * fw), (1, 0, fh * (1 - fw)), (1, 1, fh * fw)):
            hh, ww = h0 + dy, w0 + dx
            inside = (hh >= 0) & (hh <= h - 1) & (ww >= 0) & (ww <= wd - 1)
            pix = (np.clip(hh, 0, h - 1) * wd + np.clip(ww, 0, wd - 1)).astype(np.int64)
            vals = np.take(lift(flat, pix), np.reshape(pix, (n, og, 1, oh * ow)) + base, axis=0)
            term = vals * np.reshape(np.where(inside, wgt, np.zeros((), dt)), (n, og, 1, oh * ow))
            sample = term if sample is None else sample + term
        if msk is not None:
            sample = sample * np.reshape(msk[:, :, k], (n, og, 1, oh * ow))
        taps.append(np.reshape(sample, (n, c, 1, oh * ow)))
    col = np.reshape(np.concatenate(taps, axis=2) if len(taps) > 1 else taps[0], (n, group, (c // group) * kh * kw,
                                                                                   oh * ow))
    y = np.reshape(np.matmul(np.reshape(w, (group, f // group, (c // group) * kh * kw)), col), (n, f, oh, ow))
    return y if b is None else y + np.reshape(b, (1, f, 1, 1))


__all__ = ["conv_integer", "deform_conv", "qlinear_conv"]
