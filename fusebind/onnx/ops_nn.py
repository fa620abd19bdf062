"""ONNX composite and activation handlers, decomposed into prims so that fusion and the
catalog see them as they see traced code: Softmax/LogSoftmax/Hardmax (the opset < 13 meaning:
coerce to 2-D at `axis`), Layer/RMS/MeanVariance/Lp/Instance/Group normalization,
BatchNormalization (inference), Gelu (none/tanh), HardSwish, HardSigmoid, Mish, Softplus,
Softsign, Elu, Selu, Celu, LeakyRelu, PRelu, ThresholdedRelu, Shrink, Swish, SwiGLU, Dropout
(inference), Einsum, RotaryEmbedding, Attention (opset 23..), CausalConvWithState. Importing
it also registers ops_resize, ops_grid, ops_select and ops_linear_attention (at the end).

The math is the spec's function body (its `*_expanded` graph) written with numpy calls, so the
same handler folds numpy constants and builds prim IR from traced arrays; the GELU tanh form is
the catalog's `gelu_tanh` term for term (x^3 as (x * x) * x) so the catalog can match it.
Python float constants are weak (NEP 50): a float32 input stays float32.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fusebind.onnx.values import const_inputs, is_const, lift, norm_axis
from fusebind.onnx.registry import NodeContext, onnx_op


def _erf(x: Any) -> Any:
    import fusebind as fb  # (the api's erf: numpy has none; it folds numpy arrays too)

    return fb.erf(x)


def _wants(ctx: NodeContext, i: int) -> bool:
    """Output `i` of the node is used (present and named)."""
    return i < len(ctx.node.output) and ctx.node.output[i] != ""


# --------------------------------------------------------------------------- softmax family


def _softmax(x: Any, axis: int) -> Any:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax(x: Any, axis: int) -> Any:
    d = x - np.max(x, axis=axis, keepdims=True)
    return d - np.log(np.sum(np.exp(d), axis=axis, keepdims=True))


def _hardmax(x: Any, axis: int) -> Any:
    n = x.shape[axis]
    shape = [1] * x.ndim
    shape[axis] = n
    first = np.expand_dims(np.argmax(x, axis=axis), axis)  # the first maximum, as the spec
    return np.where(first == np.arange(n, dtype=np.int64).reshape(tuple(shape)), 1, 0).astype(x.dtype)


def _rowwise(fn: Any) -> Any:
    def handler(ctx: NodeContext, x: Any) -> Any:
        if ctx.opset >= 13:
            return fn(x, norm_axis(ctx, ctx.attr("axis", -1), x.ndim))
        # before opset 13 the op works on x coerced to 2-D: (prod(dims[:axis]), prod(dims[axis:]))
        axis = norm_axis(ctx, ctx.attr("axis", 1), x.ndim)
        flat = np.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))
        return np.reshape(fn(flat, 1), tuple(x.shape))
    return handler


onnx_op("Softmax")(_rowwise(_softmax))
onnx_op("LogSoftmax")(_rowwise(_log_softmax))
onnx_op("Hardmax")(_rowwise(_hardmax))


# --------------------------------------------------------------------------- normalizations


@onnx_op("LayerNormalization")
def layer_normalization(ctx: NodeContext, x: Any, scale: Any, bias: Any = None) -> Any:
    axis = norm_axis(ctx, ctx.attr("axis", -1), x.ndim)
    eps = ctx.attr("epsilon", 1e-5)
    axes = tuple(range(axis, x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)
    y = d * inv * scale
    if bias is not None:
        y = y + bias
    return y, mean, inv


@onnx_op("RMSNormalization")
def rms_normalization(ctx: NodeContext, x: Any, scale: Any) -> Any:
    axis = norm_axis(ctx, ctx.attr("axis", -1), x.ndim)
    axes = tuple(range(axis, x.ndim))
    ms = np.mean(x * x, axis=axes, keepdims=True)
    return x * (1.0 / np.sqrt(ms + ctx.attr("epsilon", 1e-5))) * scale


@onnx_op("MeanVarianceNormalization")
def mean_variance_normalization(ctx: NodeContext, x: Any) -> Any:
    axes = tuple(norm_axis(ctx, a, x.ndim) for a in ctx.attr("axes", [0, 2, 3]))
    mean = np.mean(x, axis=axes, keepdims=True)
    sq = np.mean(x * x, axis=axes, keepdims=True)
    std = np.sqrt(sq - mean * mean)
    return (x - mean) / (std + 1e-9)


@onnx_op("LpNormalization")
def lp_normalization(ctx: NodeContext, x: Any) -> Any:
    axis, p = norm_axis(ctx, ctx.attr("axis", -1), x.ndim), ctx.attr("p", 2)
    if p not in (1, 2):
        raise ctx.unsupported(f"p = {p} (the spec allows 1 and 2)")
    norm = np.sum(np.abs(x), axis=axis, keepdims=True) if p == 1 else \
        np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
    return np.where(norm == 0, np.zeros((), x.dtype), x / norm)  # a zero vector stays zero (0/0 is 0)


@onnx_op("InstanceNormalization")
def instance_normalization(ctx: NodeContext, x: Any, scale: Any, bias: Any) -> Any:
    axes = tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = np.mean(x, axis=axes, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    return d / np.sqrt(var + ctx.attr("epsilon", 1e-5)) * np.reshape(scale, shape) + np.reshape(bias, shape)


@onnx_op("GroupNormalization", since=21)
def group_normalization(ctx: NodeContext, x: Any, scale: Any, bias: Any) -> Any:
    """Opset 21's meaning: scale and bias per channel (opset 18's per-group form is not built)."""
    g = ctx.attr("num_groups")
    n, c = x.shape[0], x.shape[1]
    grouped = np.reshape(x, (n, g, -1))
    mean = np.mean(grouped, axis=2, keepdims=True)
    d = grouped - mean
    var = np.mean(d * d, axis=2, keepdims=True)
    y = np.reshape(d / np.sqrt(var + ctx.attr("epsilon", 1e-5)), tuple(x.shape))
    shape = (1, c) + (1,) * (x.ndim - 2)
    return y * np.reshape(scale, shape) + np.reshape(bias, shape)


@onnx_op("BatchNormalization")
def batch_normalization(ctx: NodeContext, x: Any, scale: Any, bias: Any, mean: Any, var: Any) -> Any:
    if ctx.attr("training_mode", 0) or (ctx.opset < 9 and not ctx.attr("is_test", 1 if ctx.opset >= 7 else 0)):
        raise ctx.unsupported("training-mode BatchNormalization (running statistics); export the model for "
                              "inference")
    if any(_wants(ctx, i) for i in range(1, 5)):
        raise ctx.unsupported("BatchNormalization's running-statistics outputs (training mode)")
    shape = (1, -1) + (1,) * (x.ndim - 2)  # per channel, axis 1
    r = lambda v: np.reshape(v, shape)  # noqa: E731
    eps = ctx.attr("epsilon", 1e-5)
    return (x - r(mean)) / np.sqrt(r(var) + eps) * r(scale) + r(bias)


# --------------------------------------------------------------------------- activations


@onnx_op("Gelu")
def gelu(ctx: NodeContext, x: Any) -> Any:
    if ctx.attr("approximate", "none") == "tanh":  # the catalog's gelu_tanh, term for term
        x3 = (x * x) * x
        t = np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x3))
        return (0.5 * x) * (1.0 + t)
    return (0.5 * x) * (1.0 + _erf(x * (1.0 / math.sqrt(2.0))))


@onnx_op("HardSigmoid")
def hard_sigmoid(ctx: NodeContext, x: Any) -> Any:
    return np.clip(ctx.attr("alpha", 0.2) * x + ctx.attr("beta", 0.5), 0.0, 1.0)


@onnx_op("HardSwish")
def hard_swish(ctx: NodeContext, x: Any) -> Any:
    return x * np.clip(x * (1.0 / 6.0) + 0.5, 0.0, 1.0)


def _softplus(x: Any) -> Any:
    return np.log(np.exp(x) + 1.0)


@onnx_op("Softplus")
def softplus(ctx: NodeContext, x: Any) -> Any:
    return _softplus(x)


@onnx_op("Mish")
def mish(ctx: NodeContext, x: Any) -> Any:
    return x * np.tanh(_softplus(x))


@onnx_op("Softsign")
def softsign(ctx: NodeContext, x: Any) -> Any:
    return x / (1.0 + np.abs(x))


@onnx_op("Elu")
def elu(ctx: NodeContext, x: Any) -> Any:
    return np.where(x < 0, ctx.attr("alpha", 1.0) * (np.exp(x) - 1.0), x)


@onnx_op("Selu")
def selu(ctx: NodeContext, x: Any) -> Any:
    alpha = ctx.attr("alpha", 1.67326319217681884765625)
    gamma = ctx.attr("gamma", 1.05070102214813232421875)
    return np.where(x > 0, gamma * x, (gamma * alpha) * (np.exp(x) - 1.0))


@onnx_op("Celu")
def celu(ctx: NodeContext, x: Any) -> Any:
    alpha = ctx.attr("alpha", 1.0)
    return np.maximum(x, 0.0) + np.minimum(alpha * (np.exp(x / alpha) - 1.0), 0.0)


@onnx_op("LeakyRelu")
def leaky_relu(ctx: NodeContext, x: Any) -> Any:
    return np.where(x < 0, ctx.attr("alpha", 0.01) * x, x)


@onnx_op("PRelu")
def prelu(ctx: NodeContext, x: Any, slope: Any) -> Any:
    if slope.ndim == 1 and x.ndim > 2 and slope.shape[0] not in (1, x.shape[-1]) and slope.shape[0] == x.shape[1]:
        # the per-channel slope of opsets < 7, which a converted model keeps (it broadcasts no other way)
        slope = np.reshape(slope, (-1,) + (1,) * (x.ndim - 2))
    return np.where(x < 0, slope * x, x)


@onnx_op("ThresholdedRelu")
def thresholded_relu(ctx: NodeContext, x: Any) -> Any:
    return np.where(x > ctx.attr("alpha", 1.0), x, 0).astype(x.dtype)


@onnx_op("Shrink")
def shrink(ctx: NodeContext, x: Any) -> Any:
    lambd, bias = ctx.attr("lambd", 0.5), ctx.attr("bias", 0.0)
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0)).astype(x.dtype)


@onnx_op("Swish")
def swish(ctx: NodeContext, x: Any) -> Any:
    return x * (1.0 / (1.0 + np.exp(-(ctx.attr("alpha", 1.0) * x))))


@onnx_op("SwiGLU")
def swiglu(ctx: NodeContext, a: Any, b: Any) -> Any:
    """Swish(a) * b, Swish_alpha(a) = a * sigmoid(alpha * a); a and b of one shape (no broadcast)."""
    if tuple(a.shape) != tuple(b.shape):
        raise ctx.unsupported(f"inputs of shapes {tuple(a.shape)} and {tuple(b.shape)} (SwiGLU does not broadcast)")
    return a * (1.0 / (1.0 + np.exp(-(ctx.attr("alpha", 1.0) * a)))) * b


@onnx_op("CausalConvWithState", since=27)
def causal_conv_with_state(ctx: NodeContext, x: Any, w: Any, bias: Any = None, past: Any = None) -> Any:
    """A depthwise causal 1-D convolution (weight (C, 1, k)) over [past state, x], then the
    optional SiLU; the present state is the last k - 1 steps of that concatenation. Each tap
    is a slice times its per-channel weight (k is small: a shift-and-add, no im2col)."""
    activation = ctx.attr("activation", "none")
    if activation not in ("none", "silu", "swish") or x.ndim != 3 or w.ndim != 3 or w.shape[1] != 1:
        raise ctx.unsupported(f"activation {activation!r} with input rank {x.ndim}, weight shape {tuple(w.shape)}")
    b, c, length = x.shape
    k = w.shape[2]
    pad = np.zeros((b, c, k - 1), x.dtype) if past is None else past
    padded = np.concatenate([pad, x], axis=2) if k > 1 else x
    out = None
    for j in range(k):
        term = padded[:, :, j:j + length] * np.reshape(w[:, 0, j], (1, c, 1))
        out = term if out is None else out + term
    if bias is not None:
        out = out + np.reshape(bias, (1, c, 1))
    if activation != "none":
        out = out * (1.0 / (1.0 + np.exp(-out)))
    return out, padded[:, :, padded.shape[2] - (k - 1):]


# --------------------------------------------------------------------------- others


@onnx_op("Dropout")
@const_inputs(1, 2)
def dropout(ctx: NodeContext, x: Any, ratio: Any = None, training: Any = None) -> Any:
    if ctx.opset < 7 and not ctx.attr("is_test", 0):
        raise ctx.unsupported("training-mode Dropout (random masks)")
    if training is not None and (not is_const(training) or bool(np.asarray(training).reshape(-1)[0])):
        zero = ratio is not None and is_const(ratio) and float(np.asarray(ratio).reshape(-1)[0]) == 0.0
        if not zero:  # (a ratio of 0 drops nothing: the identity and a mask of ones, as in inference)
            raise ctx.unsupported("training-mode Dropout (random masks); fusebind runs inference")
    mask = np.ones(tuple(x.shape), dtype=bool)
    return (x, mask) if _wants(ctx, 1) else x


@onnx_op("Einsum")
def einsum(ctx: NodeContext, *xs: Any) -> Any:
    return np.einsum(ctx.attr("equation").replace(" ", ""), *xs)


@onnx_op("RotaryEmbedding", since=23)
def rotary_embedding(ctx: NodeContext, x: Any, cos: Any, sin: Any, pos: Any = None) -> Any:
    """The spec's body: x is (batch, seq, hidden) with num_heads, or (batch, heads, seq, head);
    the first `rotary_embedding_dim` (all when 0) of each head rotate, interleaved or as halves."""
    interleaved = ctx.attr("interleaved", 0)
    heads = ctx.attr("num_heads", 0)
    rot = ctx.attr("rotary_embedding_dim", 0)
    shape = tuple(x.shape)
    if x.ndim == 3:
        if not heads:
            raise ctx.unsupported("a 3-D input needs the num_heads attribute")
        x = np.transpose(np.reshape(x, (shape[0], shape[1], heads, shape[2] // heads)), (0, 2, 1, 3))
    head = x.shape[-1]
    rot = rot or head
    if pos is not None:  # cos/sin are (max_pos, rot/2) caches, indexed by the positions (batch, seq)
        cos, sin = np.take(lift(cos, pos), pos, axis=0), np.take(lift(sin, pos), pos, axis=0)
    cos, sin = np.expand_dims(cos, 1), np.expand_dims(sin, 1)  # (batch, 1, seq, rot/2)
    part, rest = x[..., :rot], x[..., rot:]
    if interleaved:
        x1, x2 = part[..., 0::2], part[..., 1::2]
    else:
        x1, x2 = part[..., : rot // 2], part[..., rot // 2:]
    r1 = x1 * cos - x2 * sin
    r2 = x2 * cos + x1 * sin
    if interleaved:
        rotated = np.reshape(np.stack([r1, r2], axis=-1), tuple(part.shape))
    else:
        rotated = np.concatenate([r1, r2], axis=-1)
    out = np.concatenate([rotated, rest], axis=-1) if rot < head else rotated
    if len(shape) == 3:
        out = np.reshape(np.transpose(out, (0, 2, 1, 3)), shape)
    return out



# --------------------------------------------------------------------------- attention (opset 23..)


def _neg_inf_where(allowed: Any, dtype: Any) -> Any:
    """0 where allowed, -inf elsewhere (the spec's select, not a multiply: 0 * -inf is NaN)."""
    return np.where(allowed, np.zeros((), dtype), np.array(-np.inf, dtype))


def _band(q: int, kv: int, offset: Any, left: int, right: int, causal: bool, dtype: Any) -> Any:
    """The causal and sliding-window bias of (q, kv), offset-aligned: a query at i (absolute
    offset + i) attends key j iff j <= offset + i (causal) and within the window. `offset`: an
    int, or a traced/constant (batch,) array, which gives a (batch, 1, q, kv) bias."""
    i = np.arange(q, dtype=np.int64).reshape(q, 1)
    j = np.arange(kv, dtype=np.int64).reshape(1, kv)
    per_batch = not isinstance(offset, int)
    pos = (i + np.reshape(offset, (-1, 1, 1))) if per_batch else i + offset
    allowed = None
    if causal:
        allowed = j <= pos
    diff = pos - j
    for ok in ([diff <= left] if left >= 0 else []) + ([-diff <= right] if right >= 0 else []):
        allowed = ok if allowed is None else np.logical_and(allowed, ok)
    bias = _neg_inf_where(allowed, dtype)
    return np.reshape(bias, (-1, 1, q, kv)) if per_batch else bias


def _heads(x: Any, n: int) -> Any:
    """(batch, seq, hidden) -> (batch, n, seq, hidden / n)."""
    b, s, h = x.shape
    return np.transpose(np.reshape(x, (b, s, n, h // n)), (0, 2, 1, 3))


@onnx_op("Attention", since=23)
def attention(ctx: NodeContext, q: Any, k: Any, v: Any, mask: Any = None, past_k: Any = None, past_v: Any = None,
              nonpad: Any = None) -> Any:
    """The reference's `_compute_attention`, step for step (onnx/reference/ops/op_attention.py)."""
    dtype = q.dtype
    rank3 = q.ndim == 3
    qh, kvh = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    if rank3:
        if qh is None or kvh is None:
            raise ctx.unsupported("3-D inputs need q_num_heads and kv_num_heads")
        q, k, v = _heads(q, qh), _heads(k, kvh), _heads(v, kvh)
    precision = ctx.attr("softmax_precision")
    if precision not in (None, 1, 11):
        raise ctx.unsupported(f"softmax_precision {precision} (fusebind computes in float32 or float64)")
    scale = ctx.attr("scale")
    scale = dtype.type(math.sqrt(1.0 / math.sqrt(q.shape[3]) if scale is None else scale))
    if past_k is not None:
        k = np.concatenate((past_k, k), axis=2)
    if past_v is not None:
        v = np.concatenate((past_v, v), axis=2)
    present_k, present_v = k, v
    nq, nkv = q.shape[2], k.shape[2]
    if mask is not None and nkv > mask.shape[-1]:
        widths = [(0, 0)] * (mask.ndim - 1) + [(0, nkv - mask.shape[-1])]
        mask = np.pad(mask, widths, mode="constant", constant_values=False if mask.dtype == bool else -np.inf)
    if mask is not None and mask.dtype == bool:
        mask = _neg_inf_where(mask, dtype)
    left, right = ctx.attr("left_window_size", -1), ctx.attr("right_window_size", -1)
    causal = bool(ctx.attr("is_causal", 0))
    offset: Any = 0
    if past_k is not None:
        offset = past_k.shape[2]
    elif nonpad is not None:
        offset = np.reshape(nonpad, (-1,)).astype(np.int64) - nq
    bias = mask
    if causal or left >= 0 or right >= 0:
        band = _band(nq, nkv, offset, left, right, causal, dtype)
        bias = band if bias is None else bias + band
    if nonpad is not None:
        keep = np.arange(nkv, dtype=np.int64) < np.reshape(nonpad, (-1, 1)).astype(np.int64)
        pad_bias = np.reshape(_neg_inf_where(keep, dtype), (q.shape[0], 1, 1, nkv))
        bias = pad_bias if bias is None else bias + pad_bias
    heads_q, heads_k = q.shape[1], k.shape[1]
    if heads_q != heads_k and heads_q % heads_k == 0:  # grouped-query: each kv head repeated in place
        k = np.repeat(k, heads_q // heads_k, axis=1)
        v = np.repeat(v, heads_q // heads_k, axis=1)
    qk = np.matmul(q * scale, np.transpose(k, (0, 1, 3, 2)) * scale)
    softcap = ctx.attr("softcap")
    if softcap is not None and softcap > 0:
        qk = np.tanh(qk / softcap) * softcap
    with_bias = qk if bias is None else qk + bias
    mode = ctx.attr("qk_matmul_output_mode", 0)
    qk_out = with_bias if mode == 2 else qk
    s = with_bias.astype(np.float64) if precision == 11 else with_bias
    m = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isneginf(m), np.zeros((), s.dtype), m))
    total = np.sum(e, axis=-1, keepdims=True)
    p = e / np.where(total == 0, np.ones((), s.dtype), total)
    if bias is not None:  # a row whose bias is all -inf attends nothing: zeros, not NaN
        p = np.where(np.isneginf(np.max(bias, axis=-1, keepdims=True)), np.zeros((), p.dtype), p)
    if mode == 3:
        qk_out = p
    y = np.matmul(p.astype(dtype), v)
    if rank3:
        y = np.reshape(np.transpose(y, (0, 2, 1, 3)), (y.shape[0], y.shape[2], -1))
    return y, present_k, present_v, qk_out.astype(dtype)


from fusebind.onnx import ops_grid, ops_linear_attention, ops_resize, ops_select  # noqa: E402,F401  (they register with the composites
# until the importer's handler list names them)
