"""What each peer runs for a workload that cannot be derived from its math: numpy with out=, numba, ONNX.

Owns: the float32 constants the workloads share (`F32`, `GELU_C`, `LN_EPS`, `RMS_EPS`), the hand-written
numpy `out=` versions (the best a careful numpy user writes), the numba kernels (plain Python: they write
into a preallocated `out`; `prange` rows/elements so one kernel serves the single- and multi-thread runs)
and the ONNX graph builders. bench/workloads.py puts them into the `Workload` records.

Must not: import numba or onnx at import time (a child that times `import fusebind` imports this), time
anything, or build candidates.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

Shape = tuple[int, ...]

def prange(*args: int) -> range:
    """`range` until peers.py jits a numba kernel: it then rebinds this module's `prange` to numba's.

    numba reads a kernel's globals when it compiles it, not when it is defined, so importing the
    workloads does not import numba (a child process that times `import fusebind` stays clean).
    """
    return range(*args)


F32 = np.float32
GELU_C = 0.7978845608028654  # sqrt(2/pi)
LN_EPS = 1e-5
RMS_EPS = 1e-6

# ---------------------------------------------------------------------------------------------
# numpy with out= (the best a careful numpy user writes).

def relu_chain_out(out: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    np.multiply(a, b, out=out)
    np.add(out, c, out=out)
    np.maximum(out, 0, out=out)


def gelu_out(out: np.ndarray, x: np.ndarray) -> None:
    np.multiply(x, x, out=out)
    np.multiply(out, x, out=out)
    np.multiply(out, F32(0.044715), out=out)
    np.add(out, x, out=out)
    np.multiply(out, F32(GELU_C), out=out)
    np.tanh(out, out=out)
    np.add(out, F32(1), out=out)
    np.multiply(out, x, out=out)
    np.multiply(out, F32(0.5), out=out)


def exp_log_sqrt_out(out: np.ndarray, x: np.ndarray) -> None:
    tmp = np.multiply(x, x)
    np.add(tmp, F32(1), out=tmp)
    np.log(tmp, out=tmp)
    np.multiply(x, F32(0.5), out=out)
    np.exp(out, out=out)
    np.add(out, tmp, out=out)
    np.sqrt(out, out=out)


def softmax_out(out: np.ndarray, x: np.ndarray) -> None:
    np.subtract(x, x.max(axis=-1, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=-1, keepdims=True)


def layer_norm_out(out: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> None:
    np.subtract(x, x.mean(axis=-1, keepdims=True), out=out)
    var = np.einsum("ij,ij->i", out, out)[:, None] / F32(x.shape[-1])
    out /= np.sqrt(var + F32(LN_EPS))
    out *= w
    out += b


def matmul_bias_relu_out(out: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> None:
    np.matmul(x, w, out=out)
    out += b
    np.maximum(out, 0, out=out)


def matmul_bias_gelu_out(out: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> None:
    np.matmul(x, w, out=out)
    out += b
    y = out.copy()
    gelu_out(out, y)


# ---------------------------------------------------------------------------------------------
# numba kernels: plain Python, jitted by peers.py with fastmath=True (and parallel=True for prange).

def nb_relu_chain(out: Any, a: Any, b: Any, c: Any) -> None:
    for i in prange(out.shape[0]):
        v = a[i] * b[i] + c[i]
        out[i] = v if v > 0 else F32(0)


def nb_gelu(out: Any, x: Any) -> None:
    for i in prange(out.shape[0]):
        v = x[i]
        out[i] = F32(0.5) * v * (F32(1) + math.tanh(F32(GELU_C) * (v + F32(0.044715) * v * v * v)))


def nb_exp_log_sqrt(out: Any, x: Any) -> None:
    for i in prange(out.shape[0]):
        v = x[i]
        out[i] = math.sqrt(math.exp(v * F32(0.5)) + math.log(v * v + F32(1)))


def nb_softmax(out: Any, x: Any) -> None:
    for r in prange(x.shape[0]):
        m = x[r, 0]
        for j in range(x.shape[1]):
            m = max(m, x[r, j])
        s = F32(0)
        for j in range(x.shape[1]):
            e = math.exp(x[r, j] - m)
            out[r, j] = e
            s += e
        inv = F32(1) / s
        for j in range(x.shape[1]):
            out[r, j] *= inv


def nb_layer_norm(out: Any, x: Any, w: Any, b: Any) -> None:
    n = x.shape[1]
    for r in prange(x.shape[0]):
        s = F32(0)
        for j in range(n):
            s += x[r, j]
        m = s / F32(n)
        q = F32(0)
        for j in range(n):
            d = x[r, j] - m
            q += d * d
        inv = F32(1) / math.sqrt(q / F32(n) + F32(LN_EPS))
        for j in range(n):
            out[r, j] = (x[r, j] - m) * inv * w[j] + b[j]


def nb_rms_norm(out: Any, x: Any, w: Any) -> None:
    n = x.shape[1]
    for r in prange(x.shape[0]):
        q = F32(0)
        for j in range(n):
            q += x[r, j] * x[r, j]
        inv = F32(1) / math.sqrt(q / F32(n) + F32(RMS_EPS))
        for j in range(n):
            out[r, j] = x[r, j] * inv * w[j]


def nb_batched_matmul(out: Any, a: Any, b: Any) -> None:
    """One np.dot (numba's BLAS call) per matrix of the batch: the per-matrix dispatch a loop pays."""
    m, k, n = a.shape[a.ndim - 2], a.shape[a.ndim - 1], b.shape[b.ndim - 1]
    a3, b3, o3 = a.reshape((-1, m, k)), b.reshape((-1, k, n)), out.reshape((-1, m, n))
    for i in prange(a3.shape[0]):
        o3[i] = np.dot(a3[i], b3[i])


# ---------------------------------------------------------------------------------------------
# ONNX graphs (onnx.helper; opset 20 for Gelu(approximate="tanh")).

def _onnx_model(nodes: list[Any], args: Sequence[str], shapes: Sequence[Shape], out_shape: Shape,
                inits: Sequence[Any] = ()) -> Any:
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in zip(args, shapes)]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))
    graph = helper.make_graph(nodes, "bench", inputs, [output], initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)


def _scalar(name: str, value: float) -> Any:
    from onnx import numpy_helper

    return numpy_helper.from_array(np.array(value, dtype=F32), name)


def onnx_relu_chain(shapes: tuple[Shape, ...]) -> Any:
    from onnx import helper

    nodes = [helper.make_node("Mul", ["a", "b"], ["m"]), helper.make_node("Add", ["m", "c"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    return _onnx_model(nodes, ("a", "b", "c"), shapes, shapes[0])


def onnx_gelu(shapes: tuple[Shape, ...]) -> Any:
    from onnx import helper

    return _onnx_model([helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")], ("x",), shapes, shapes[0])


def onnx_exp_log_sqrt(shapes: tuple[Shape, ...]) -> Any:
    from onnx import helper

    nodes = [helper.make_node("Mul", ["x", "half"], ["xh"]), helper.make_node("Exp", ["xh"], ["e"]),
             helper.make_node("Mul", ["x", "x"], ["xx"]), helper.make_node("Add", ["xx", "one"], ["xx1"]),
             helper.make_node("Log", ["xx1"], ["l"]), helper.make_node("Add", ["e", "l"], ["s"]),
             helper.make_node("Sqrt", ["s"], ["y"])]
    return _onnx_model(nodes, ("x",), shapes, shapes[0], [_scalar("half", 0.5), _scalar("one", 1.0)])


def onnx_softmax(shapes: tuple[Shape, ...]) -> Any:
    from onnx import helper

    return _onnx_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], ("x",), shapes, shapes[0])


def onnx_layer_norm(shapes: tuple[Shape, ...]) -> Any:
    from onnx import helper

    node = helper.make_node("LayerNormalization", ["x", "w", "b"], ["y"], axis=-1, epsilon=LN_EPS)
    return _onnx_model([node], ("x", "w", "b"), shapes, shapes[0])


def _onnx_matmul_bias(act: str) -> Callable[[tuple[Shape, ...]], Any]:
    def build(shapes: tuple[Shape, ...]) -> Any:
        from onnx import helper

        nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["s"])]
        nodes.append(helper.make_node("Relu", ["s"], ["y"]) if act == "relu"
                     else helper.make_node("Gelu", ["s"], ["y"], approximate="tanh"))
        return _onnx_model(nodes, ("x", "w", "b"), shapes, (shapes[0][0], shapes[1][1]))
    return build


def onnx_mlp(shapes: tuple[Shape, ...]) -> Any:
    from onnx import helper

    nodes = [helper.make_node("LayerNormalization", ["x", "g", "beta"], ["h"], axis=-1, epsilon=LN_EPS),
             helper.make_node("MatMul", ["h", "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["a1"]),
             helper.make_node("Gelu", ["a1"], ["g1"], approximate="tanh"),
             helper.make_node("MatMul", ["g1", "w2"], ["m2"]), helper.make_node("Add", ["m2", "b2"], ["a2"]),
             helper.make_node("Add", ["x", "a2"], ["y"])]
    return _onnx_model(nodes, ("x", "g", "beta", "w1", "b1", "w2", "b2"), shapes, shapes[0])


def onnx_attention(shapes: tuple[Shape, ...]) -> Any:
    from onnx import helper

    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[1, 0]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Mul", ["s", "scale"], ["ss"]),
             helper.make_node("Softmax", ["ss"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    return _onnx_model(nodes, ("q", "k", "v"), shapes, shapes[0], [_scalar("scale", 1.0 / 8.0)])


def onnx_rms_norm(shapes: tuple[Shape, ...]) -> Any:
    from onnx import helper, numpy_helper

    axes = numpy_helper.from_array(np.array([-1], dtype=np.int64), "axes")
    nodes = [helper.make_node("Mul", ["x", "x"], ["xx"]), helper.make_node("ReduceMean", ["xx", "axes"], ["ms"]),
             helper.make_node("Add", ["ms", "eps"], ["mse"]), helper.make_node("Sqrt", ["mse"], ["r"]),
             helper.make_node("Div", ["x", "r"], ["n"]), helper.make_node("Mul", ["n", "w"], ["y"])]
    return _onnx_model(nodes, ("x", "w"), shapes, shapes[0], [axes, _scalar("eps", RMS_EPS)])


def onnx_swiglu(shapes: tuple[Shape, ...]) -> Any:
    from onnx import helper

    nodes = [helper.make_node("MatMul", ["x", "w1"], ["a"]), helper.make_node("Sigmoid", ["a"], ["sa"]),
             helper.make_node("Mul", ["a", "sa"], ["silu"]), helper.make_node("MatMul", ["x", "w3"], ["b"]),
             helper.make_node("Mul", ["silu", "b"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["y"])]
    return _onnx_model(nodes, ("x", "w1", "w3", "w2"), shapes, shapes[0])


def _onnx_mha(causal: bool) -> Callable[[tuple[Shape, ...]], Any]:
    def build(shapes: tuple[Shape, ...]) -> Any:
        from onnx import helper, numpy_helper

        n = shapes[0][-2]
        nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
                 helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Mul", ["s", "scale"], ["ss"])]
        inits = [_scalar("scale", 1.0 / 8.0)]
        src = "ss"
        if causal:  # the same mask as `causal_mha`, as a constant (ONNX has no cheaper in-graph form)
            keep = np.tril(np.ones((n, n), dtype=bool))
            inits += [numpy_helper.from_array(keep, "keep"), _scalar("ninf", -math.inf)]
            nodes.append(helper.make_node("Where", ["keep", "ss", "ninf"], ["sm"]))
            src = "sm"
        nodes += [helper.make_node("Softmax", [src], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
        return _onnx_model(nodes, ("q", "k", "v"), shapes, shapes[0], inits)
    return build


def onnx_batched_matmul(shapes: tuple[Shape, ...]) -> Any:
    from onnx import helper

    out_shape = (*shapes[0][:-1], shapes[1][-1])
    return _onnx_model([helper.make_node("MatMul", ["a", "b"], ["y"])], ("a", "b"), shapes, out_shape)
