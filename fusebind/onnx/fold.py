"""Graph rewrites on the ONNX model before it is traced: inference BatchNormalization folded into
the Conv / ConvTranspose / Gemm / MatMul(+Add) that produces its input, and a Gemm's alpha and
beta folded into its constant operands (alpha * A @ B + beta * C as A @ B' + C'; a transposed
operand needs no rewrite: the executor hands it to the gemm as its transpose flag,
runtime/blas_operands.py).

Why on the ONNX graph and not on the traced IR: here a weight is a constant (an initializer, a
Constant, or a ConstantOfShape the `light` models make their weights with), so the fold is one
multiplication of numbers at import. After tracing, a large weight is a hidden *argument* of the
function (importer.CONST_LIMIT), passed by reference at each call: the compiler cannot scale it
once, it would have to emit the scaling as ops that run on every call.

The fold, per output channel c of the producer, with s = scale / sqrt(var + eps):
    W'[c] = W[c] * s[c]          b'[c] = (b[c] - mean[c]) * s[c] + B[c]
computed in float64 and rounded once to the weight's dtype. Before that, a chain of Mul / Add
by a per-channel (or scalar) constant right after the BN (densenet's and inception-v2's
BN -> Mul -> Add) is absorbed into the BN's scale and bias: BN(x) * m + a is a BN with
scale * m and B * m + a. Only what is exactly foldable is rewritten, and nothing else:
  - the BN is in inference mode (training_mode 0, is_test where the opset has it) and only its
    first output is used; its statistics and scale/B are constants of shape (C,);
  - each value removed (the producer's output, the BN's output inside an absorbed chain) has the
    next node as its only consumer and is not a graph output;
  - the producer's weight (and bias) are constants; a Gemm's C broadcasts as ONNX allows;
  - a Conv whose filters are all equal keeps its BN when the BN scales channels differently:
    the Conv handler computes equal filters once and broadcasts (the `light` models' weights),
    which folding would turn into F distinct filters, F times the work.
A graph with subgraphs (If/Loop/Scan bodies may read outer values) is left as it is. Values
that become unused (old weights, their ConstantOfShape and shape initializers) are removed, and
the model stays valid ONNX (onnx.checker passes). The caller's proto is never mutated: a model
with something to fold is copied first.

Shape subgraphs (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) need no rewrite here: the
handlers (ops_shape.py) are numpy on their inputs, and `Shape` of a traced value of a static
shape is a numpy constant, so the whole chain folds while tracing (test/onnx/test_fold.py).

The graph view the rewrites read and edit (readers, constants, fresh names) is fold_graph.py's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper

from fusebind.onnx.fold_graph import FoldGraph

#: the producers a BN folds into: op type -> (weight input, bias input) positions
_PRODUCERS = {"Conv": (1, 2), "ConvTranspose": (1, 2), "Gemm": (1, 2)}
_FLOATS = (np.float16, np.float32, np.float64)


def _default_domain(node: Any) -> bool:
    return node.domain in ("", "ai.onnx")


def _scaled_gemm(node: Any) -> bool:
    return node.op_type == "Gemm" and _default_domain(node) and (
        _attr(node, "alpha", 1.0) != 1.0 or _attr(node, "beta", 1.0) not in (0.0, 1.0))


def rewrite(proto: Any) -> Any:
    """`proto` with every foldable BatchNormalization folded and every Gemm's alpha / beta
    folded into its constant operands; `proto` itself when there is none."""
    graph = proto.graph
    if not any((n.op_type == "BatchNormalization" and _default_domain(n)) or _scaled_gemm(n) for n in graph.node):
        return proto
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for n in graph.node
           for a in n.attribute):
        return proto
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    state = FoldGraph(model)
    folded = 0
    for bn in [n for n in state.nodes if n.op_type == "BatchNormalization" and _default_domain(n)]:
        folded += _fold_one(state, bn)
    for gemm in [n for n in state.nodes if id(n) not in state.removed and _scaled_gemm(n)]:
        folded += _fold_gemm_scalars(state, gemm)
    if not folded:
        return proto
    state.commit()
    return model


def _fold_gemm_scalars(state: FoldGraph, node: Any) -> int:
    """Gemm's alpha into its constant B (else A), beta into its constant C: alpha * A @ B is
    A @ (alpha * B), one rounding at import instead of a multiply per call (the product is
    computed in float64 and rounded once). A beta of 0 (C ignored, even where it is inf) stays."""
    alpha, beta = float(_attr(node, "alpha", 1.0)), float(_attr(node, "beta", 1.0))
    inputs = list(node.input)
    done = 0
    if alpha != 1.0:
        for k in (1, 0):
            v = state.const(inputs[k])
            if v is not None and v.dtype.type in _FLOATS:
                inputs[k] = state.replace_init(inputs[k], (v.astype(np.float64) * alpha).astype(v.dtype))
                _set_attr(node, "alpha", None)
                done = 1
                break
    c = state.const(inputs[2]) if len(inputs) > 2 and inputs[2] else None
    if beta not in (0.0, 1.0) and c is not None and c.dtype.type in _FLOATS:
        inputs[2] = state.replace_init(inputs[2], (c.astype(np.float64) * beta).astype(c.dtype))
        _set_attr(node, "beta", None)
        done = 1
    if done:
        _set_inputs(state, node, inputs)
    return done


# --------------------------------------------------------------------------- the fold


def _attr(node: Any, name: str, default: Any) -> Any:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _inference_bn(state: FoldGraph, bn: Any) -> bool:
    if _attr(bn, "training_mode", 0):
        return False
    if state.opset < 7 and not _attr(bn, "is_test", 0):
        return False
    if state.opset < 9 and not _attr(bn, "spatial", 1):
        return False
    return all(not o or (state.uses.get(o, 0) == 0 and o not in state.outputs) for o in bn.output[1:])


def _per_channel(c: np.ndarray, rank: int, channels: int) -> np.ndarray | None:
    """A constant that broadcasts against a (N, C, ...) value of `rank` along axis 1 only, as a
    (C,) float64 vector; None when it broadcasts along another axis (or grows the value)."""
    if c.ndim > rank or rank < 2:
        return None
    full = (1,) * (rank - c.ndim) + c.shape
    if any(d != 1 for i, d in enumerate(full) if i != 1) or full[1] not in (1, channels):
        return None
    return np.broadcast_to(c.reshape(-1).astype(np.float64), (channels,))


def _fold_one(state: FoldGraph, bn: Any) -> int:
    if len(bn.input) < 5 or not _inference_bn(state, bn):
        return 0
    params = [state.const(i) for i in bn.input[1:5]]
    if any(p is None or p.ndim != 1 or p.dtype.type not in _FLOATS for p in params):
        return 0
    channels = params[0].shape[0]
    if any(p.shape != (channels,) for p in params):
        return 0
    scale, beta, mean, var = (p.astype(np.float64) for p in params)
    s = scale / np.sqrt(var + float(_attr(bn, "epsilon", 1e-5)))
    t = beta - mean * s  # BN(x) = x * s + t
    x, out = bn.input[0], bn.output[0]
    rank = _rank(state, x)
    chain = []  # the absorbed Mul / Add nodes, in order
    while rank is not None and state.sole_use(out):
        nxt = state.consumer(out)
        if nxt is None or nxt.op_type not in ("Mul", "Add") or nxt.domain not in ("", "ai.onnx"):
            break
        other = nxt.input[1] if nxt.input[0] == out else nxt.input[0]
        c = state.const(other)
        v = None if c is None or other == out else _per_channel(c, rank, channels)
        if v is None:
            break
        s, t = (s * v, t * v) if nxt.op_type == "Mul" else (s, t + v)
        chain.append(nxt)
        out = nxt.output[0]
    producer = state.producer.get(x)
    if producer is not None and state.sole_use(x) and _fold_into(state, producer, s, t, channels, out):
        _replace(state, [bn] + chain, [], out)
        return 1
    if not chain:
        return 0
    # no producer to fold into: BN and its chain become one Mul and one Add by (C, 1, ...) constants
    dt = params[0].dtype
    shape = (channels,) + (1,) * (rank - 2)
    mul_out = state.fresh(f"{out}_scaled")
    names = [state.add_init(bn.input[1], s.astype(dt).reshape(shape)),
             state.add_init(bn.input[2], t.astype(dt).reshape(shape))]
    nodes = [helper.make_node("Mul", [x, names[0]], [mul_out], name=f"{bn.name}_bnfold_scale"),
             helper.make_node("Add", [mul_out, names[1]], [out], name=f"{bn.name}_bnfold_shift")]
    _replace(state, [bn] + chain, nodes, out)
    return 1


def _replace(state: FoldGraph, old: list, new: list, out: str) -> None:
    """Remove the nodes `old` (the BN and its chain) and put `new` (ending in `out`) in their place."""
    at = state.nodes.index(old[0])
    state.nodes[at:at] = new
    for n in new:
        state.read_by(n)
        for i in n.input:
            state.uses[i] += 1
        for o in n.output:
            state.producer[o] = n
    for n in old:
        state.remove(n)
    for n in new:
        state.dead.difference_update(list(n.input) + list(n.output))
    state.dead.discard(out)


def _rank(state: FoldGraph, x: Any) -> int | None:
    if x in state.shapes:
        return len(state.shapes[x])
    producer = state.producer.get(x)
    if producer is not None and producer.op_type in ("Conv", "ConvTranspose"):
        w = state.const(producer.input[1])
        return None if w is None else w.ndim
    if producer is not None and producer.op_type == "Gemm":
        return 2
    return None


def _fold_into(state: FoldGraph, p: Any, s: np.ndarray, t: np.ndarray, channels: int, out: str) -> bool:
    """Scale `p`'s weight and bias per output channel (y' = y * s + t) and make it write `out`."""
    if p.op_type in ("MatMul", "Add"):
        return _fold_matmul(state, p, s, t, channels, out)
    if p.op_type not in _PRODUCERS or p.domain not in ("", "ai.onnx") or len(p.output) != 1:
        return False
    wi, bi = _PRODUCERS[p.op_type]
    w = state.const(p.input[wi]) if len(p.input) > wi else None
    has_b = bi is not None and len(p.input) > bi and bool(p.input[bi])
    b = state.const(p.input[bi]) if has_b else None
    if w is None or w.dtype.type not in _FLOATS or (has_b and b is None):
        return False
    w64, dt = w.astype(np.float64), w.dtype
    inputs = list(p.input)
    attrs = {a.name: helper.get_attribute_value(a) for a in p.attribute}
    if p.op_type == "Conv":
        if w.ndim < 3 or w.shape[0] != channels or (b is not None and b.shape != (channels,)):
            return False
        if int(attrs.get("group", 1)) == 1 and np.all(w == w[:1]) and not np.all(s == s[0]):
            return False  # equal filters are one filter's conv (ops_conv.py); distinct ones cost F times more
        w_new = w64 * s.reshape((-1,) + (1,) * (w.ndim - 1))
        b_new = (b.astype(np.float64) if b is not None else 0.0) * s + t
    elif p.op_type == "ConvTranspose":
        group = int(attrs.get("group", 1))
        if w.ndim < 3 or w.shape[1] * group != channels or (b is not None and b.shape != (channels,)):
            return False
        per = w.shape[1]  # output channel g*per + j is W[g*cin_g:(g+1)*cin_g, j]
        grouped = w64.reshape((group, w.shape[0] // group, per) + w.shape[2:])
        w_new = (grouped * s.reshape((group, 1, per) + (1,) * (w.ndim - 2))).reshape(w.shape)
        b_new = (b.astype(np.float64) if b is not None else 0.0) * s + t
    elif p.op_type == "Gemm":
        trans_b = int(attrs.get("transB", 0))
        if w.ndim != 2 or w.shape[0 if trans_b else 1] != channels:
            return False
        alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
        w_new = w64 * (s[:, None] if trans_b else s[None, :])
        if alpha != 1.0:  # alpha folds into the weight too: y = A (alpha W s) + ...
            w_new = w_new * alpha
        if b is not None:
            if b.ndim > 2 or (b.ndim >= 1 and b.shape[-1] not in (1, channels)):
                return False
            b_new = b.astype(np.float64) * beta * s + t
        else:
            b_new = t
        for name in ("alpha", "beta"):
            _set_attr(p, name, None)
    else:
        return False
    inputs[wi] = state.replace_init(p.input[wi], w_new.astype(dt))
    b_arr = np.asarray(b_new).astype(dt)
    bias_name = state.replace_init(p.input[bi], b_arr) if has_b else state.add_init(f"{p.input[wi]}_bias", b_arr)
    if has_b:
        inputs[bi] = bias_name
    else:
        inputs.append(bias_name)
    _set_inputs(state, p, inputs)
    _rename_output(state, p, out)
    return True


def _fold_matmul(state: FoldGraph, p: Any, s: np.ndarray, t: np.ndarray, channels: int, out: str) -> bool:
    """MatMul(A, W) [+ b] -> BN, 2-D (the BN's channel axis is W's column): W' = W * s, and the
    bias Add (made when there is none) adds b * s + t."""
    add = None
    if p.op_type == "Add" and len(p.input) == 2:
        for k in (0, 1):
            mm = state.producer.get(p.input[k])
            b = state.const(p.input[1 - k])
            if mm is not None and mm.op_type == "MatMul" and b is not None and state.sole_use(p.input[k]):
                wmm = state.const(mm.input[1]) if len(mm.input) == 2 else None
                add, p, bias = p, mm, _per_channel(b, 2, channels)
                if bias is None or wmm is None or b.dtype != wmm.dtype:
                    return False
                break
        else:
            return False
    if p.op_type != "MatMul" or p.domain not in ("", "ai.onnx") or len(p.input) != 2:
        return False
    w = state.const(p.input[1])
    if w is None or w.dtype.type not in _FLOATS or w.ndim != 2 or w.shape[1] != channels:
        return False
    if _rank(state, p.input[0]) != 2 or state.const(p.input[0]) is not None:
        return False
    dt = w.dtype
    w_name = state.replace_init(p.input[1], (w.astype(np.float64) * s[None, :]).astype(dt))
    _set_inputs(state, p, [p.input[0], w_name])
    if add is not None:
        k = 0 if add.input[0] == p.output[0] else 1
        b_name = state.replace_init(add.input[1 - k], (bias * s + t).astype(dt))
        ins = list(add.input)
        ins[1 - k] = b_name
        _set_inputs(state, add, ins)
        _rename_output(state, add, out)
        return True
    b_name = state.add_init(f"{p.input[1]}_bias", t.astype(dt))
    mm_out = state.fresh(f"{p.output[0]}_matmul")
    _rename_output(state, p, mm_out)
    add = helper.make_node("Add", [mm_out, b_name], [out], name=f"{p.name}_bnfold_bias")
    state.nodes.insert(state.nodes.index(p) + 1, add)
    state.read_by(add)
    state.producer[out] = add
    state.uses[mm_out] += 1
    state.uses[b_name] += 1
    return True


def _set_inputs(state: FoldGraph, node: Any, inputs: list) -> None:
    old = list(node.input)
    del node.input[:]
    node.input.extend(inputs)
    state.read_by(node)
    for i in inputs:
        state.uses[i] += 1
    for i in old:
        state.drop_use(i)


def _rename_output(state: FoldGraph, p: Any, name: str) -> None:
    old = p.output[0]
    p.output[0] = name
    state.producer[name] = p
    state.producer.pop(old, None)


def _set_attr(node: Any, name: str, value: Any) -> None:
    keep = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(keep)
    if value is not None:
        node.attribute.append(helper.make_attribute(name, value))


__all__ = ["rewrite"]
