"""`prim.window`: the sliding-window (im2col) index map, with padding and input dilation.

    %r = prim.window %x {window = [3, 3], strides = [1, 1], dilations = [1, 1], lhs_dilation = [1, 1],
                         pads_lo = [1, 1], pads_hi = [1, 1], fill = 0.0 : f64}
         : tensor<1x8x6x6xf32> -> tensor<1x8x3x3x6x6xf32>

The last `d` dims of `x` (d = len(window), 1 <= d <= rank) are windowed. The result is
`x.shape[:-d] + window + outs`: the kernel dims come *before* the output dims, for both users:
a conv reshapes (N, C, k..., o...) to (N, G, C/G * K, P) without a transpose (the matmul's
contraction dims are adjacent, its column dim is the flattened output), and a pooling reduces the
kernel dims, so its innermost loop runs along a row of output positions (vectorizable).

Element `(a..., k_1..k_d, o_1..o_d)` is `xd[a..., p_1, ..., p_d]` with
`p_i = o_i * strides_i + k_i * dilations_i - pads_lo_i`, where `xd` is `x` dilated by
`lhs_dilation` (position p of dim i is `x[p / l_i]` when `p % l_i == 0`, else `fill`; the dilated
size is `l_i * (n_i - 1) + 1`, XLA's lhs dilation: conv_transpose is a conv over it) and any `p`
outside `[0, dilated size)` reads `fill` (the padding). `outs_i = (dilated_i + lo_i + hi_i -
dilations_i * (k_i - 1) - 1) // strides_i + 1`; a window larger than the padded input is refused
(numpy's sliding_window_view refuses it too). Every window, stride and dilation entry is >= 1;
pads are >= 0 (a negative pad is a crop: slice first).

`fill` is a float attribute: 0 (conv, avg pool), -inf (float max pool), an integer's minimum
(integer max pool). For an integer or bool `x` it must be a value of that type.

Category: `ShapeOp` (it moves elements, FLOPS 0), `INDEX_MAP`: outside a fused region the
executor runs the numpy reference; inside one it lowers to a padding pass (when a tap reads the
fill) and a `linalg.generic` with an identity output map that reads the (padded) input by
`tensor.extract` at affine positions (`lowering/emit_window.py`), so upstream fusion folds it into
its consumer: a pooling is one reduction loop, with no window tensor. `window_table` gives, per
dim, the position in x each (tap, output position) reads, or -1 for the fill.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from xdsl.dialects.builtin import DenseArrayBase, FloatAttr, f64
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import irdl_op_definition, prop_def
from xdsl.utils.exceptions import VerifyException

from fusebind.dialect.errors import ShapeInferenceError
from fusebind.dialect.prim_base import PrimOp, cast_result, int_list, int_list_values
from fusebind.dialect.prim_structured import ShapeOp
from fusebind.dialect.types import Shape, elem_of, num_elements, numpy_dtype, shape_of, tensor_type

Value = SSAValue | Operation

#: the per-dim integer list properties, in the order they are printed
GEOMETRY = ("window", "strides", "dilations", "lhs_dilation", "pads_lo", "pads_hi")


def dilated_size(n: int, lhs: int) -> int:
    """The size of a dim of n elements dilated by lhs (lhs - 1 holes between neighbours)."""
    return 0 if n == 0 else lhs * (n - 1) + 1


def window_out_size(n: int, k: int, s: int, d: int, lhs: int, lo: int, hi: int) -> int:
    """The number of window positions along one dim (may be < 1: the window does not fit)."""
    return (dilated_size(n, lhs) + lo + hi - d * (k - 1) - 1) // s + 1


def window_table(n: int, k: int, s: int, d: int, lhs: int, lo: int, out: int) -> np.ndarray:
    """(k, out) int32: the position in x that window tap k at output position o reads along one
    dim, or -1 where it reads the fill (padding, or a hole of the input dilation)."""
    p = np.arange(out, dtype=np.int64)[None, :] * s + np.arange(k, dtype=np.int64)[:, None] * d - lo
    ok = (p >= 0) & (p < dilated_size(n, lhs)) & (p % lhs == 0)
    return np.where(ok, p // lhs, -1).astype(np.int32)


def window_values(x: np.ndarray, geometry: dict[str, tuple[int, ...]], fill: float) -> np.ndarray:
    """The window of the numpy array `x` (the op's semantics, see the module docstring)."""
    win = geometry["window"]
    dd = len(win)
    lead = x.shape[:x.ndim - dd]
    ins = x.shape[x.ndim - dd:]
    outs = [window_out_size(ins[i], win[i], geometry["strides"][i], geometry["dilations"][i],
                            geometry["lhs_dilation"][i], geometry["pads_lo"][i], geometry["pads_hi"][i])
            for i in range(dd)]
    tables = [window_table(ins[i], win[i], geometry["strides"][i], geometry["dilations"][i],
                           geometry["lhs_dilation"][i], geometry["pads_lo"][i], outs[i]) for i in range(dd)]
    out_shape = tuple(lead) + tuple(win) + tuple(outs)
    if math.prod(out_shape) == 0:
        return np.zeros(out_shape, x.dtype)
    idx, mask = [], np.ones((1,) * (2 * dd), bool)
    for i, t in enumerate(tables):  # t broadcast to k_i at axis i and o_i at axis dd + i
        shape = [1] * (2 * dd)
        shape[i], shape[dd + i] = t.shape
        t = t.reshape(shape)
        idx.append(np.maximum(t, 0))
        mask = mask & (t >= 0)
    vals = x[(Ellipsis, *idx)]  # advanced indices, adjacent at the end: (lead..., k..., o...)
    if mask.all():
        return np.ascontiguousarray(vals)
    return np.where(mask, vals, np.asarray(fill).astype(x.dtype) if x.dtype != np.bool_ else bool(fill))


@irdl_op_definition
class WindowOp(ShapeOp):
    """The sliding-window index map of the last len(window) dims (see the module docstring)."""

    name = "prim.window"
    KIND: ClassVar[str] = "window"
    INDEX_MAP: ClassVar[bool] = True
    window = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)
    lhs_dilation = prop_def(DenseArrayBase)
    pads_lo = prop_def(DenseArrayBase)
    pads_hi = prop_def(DenseArrayBase)
    fill = prop_def(FloatAttr)
    LIST_PROPS: ClassVar[tuple[str, ...]] = GEOMETRY

    def __init__(self, x: Value, window: Sequence[int], *, strides: Sequence[int] | None = None,
                 dilations: Sequence[int] | None = None, lhs_dilation: Sequence[int] | None = None,
                 pads_lo: Sequence[int] | None = None, pads_hi: Sequence[int] | None = None, fill: float = 0.0):
        x = SSAValue.get(x)
        d = len(window)
        geo = {"window": tuple(window)}
        for key, v, default in (("strides", strides, 1), ("dilations", dilations, 1),
                                ("lhs_dilation", lhs_dilation, 1), ("pads_lo", pads_lo, 0), ("pads_hi", pads_hi, 0)):
            geo[key] = (default,) * d if v is None else tuple(int(i) for i in v)
        out = type(self).infer_shape(shape_of(x.type), **geo)
        props: dict[str, Any] = {k: int_list(v) for k, v in geo.items()}
        props["fill"] = FloatAttr(float(fill), f64)
        super().__init__(operands=[x], result_types=[tensor_type(out, elem_of(x.type))], properties=props)

    @classmethod
    def infer_shape(cls, *operand_shapes: Shape, **props: Any) -> Shape:
        """`x.shape[:-d] + window + outs` (a dynamic windowed dim gives a dynamic output dim)."""
        (shape,) = operand_shapes
        geo = {k: tuple(int(v) for v in props[k]) for k in GEOMETRY}
        d = len(geo["window"])
        if not 1 <= d <= len(shape):
            raise ShapeInferenceError(f"{cls.name}: a window of {d} dims needs an operand of rank >= {max(d, 1)}, "
                                      f"got rank {len(shape)}")
        for key in GEOMETRY[1:]:
            if len(geo[key]) != d:
                raise ShapeInferenceError(f"{cls.name}: {key} has {len(geo[key])} entries; the window has {d} dims")
        for key in GEOMETRY[:4]:
            if any(v < 1 for v in geo[key]):
                raise ShapeInferenceError(f"{cls.name}: {key} entries must be >= 1, got {list(geo[key])}")
        for key in GEOMETRY[4:]:
            if any(v < 0 for v in geo[key]):
                raise ShapeInferenceError(f"{cls.name}: {key} entries must be >= 0, got {list(geo[key])} "
                                          "(a negative pad is a crop: slice the operand first)")
        lead = len(shape) - d
        outs: list[int | None] = []
        for i in range(d):
            n = shape[lead + i]
            if n is None:
                outs.append(None)
                continue
            o = window_out_size(n, geo["window"][i], geo["strides"][i], geo["dilations"][i], geo["lhs_dilation"][i],
                                geo["pads_lo"][i], geo["pads_hi"][i])
            if o < 1 and n > 0:
                span = geo["dilations"][i] * (geo["window"][i] - 1) + 1
                raise ShapeInferenceError(
                    f"{cls.name}: dim {lead + i}: the window spans {span} elements, more than the "
                    f"{dilated_size(n, geo['lhs_dilation'][i]) + geo['pads_lo'][i] + geo['pads_hi'][i]} of the "
                    "padded (dilated) operand")
            outs.append(max(o, 0))
        return tuple(shape[:lead]) + geo["window"] + tuple(outs)

    def geometry(self) -> dict[str, tuple[int, ...]]:
        return {k: int_list_values(getattr(self, k)) for k in GEOMETRY}

    def shape_props(self) -> dict[str, Any]:
        return self.geometry()

    def region_alone(self) -> bool:
        """A window is compiled in a region even with no neighbour (a conv's im2col: one loop
        writes it; its numpy reference builds index arrays of the result's size)."""
        return True

    def reference_index_passes(self, operand: int) -> int:
        """How many times the reference (arm 0) moves x's bytes (compiler/cost.py asks): it
        reads x by advanced indexing into a result-sized array, then selects the fill into
        another (two result-sized passes, each K times x's size for a K-tap window)."""
        x_elems = num_elements(shape_of(self.x.type))
        out_elems = num_elements(self.result_shape())
        if not x_elems or out_elems is None:
            return 1
        return 1 + -(-2 * out_elems // x_elems)

    def describe(self, operands: Sequence[str] = ()) -> str:
        """`window x k [3, 3] strides [2, 2] pads [1, 1, 1, 1] fill -inf` (defaults left out)."""
        geo = self.geometry()
        text = f"window {operands[0] if operands else '#0'} k {list(geo['window'])}"
        for key, default in (("strides", 1), ("dilations", 1), ("lhs_dilation", 1)):
            if any(v != default for v in geo[key]):
                text += f" {key} {list(geo[key])}"
        if any(geo["pads_lo"]) or any(geo["pads_hi"]):
            text += f" pads {list(geo['pads_lo'] + geo['pads_hi'])}"
        fill = self.fill_value()
        if any(geo["pads_lo"]) or any(geo["pads_hi"]) or any(v != 1 for v in geo["lhs_dilation"]):
            text += f" fill {int(fill) if math.isfinite(fill) and fill == int(fill) else fill}"
        return text

    def fill_value(self) -> float:
        return float(self.fill.value.data)

    def tables(self) -> list[np.ndarray] | None:
        """One (k_i, o_i) int32 table per windowed dim (`window_table`), None if a windowed dim of
        x is dynamic."""
        geo = self.geometry()
        d = len(geo["window"])
        shape = shape_of(self.x.type)
        ins, outs = shape[len(shape) - d:], self.result_shape()[len(shape):]
        if any(n is None for n in ins):
            return None
        return [window_table(ins[i], geo["window"][i], geo["strides"][i], geo["dilations"][i],
                             geo["lhs_dilation"][i], geo["pads_lo"][i], outs[i]) for i in range(d)]

    def verify_op(self) -> None:
        elem = self._elems_agree()
        self._check_inferred(elem)
        fill = self.fill_value()
        dt = numpy_dtype(elem)
        if dt.kind in "iub" and not math.isfinite(fill):
            raise VerifyException(f"{self.name}: fill {fill} is not a value of the {elem} operand")
        if dt.kind == "b" and fill not in (0.0, 1.0):
            raise VerifyException(f"{self.name}: fill {fill} is not a value of the {elem} operand (0 or 1)")
        if dt.kind in "iu" and (fill != int(fill) or not np.iinfo(dt).min <= int(fill) <= np.iinfo(dt).max):
            raise VerifyException(f"{self.name}: fill {fill} is not a value of the {elem} operand")

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        return cast_result(self, window_values(np.asarray(arrays[0]), self.geometry(), self.fill_value()))


WINDOW_OPS: tuple[type[PrimOp], ...] = (WindowOp,)
