"""prim.window (issue 16): its shape rule, reference against a plain loop, facts and refusals."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from xdsl.ir import Block

from fusebind.dialect import interpret, parse_module, prim
from fusebind.dialect.errors import ShapeInferenceError
from fusebind.dialect.prim_window import WindowOp, window_table
from fusebind.dialect.types import tensor_type


def _loop_window(x: np.ndarray, k, s, d, ld, lo, hi, fill) -> np.ndarray:
    """The window by its definition: one Python loop over every result element."""
    nd = len(k)
    ins = x.shape[x.ndim - nd:]
    dil = [ld[i] * (ins[i] - 1) + 1 for i in range(nd)]
    outs = [(dil[i] + lo[i] + hi[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(nd)]
    lead = x.shape[:x.ndim - nd]
    out = np.empty(lead + tuple(k) + tuple(outs), x.dtype)
    for a in itertools.product(*map(range, lead)):
        for kk in itertools.product(*map(range, k)):
            for oo in itertools.product(*map(range, outs)):
                pos, ok = [], True
                for i in range(nd):
                    p = oo[i] * s[i] + kk[i] * d[i] - lo[i]
                    ok &= 0 <= p < dil[i] and p % ld[i] == 0
                    pos.append(p // ld[i])
                out[a + kk + oo] = x[a + tuple(pos)] if ok else fill
    return out


def _op(shape, elem, window, **geo) -> WindowOp:
    block = Block(arg_types=[tensor_type(shape, elem)])
    return WindowOp(block.args[0], window, **geo)


_CASES = [  # (x shape, window, strides, dilations, lhs_dilation, pads_lo, pads_hi)
    ((2, 3, 7), (3,), (1,), (1,), (1,), (1,), (1,)),
    ((1, 2, 5, 6), (2, 3), (2, 1), (1, 2), (1, 1), (1, 0), (0, 2)),
    ((2, 4, 4), (3,), (1,), (2,), (2,), (4,), (5,)),  # conv_transpose's dilated input
    ((1, 1, 3, 4, 5), (2, 2, 3), (1, 2, 2), (1, 1, 1), (1, 2, 1), (0, 1, 2), (1, 1, 0)),
    ((5,), (5,), (1,), (1,), (1,), (0,), (0,)),  # the whole operand is one window
]


@pytest.mark.parametrize("case", _CASES)
def test_reference_matches_a_plain_loop(case) -> None:
    shape, k, s, d, ld, lo, hi = case
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    op = _op(shape, "f32", k, strides=s, dilations=d, lhs_dilation=ld, pads_lo=lo, pads_hi=hi, fill=-7.0)
    op.verify()
    want = _loop_window(x, k, s, d, ld, lo, hi, -7.0)
    got = op.reference(x)
    assert op.result_shape() == want.shape == got.shape
    assert got.dtype == np.float32 and np.array_equal(got, want)


def test_integer_and_bool_operands_keep_their_type() -> None:
    x = np.arange(12, dtype=np.int16).reshape(2, 6)
    op = _op(x.shape, "i16", (2,), strides=(2,), pads_lo=(1,), fill=-32768.0)
    got = op.reference(x)
    assert got.dtype == np.int16 and np.array_equal(got, _loop_window(x, (2,), (2,), (1,), (1,), (1,), (0,), -32768))
    b = np.array([[True, False, True]])
    opb = _op(b.shape, "i1", (2,), pads_hi=(1,), fill=1.0)
    assert np.array_equal(opb.reference(b), [[[True, False, True], [False, True, True]]])


def test_table_marks_padding_and_holes() -> None:
    # n=3 dilated by 2 -> positions 0..4 hold x[0], hole, x[1], hole, x[2]; padded by 1 at the front
    t = window_table(3, 2, 1, 1, 2, 1, 6)
    assert t.tolist() == [[-1, 0, -1, 1, -1, 2], [0, -1, 1, -1, 2, -1]]


def test_facts_and_interpreter() -> None:
    op = _op((1, 2, 5, 5), "f32", (3, 3), strides=(2, 2), pads_lo=(1, 1), pads_hi=(1, 1))
    assert prim.PRIM_OPS["window"] is WindowOp and isinstance(op, prim.ShapeOp) and op.flops() == 0.0
    assert WindowOp.INDEX_MAP and op.region_alone()
    assert op.describe(["x"]) == "window x k [3, 3] strides [2, 2] pads [1, 1, 1, 1] fill 0"
    assert WindowOp.infer_shape((None, 4, 9), window=[3], strides=[2], dilations=[1], lhs_dilation=[1],
                                pads_lo=[0], pads_hi=[0]) == (None, 4, 3, 4)
    assert WindowOp.infer_shape((2, None), window=[3], strides=[1], dilations=[1], lhs_dilation=[1],
                                pads_lo=[0], pads_hi=[0]) == (2, 3, None)
    module = parse_module("""
    func.func @f(%a: tensor<2x5xf32>) -> tensor<2x2x4xf32> {
      %0 = prim.window %a {window = [2], strides = [1], dilations = [1], lhs_dilation = [1], pads_lo = [0],
                           pads_hi = [0], fill = 0.0 : f64} : tensor<2x5xf32> -> tensor<2x2x4xf32>
      func.return %0 : tensor<2x2x4xf32>
    }""")
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    got = interpret(module, x)
    want = np.lib.stride_tricks.sliding_window_view(x, 2, axis=1).transpose(0, 2, 1)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("shape, geo, message", [
    ((4, 6), dict(window=[2], strides=[1, 1]), "prim.window: strides has 2 entries; the window has 1 dims"),
    ((4, 6), dict(window=[2], dilations=[0]), "prim.window: dilations entries must be >= 1, got [0]"),
    ((4, 6), dict(window=[2], pads_lo=[-1]),
     "prim.window: pads_lo entries must be >= 0, got [-1] (a negative pad is a crop: slice the operand first)"),
    ((6,), dict(window=[2, 2]), "prim.window: a window of 2 dims needs an operand of rank >= 2, got rank 1"),
    ((4, 3), dict(window=[4]),
     "prim.window: dim 1: the window spans 4 elements, more than the 3 of the padded (dilated) operand"),
])
def test_shape_rule_refusals(shape, geo, message) -> None:
    full = dict(strides=[1], dilations=[1], lhs_dilation=[1], pads_lo=[0], pads_hi=[0])
    full.update(geo)
    with pytest.raises(ShapeInferenceError) as err:
        WindowOp.infer_shape(shape, **full)
    assert str(err.value) == message
