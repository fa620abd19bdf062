"""ONNX training-domain optimizers (ai.onnx.preview.training): Adagrad, Adam, Momentum (standard and
Nesterov), one or several tensors per node, as the spec's reference writes their update rules.

The iteration count T is a parameter (the rules branch on T > 0): the importer specializes a graph
input that feeds it on its value (importer.PARAM_INPUTS). The arithmetic is the reference's numpy
on the same dtypes (a float32 rate over an int64 count promotes as numpy promotes; results are cast
back to each tensor's dtype).

Must not: implement Gradient (it needs differentiation of a graph: refused as an unknown op).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusebind.onnx.registry import NodeContext, onnx_op

DOMAIN = "ai.onnx.preview.training"


def _count(ctx: NodeContext, t: Any) -> float:
    if not isinstance(t, (np.ndarray, np.generic)):
        raise ctx.unsupported("an iteration count computed from the model's inputs")
    return np.asarray(t)


def _groups(data: tuple[Any, ...], per: int) -> list[tuple[Any, ...]]:
    n = len(data) // per
    return [tuple(data[i + n * j] for j in range(per)) for i in range(n)]


@onnx_op("Adagrad", domain=DOMAIN)
def adagrad(ctx: NodeContext, r: Any, t: Any, *data: Any) -> Any:
    t = _count(ctx, t)
    decay, eps, norm = ctx.attr("decay_factor", 0.0), ctx.attr("epsilon", 0.0), ctx.attr("norm_coefficient", 0.0)
    xs, hs = [], []
    for x, g, h in _groups(data, 3):
        r_ = r / (1 + t * decay)
        g_reg = norm * x + g
        h_new = h + g_reg * g_reg
        x_new = x - r_ * g_reg / (np.sqrt(h_new) + eps)
        xs.append(x_new.astype(x.dtype))
        hs.append(h_new.astype(h.dtype))
    return tuple(xs + hs)


@onnx_op("Adam", domain=DOMAIN)
def adam(ctx: NodeContext, r: Any, t: Any, *data: Any) -> Any:
    t = _count(ctx, t)
    alpha, beta = ctx.attr("alpha", 0.9), ctx.attr("beta", 0.999)
    eps, norm, post = ctx.attr("epsilon", 0.0), ctx.attr("norm_coefficient", 0.0), ctx.attr("norm_coefficient_post", 0.0)
    xs, vs, hs = [], [], []
    for x, g, v, h in _groups(data, 4):
        g_reg = norm * x + g
        v_new = alpha * v + (1 - alpha) * g_reg
        h_new = beta * h + (1 - beta) * (g_reg * g_reg)
        h_sqrt = np.sqrt(h_new) + eps
        r_adj = r * np.sqrt(1 - beta ** t) / (1 - alpha ** t) if t > 0 else r
        x_final = (1 - post) * (x - r_adj * (v_new / h_sqrt))
        xs.append(x_final.astype(x.dtype))
        vs.append(v_new.astype(v.dtype))
        hs.append(h_new.astype(h.dtype))
    return tuple(xs + vs + hs)


@onnx_op("Momentum", domain=DOMAIN)
def momentum(ctx: NodeContext, r: Any, t: Any, *data: Any) -> Any:
    t = _count(ctx, t)
    alpha, beta, norm = ctx.attr("alpha", 0.0), ctx.attr("beta", 0.0), ctx.attr("norm_coefficient", 0.0)
    mode = ctx.attr("mode", "standard")
    if mode not in ("standard", "nesterov"):
        raise ctx.unsupported(f"the mode {mode!r}")
    xs, vs = [], []
    for x, g, v in _groups(data, 3):
        g_reg = norm * x + g
        v_new = alpha * v + (beta if t > 0 else 1) * g_reg
        x_new = x - r * (v_new if mode == "standard" else g_reg + alpha * v_new)
        xs.append(x_new.astype(x.dtype))
        vs.append(v_new.astype(v.dtype))
    return tuple(xs + vs)
