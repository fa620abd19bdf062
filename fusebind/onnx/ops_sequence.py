"""ONNX sequence ops inside a graph: SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceErase,
SequenceAt, SequenceLength, SplitToSequence and ConcatFromSequence.

A sequence is a `values.SequenceValue` while the graph is traced: a tuple of tensors (traced arrays
or folded constants) whose length is static, so each op here is Python bookkeeping on the tuple
and only SplitToSequence (slices) and ConcatFromSequence (np.concatenate / np.stack) build prim IR.
That needs every position and split size when tracing: they are constants, or graph inputs the
importer makes parameters that specialize the function by value (importer.PARAM_INPUTS, as a
Reshape's shape); a position computed from traced data is refused, naming the node. The graph's
own inputs and outputs stay tensors (the importer refuses a sequence there), so no sequence ever
crosses the jitted function's boundary.

Where the reference evaluator and the spec differ, the spec is built: SequenceInsert at position
len(seq) appends (the reference's modulo puts it first). A position out of range is a
FusebindIndexError naming the node and the valid range (the reference's list IndexError).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from fusebind.dialect.errors import FusebindIndexError, FusebindValueError
from fusebind.onnx.dtypes import numpy_dtype_of
from fusebind.onnx.registry import NodeContext, onnx_op
from fusebind.onnx.values import SequenceValue, const_array, const_inputs, norm_axis, takes_sequences


def _seq(ctx: NodeContext, s: Any, i: int = 0) -> SequenceValue:
    if not isinstance(s, SequenceValue):
        name = ctx.input_names[i] if i < len(ctx.input_names) else "?"
        raise ctx.unsupported(f"its input {name!r} is a tensor where ONNX takes a sequence")
    return s


def _ints(ctx: NodeContext, x: Any, what: str) -> np.ndarray:
    v = const_array(ctx, x, what)
    if v.dtype.kind not in "iu":
        raise ctx.unsupported(f"the {what} input is {v.dtype}; ONNX takes int32 or int64")
    return v


def _position(ctx: NodeContext, x: Any, n: int, *, end_ok: bool) -> int:
    """The position input as an index into a sequence of `n` (in [-n, n-1], or [-n, n] with end_ok:
    an insertion may append)."""
    v = _ints(ctx, x, "position")
    if v.size != 1:
        raise ctx.unsupported(f"the position input has shape {v.shape}; ONNX takes one value")
    p, hi = int(v.reshape(-1)[0]), n if end_ok else n - 1
    if not -n <= p <= hi:
        raise FusebindIndexError(f"{ctx.where()}: position {p} is out of range for a sequence of {n} "
                                 f"tensors (ONNX allows {-n}..{hi})")
    return p + n if p < 0 else p


def _same_dtype(ctx: NodeContext, x: Any, dtype: np.dtype) -> None:
    if np.dtype(x.dtype) != dtype:
        raise ctx.unsupported(f"a tensor of {np.dtype(x.dtype)} in a sequence of {dtype} (ONNX's sequences hold "
                              "one element type)")


@onnx_op("SequenceEmpty", since=11)
@takes_sequences
def sequence_empty(ctx: NodeContext) -> SequenceValue:
    return SequenceValue((), numpy_dtype_of(ctx.attr("dtype", onnx.TensorProto.FLOAT), ctx.where()))


@onnx_op("SequenceConstruct", since=11)
@takes_sequences
def sequence_construct(ctx: NodeContext, *xs: Any) -> SequenceValue:
    if not xs or any(x is None or isinstance(x, SequenceValue) for x in xs):
        raise ctx.unsupported("SequenceConstruct takes one or more tensors")
    dtype = np.dtype(xs[0].dtype)
    for x in xs[1:]:
        _same_dtype(ctx, x, dtype)
    return SequenceValue(xs, dtype)


@onnx_op("SequenceInsert", since=11)
@const_inputs(2)
@takes_sequences
def sequence_insert(ctx: NodeContext, s: Any, x: Any, position: Any = None) -> SequenceValue:
    s = _seq(ctx, s)
    if x is None:
        raise ctx.unsupported("SequenceInsert without its tensor input")
    if isinstance(x, SequenceValue):
        raise ctx.unsupported("a sequence inserted into a sequence (fusebind's sequences hold tensors)")
    _same_dtype(ctx, x, s.dtype)
    p = len(s) if position is None else _position(ctx, position, len(s), end_ok=True)
    return SequenceValue(s.items[:p] + (x,) + s.items[p:], s.dtype)


@onnx_op("SequenceErase", since=11)
@const_inputs(1)
@takes_sequences
def sequence_erase(ctx: NodeContext, s: Any, position: Any = None) -> SequenceValue:
    s = _seq(ctx, s)
    if not len(s):
        raise FusebindIndexError(f"{ctx.where()}: erasing from an empty sequence")
    p = len(s) - 1 if position is None else _position(ctx, position, len(s), end_ok=False)
    return SequenceValue(s.items[:p] + s.items[p + 1:], s.dtype)


@onnx_op("SequenceAt", since=11)
@const_inputs(1)
@takes_sequences
def sequence_at(ctx: NodeContext, s: Any, position: Any = None) -> Any:
    s = _seq(ctx, s)
    if position is None:
        raise ctx.unsupported("SequenceAt without its position input")
    return s.items[_position(ctx, position, len(s), end_ok=False)]


@onnx_op("SequenceLength", since=11)
@takes_sequences
def sequence_length(ctx: NodeContext, s: Any) -> np.ndarray:
    return np.array(len(_seq(ctx, s)), dtype=np.int64)


@onnx_op("SplitToSequence", since=11)
@const_inputs(1)
@takes_sequences
def split_to_sequence(ctx: NodeContext, x: Any, split: Any = None) -> SequenceValue:
    """Chunks of `split` (a scalar: that size, the last one smaller; a list: those sizes, adding up to
    the dim) along `axis`; no split: chunks of 1, the axis dropped when keepdims=0."""
    if isinstance(x, SequenceValue):
        raise ctx.unsupported("its input is a sequence where ONNX takes a tensor")
    axis = norm_axis(ctx, ctx.attr("axis", 0), x.ndim)
    dim = x.shape[axis]
    if not isinstance(dim, (int, np.integer)):
        raise ctx.unsupported(f"the split axis {axis} has a symbolic size; the sequence's length must be known "
                              "when tracing")
    dim = int(dim)
    head = (slice(None),) * axis
    if split is None:
        if not ctx.attr("keepdims", 1):
            return SequenceValue([x[head + (i,)] for i in range(dim)], x.dtype)
        sizes = [1] * dim
    else:
        v = _ints(ctx, split, "split")
        if v.ndim == 0:
            step = int(v)
            if step <= 0:
                raise ctx.unsupported(f"a split size of {step} (ONNX takes a positive size)")
            sizes = [min(step, dim - i) for i in range(0, dim, step)]
        elif v.ndim == 1:
            sizes = [int(d) for d in v]
            if any(d < 0 for d in sizes) or sum(sizes) != dim:
                raise ctx.unsupported(f"split sizes {sizes} do not add up to the dim {dim} of axis {axis}")
        else:
            raise ctx.unsupported(f"the split input has rank {v.ndim}; ONNX takes a scalar or a 1-D list")
    out, start = [], 0
    for d in sizes:
        out.append(x[head + (slice(start, start + d),)])
        start += d
    return SequenceValue(out, x.dtype)


@onnx_op("ConcatFromSequence", since=11)
@takes_sequences
def concat_from_sequence(ctx: NodeContext, s: Any) -> Any:
    """The tensors joined along `axis` (new_axis=1: stacked on a new axis, so -1 appends one)."""
    s = _seq(ctx, s)
    if not len(s):
        raise FusebindValueError(f"{ctx.where()}: an empty sequence has no tensors to concatenate")
    if ctx.attr("axis") is None:
        raise ctx.unsupported("ConcatFromSequence without its required axis attribute")
    rank = s.items[0].ndim
    if ctx.attr("new_axis", 0):
        return np.stack(s.items, axis=norm_axis(ctx, ctx.attr("axis"), rank + 1))
    if rank == 0:
        raise ctx.unsupported("concatenating scalars without new_axis=1 (ONNX joins along an existing axis)")
    return np.concatenate(s.items, axis=norm_axis(ctx, ctx.attr("axis"), rank))
