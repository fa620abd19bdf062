"""prim.slice (issue 13): its shape rule, reference, facts and refusals against numpy's basic slicing."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Block

from fusebind.dialect import interpret, make_context, parse_module, print_module, prim
from fusebind.dialect.errors import ShapeInferenceError
from fusebind.dialect.prim_layout import SliceOp, slice_key, slice_length
from fusebind.dialect.types import tensor_type

# every (start, stop, step) of a dim of 5, numpy-normalized: forward, strided, backward, empty, clipped
_KEYS = [slice(a, b, c) for a, b, c in itertools.product((None, -7, -2, 0, 1, 4, 9), (None, -7, -1, 0, 3, 9),
                                                         (None, 1, 2, -1, -3))]


def _op(shape: tuple, elem: str, bounds: list[tuple[int, int, int]]) -> SliceOp:
    block = Block(arg_types=[tensor_type(shape, elem)])
    starts, limits, strides = zip(*bounds)
    return SliceOp(block.args[0], starts, limits, strides)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_every_normalized_slice_matches_numpy(n: int) -> None:
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    for key in _KEYS:
        b = key.indices(n)
        want = x[key, ::-1]
        bounds = [b, (2, -1, -1)]
        assert SliceOp.infer_shape(x.shape, starts=[b[0], 2], limits=[b[1], -1], strides=[b[2], -1]) == want.shape
        assert slice_length(*b) == want.shape[0] and np.array_equal(x[slice_key(*b)], x[key])
        op = _op(x.shape, "f32", bounds)
        op.verify()
        got = op.reference(x)
        assert got.dtype == want.dtype and np.array_equal(got, want), key
        assert got.flags.c_contiguous and not np.shares_memory(got, x)  # a copy: the executor may return it


def test_facts() -> None:
    op = _op((6, 4), "i1", [(1, 6, 2), (3, -1, -1)])
    assert prim.PRIM_OPS["slice"] is SliceOp and isinstance(op, prim.ShapeOp) and op.flops() == 0.0
    assert op.result.type == tensor_type((3, 4), "i1")
    x = np.random.default_rng(0).random((6, 4)) > 0.5
    assert np.array_equal(op.reference(x), x[1::2, ::-1])
    # a dynamic dim is not bounds-checked; the result size is the range's length
    assert SliceOp.infer_shape((None, 4), starts=[2, 0], limits=[8, 4], strides=[3, 1]) == (2, 4)


@pytest.mark.parametrize("props, message", [
    (dict(starts=[0], limits=[6, 4], strides=[1, 1]),
     "prim.slice: starts, limits and strides need one entry per dim of the rank-2 operand; found 1, 2 and 2"),
    (dict(starts=[0, 0], limits=[6, 4], strides=[0, 1]), "prim.slice: dim 0: stride must be nonzero"),
    (dict(starts=[0, -1], limits=[6, 4], strides=[1, 1]),
     "prim.slice: dim 1: start -1 is out of range [0, 4] for size 4 and stride 1"),
    (dict(starts=[0, 0], limits=[6, 4], strides=[-1, 1]),
     "prim.slice: dim 0: limit 6 is out of range [-1, 5] for size 6 "
     "and stride -1"),
])
def test_refusals_name_the_dim_and_bound(props: dict, message: str) -> None:
    with pytest.raises(ShapeInferenceError) as info:
        SliceOp.infer_shape((6, 4), **props)
    assert str(info.value) == message
    block = Block(arg_types=[tensor_type((6, 4), "f32")])
    with pytest.raises(ShapeInferenceError) as info:  # the constructor uses the same rule
        SliceOp(block.args[0], props["starts"], props["limits"], props["strides"])
    assert str(info.value) == message


def test_text_round_trip_and_interpreter() -> None:
    text = """func.func @f(%a: tensor<6x4xi32>) -> tensor<3x2xi32> {
  %0 = prim.slice %a {starts = [5, 0], limits = [-1, 4], strides = [-2, 2]} : tensor<6x4xi32> -> tensor<3x2xi32>
  func.return %0 : tensor<3x2xi32>
}"""
    module = parse_module(text, make_context())
    assert "prim.slice %a {starts = [5, 0], limits = [-1, 4], strides = [-2, 2]}" in print_module(module)
    x = np.arange(24, dtype=np.int32).reshape(6, 4)
    got = interpret(module, x)
    got = got[0] if isinstance(got, (tuple, list)) else got
    assert got.dtype == np.int32 and np.array_equal(got, x[::-2, ::2])
    assert isinstance(module.body.block.first_op.args[0].type, TensorType)
