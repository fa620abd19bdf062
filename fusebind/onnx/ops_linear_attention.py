"""ONNX `LinearAttention` (opset 27..): the recurrent state update over the sequence, unrolled at
import (the sequence length is static), as the reference computes it
(onnx/reference/ops/op_linear_attention.py): per step, an optional gate (state * exp(decay)),
an optional delta correction (v <- beta * (v - state^T k)), the rank-1 update state += k v^T,
and the read q^T state (kv heads repeated for grouped queries), all in float32.
Must not: loop at run time (each step is prims of the one trace).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fusebind.onnx.registry import NodeContext, onnx_op

_RULES = ("linear", "gated", "delta", "gated_delta")


def _heads(x: Any, n: int) -> Any:
    b, t, hd = x.shape
    return np.transpose(np.reshape(x, (b, t, n, hd // n)), (0, 2, 1, 3))


@onnx_op("LinearAttention", since=27)
def linear_attention(ctx: NodeContext, q: Any, k: Any, v: Any, past: Any = None, decay: Any = None,
                     beta: Any = None) -> Any:
    rule = ctx.attr("update_rule", "gated_delta")
    qh, kvh = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    if rule not in _RULES or not qh or not kvh or qh % kvh or q.ndim != 3:
        raise ctx.unsupported(f"update_rule {rule!r} with q_num_heads {qh}, kv_num_heads {kvh}, query rank {q.ndim}")
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gating != (decay is not None) or delta != (beta is not None):
        raise ctx.unsupported(f"update_rule {rule!r} with decay {'given' if decay is not None else 'omitted'} and "
                              f"beta {'given' if beta is not None else 'omitted'}")
    f32 = np.float32
    b, t, _ = q.shape
    dk, dv, group = q.shape[-1] // qh, v.shape[-1] // kvh, qh // kvh
    q4, k4, v4 = (_heads(x, n).astype(f32) for x, n in ((q, qh), (k, kvh), (v, kvh)))
    if decay is not None:
        decay = (np.transpose(np.reshape(decay, (b, t, kvh, 1)), (0, 2, 1, 3)) if decay.shape[-1] == kvh
                 else _heads(decay, kvh)).astype(f32)
    if beta is not None:
        beta = np.transpose(np.reshape(beta, (b, t, beta.shape[-1], 1)), (0, 2, 1, 3)).astype(f32)
    state = np.zeros((b, kvh, dk, dv), f32) if past is None else past.astype(f32)
    scale = ctx.attr("scale")
    scale = f32(1.0 / math.sqrt(dk) if not scale else scale)
    outs = []
    for i in range(t):
        k_t, v_t = k4[:, :, i, :], v4[:, :, i, :]
        if gating:
            state = state * np.expand_dims(np.exp(decay[:, :, i, :]), -1)
        if delta:
            v_t = beta[:, :, i, :] * (v_t - np.einsum("bhdm,bhd->bhm", state, k_t))
        state = state + np.expand_dims(k_t, -1) * np.expand_dims(v_t, -2)
        read = state if group == 1 else np.repeat(state, group, axis=1)
        outs.append(scale * np.einsum("bhd,bhdm->bhm", q4[:, :, i, :], read))
    out = np.reshape(np.transpose(np.stack(outs, axis=2), (0, 2, 1, 3)), (b, t, qh * dv)).astype(q.dtype)
    return out, state.astype(q.dtype if past is None else past.dtype)
