"""ONNX signal ops: HannWindow / HammingWindow / BlackmanWindow, MelWeightMatrix (constants of their
size and rate inputs) and DFT (a constant real-linear map along the axis).

What the spec's reference computes is the meaning, so these handlers run the reference itself where
the result is a constant (every input constant at import: the importer specializes a graph input
that is an op's parameter on its value), and, for DFT, apply to the traced signal the matrix the
reference gives on the basis vectors: for a fixed length, axis and flags DFT is linear over the reals
in the [..., n, 1|2] representation, so one matmul by that constant is the reference's answer up to
float rounding (the reference computes in complex128 and casts).

Must not: fold ops whose inputs are traced (a traced window size is data: refused).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.onnx.registry import NodeContext, onnx_op


def _is_const(x: Any) -> bool:
    return x is None or isinstance(x, (np.ndarray, np.generic))


def _reference_run(ctx: NodeContext, *inputs: Any) -> tuple[Any, ...]:
    """The spec reference's outputs of this node for constant `inputs` (a one-node model run by
    onnx's ReferenceEvaluator: the pinned onnx's reference is the spec's meaning)."""
    import warnings

    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    names = [n or "" for n in ctx.node.input]
    feeds = {n: np.asarray(v) for n, v in zip(names, inputs) if n and v is not None}
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in feeds.items()]
    outs = [helper.make_tensor_value_info(o, 0, None) for o in ctx.node.output if o]
    graph = helper.make_graph([ctx.node], "fold", ins, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(ctx.node.domain or "", ctx.opset)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tuple(np.asarray(o) for o in ReferenceEvaluator(model).run(None, feeds))


def _constant_op(ctx: NodeContext, *inputs: Any) -> Any:
    if not all(_is_const(i) for i in inputs):
        raise ctx.unsupported("inputs computed from the model's inputs (its output would be data-dependent)")
    out = _reference_run(ctx, *inputs)
    return out if len(out) > 1 else out[0]


onnx_op("HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix", since=17)(_constant_op)


@onnx_op("DFT", since=17)
def dft(ctx: NodeContext, x: Any, dft_length: Any = None, axis_in: Any = None) -> Any:
    if not (_is_const(dft_length) and _is_const(axis_in)):
        raise ctx.unsupported("a dft_length or axis computed from the model's inputs")
    if x.dtype.kind != "f":
        raise ctx.unsupported(f"a DFT of {x.dtype} data")
    shape = tuple(int(d) for d in x.shape)
    r = len(shape)
    axis = int(np.asarray(axis_in)) if axis_in is not None else int(ctx.attr("axis", 1 if ctx.opset < 20 else -2))
    axis %= r
    if axis == r - 1:
        raise ctx.unsupported("a DFT along the last (real/imaginary) axis")
    n, c = shape[axis], shape[-1]
    length = _default_length(ctx, n) if dft_length is None else int(np.asarray(dft_length))
    mat, m, c_out = _dft_matrix(ctx, n, c, length, {k: v for k, v in ctx.attrs.items() if k != "axis"})
    # in float64, as the reference: a spectrum's cancellations are then the reference's, not f32's
    moved = np.moveaxis(x.astype(np.float64), axis, -2)  # [..., n, c]
    lead = tuple(int(d) for d in moved.shape[:-2])
    flat = np.reshape(moved, lead + (n * c,))
    out = np.reshape(np.matmul(flat, mat), lead + (m, c_out))
    return np.moveaxis(out, -2, axis).astype(x.dtype)


def _dft_matrix(ctx: NodeContext, n: int, c: int, length: int, attrs: dict[str, Any]) -> tuple[Any, int, int]:
    """(matrix [n*c, m*c_out], m, c_out): the reference DFT of each basis signal [n, c] (row k: the
    response to basis vector k), so a signal's transform is its flattening times the matrix."""
    from onnx import helper

    basis = np.eye(n * c, dtype=np.float64).reshape(n * c, n, c)  # one signal per basis vector, axis 1
    if ctx.opset >= 20:
        node = helper.make_node("DFT", ["x", "len", "axis"], ["y"], **attrs)
        args = [basis, np.asarray(length, np.int64), np.asarray(1, np.int64)]
    else:
        node = helper.make_node("DFT", ["x", "len"], ["y"], axis=1, **attrs)
        args = [basis, np.asarray(length, np.int64)]
    sub = NodeContext(node=node, attrs={}, opset=max(ctx.opset, 17), input_names=list(node.input))
    (resp,) = _reference_run(sub, *args)
    m, c_out = int(resp.shape[1]), int(resp.shape[2])
    return resp.reshape(n * c, m * c_out), m, c_out


@onnx_op("STFT", since=17)
def stft(ctx: NodeContext, x: Any, frame_step: Any, window: Any = None, frame_length: Any = None) -> Any:
    """Frames (a constant-index gather), times the window, then the reference DFT's matrix along the
    frame (onesided by default), as the reference's STFT."""
    if not (_is_const(frame_step) and _is_const(frame_length)):
        raise ctx.unsupported("a frame_step or frame_length computed from the model's inputs")
    if x.dtype.kind != "f":
        raise ctx.unsupported(f"an STFT of {x.dtype} data")
    n, c = int(x.shape[-2]), int(x.shape[-1])
    ws = int(window.shape[0]) if window is not None else None
    length = int(np.asarray(frame_length)) if frame_length is not None else (ws if ws is not None else n)
    ws = length if ws is None else ws
    step = int(np.asarray(frame_step))
    frames_n = 1 + (n - length) // step
    idx = (np.arange(frames_n)[:, None] * step + np.arange(ws)[None, :]).reshape(-1)
    if frames_n <= 0 or idx.max() >= n:
        raise ctx.unsupported("frames that run past the signal's end")
    lead = tuple(int(d) for d in x.shape[:-2])
    frames = np.reshape(np.take(x, idx.astype(np.int64), axis=-2), lead + (frames_n, ws, c))
    if window is not None:
        frames = frames * np.reshape(window, (ws, 1))
    mat, m, c_out = _dft_matrix(ctx, ws, c, length, {"onesided": int(ctx.attr("onesided", 1))})
    flat = np.reshape(frames.astype(np.float64), lead + (frames_n, ws * c))
    return np.reshape(np.matmul(flat, mat), lead + (frames_n, m, c_out)).astype(x.dtype)


def _default_length(ctx: NodeContext, n: int) -> int:
    if ctx.attr("inverse", 0) and ctx.attr("onesided", 0):
        return 2 * (n - 1)
    return n
