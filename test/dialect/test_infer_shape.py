"""infer_shape: each op's one shape rule gives numpy's result shape, and refuses with the op's name."""

from __future__ import annotations

import numpy as np
import pytest

from fusebind.dialect import prim
from fusebind.dialect.errors import ShapeInferenceError


@pytest.mark.parametrize("shapes", [((4, 1), (1, 3)), ((2, 3), (3,)), ((), (5,)), ((2, 1, 4), (3, 1))])
def test_elementwise_is_numpys_broadcast(shapes: tuple) -> None:
    assert prim.AddOp.infer_shape(*shapes) == np.broadcast_shapes(*shapes)
    assert prim.SelectOp.infer_shape(shapes[0], *shapes) == np.broadcast_shapes(*shapes)


def test_reductions_transpose_matmul_reshape_broadcast_to_match_numpy() -> None:
    x = np.zeros((2, 3, 4))
    assert prim.ReduceSumOp.infer_shape(x.shape, axes=[0, 2], keepdims=False) == x.sum(axis=(0, 2)).shape
    assert prim.ReduceMaxOp.infer_shape(x.shape, axes=[1], keepdims=True) == x.max(axis=1, keepdims=True).shape
    assert prim.TransposeOp.infer_shape(x.shape, perm=[2, 0, 1]) == np.transpose(x, (2, 0, 1)).shape
    assert prim.MatmulOp.infer_shape((5, 2, 3), (3, 7)) == np.matmul(np.zeros((5, 2, 3)), np.zeros((3, 7))).shape
    assert prim.ReshapeOp.infer_shape(x.shape, shape=(None, 6)) == x.reshape(-1, 6).shape
    assert prim.BroadcastToOp.infer_shape((3, 1), shape=(2, 3, None)) == (2, 3, 1)
    assert prim.BroadcastToOp.infer_shape((3, 4), shape=(2, 3, None)) == np.broadcast_to(np.zeros((3, 4)), (2, 3, 4)).shape
    assert prim.ExpOp.infer_shape((None, 4)) == (None, 4)  # dynamic dims stay dynamic


@pytest.mark.parametrize("call, message", [
    (lambda: prim.MulOp.infer_shape((4,), (5,)), "prim.mul: operand shapes (4,) and (5,) do not broadcast"),
    (lambda: prim.ReduceSumOp.infer_shape((2, 3), axes=[2]), "prim.reduce_sum: axis 2 is out of range for rank 2"),
    (lambda: prim.TransposeOp.infer_shape((2, 3), perm=[0, 0]),
     "prim.transpose: permutation [0, 0] is not a permutation of 0..1"),
    (lambda: prim.MatmulOp.infer_shape((2, 3), (4, 5)), "prim.matmul: contraction dims differ: 3 (lhs) vs 4 (rhs)"),
    (lambda: prim.ReshapeOp.infer_shape((3, 4), shape=(None, 5)), "prim.reshape: cannot reshape (3, 4) to (?, 5)"),
    (lambda: prim.BroadcastToOp.infer_shape((3,), shape=(4, 2)), "prim.broadcast_to: shape (3,) cannot broadcast to (4, 2)"),
])
def test_refusals_name_the_op(call, message: str) -> None:
    with pytest.raises(ShapeInferenceError) as info:
        call()
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


def test_select_constructor_names_the_shapes() -> None:
    """Before: 'prim.select: operand shapes do not broadcast' with no shapes."""
    from xdsl.ir import Block

    from fusebind.dialect.types import tensor_type

    c, a, b = Block(arg_types=[tensor_type((2,), "i1"), tensor_type((4,), "f32"), tensor_type((4,), "f32")]).args
    with pytest.raises(ShapeInferenceError, match=r"^prim.select: operand shapes \(2,\) and \(4,\) and \(4,\) do not "
                                                  r"broadcast$"):
        prim.SelectOp(c, a, b)
