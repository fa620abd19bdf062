"""The benchmark workloads, each defined once.

Owns: `Workload` and the `WORKLOADS` list. A workload's math is one Python
function `fn(ops, *arrays)` written against a numpy-like namespace `ops`
(`exp`, `tanh`, `relu`, `softmax`, `layer_norm`, `matmul`, operators,
`.sum/.max/.mean(axis, keepdims)`, `.T`). The same function is
  - the numpy reference (`NUMPY_OPS`),
  - the fusebind candidate (`ops` = the `fusebind` module, traced by `fb.jit`),
  - prim-dialect MLIR text (`PrimOps` + `prim_func_text`), which the suite
    lowers directly through `fusebind.lowering` (the "fb-kernel" candidate).
Next to it, in the same record, sit what cannot be derived (bench/peers_kernels.py): the numexpr
string (kept float32: constants are passed as float32 variables, never as
literals, see PERFORMANCE.md "Peers' traps"), the numba kernel (writes into a
preallocated `out`; `prange` rows/elements so the same kernel serves the
single- and two-thread runs), and the ONNX graph builder.

Must not: time anything (timing.py) or build candidates (peers.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from bench.peers_kernels import (F32, GELU_C, LN_EPS, RMS_EPS, relu_chain_out, gelu_out, exp_log_sqrt_out,
                                 softmax_out, layer_norm_out, matmul_bias_relu_out, matmul_bias_gelu_out,
                                 nb_relu_chain, nb_gelu, nb_exp_log_sqrt, nb_softmax, nb_layer_norm, nb_rms_norm,
                                 onnx_relu_chain, onnx_gelu, onnx_exp_log_sqrt, onnx_softmax, onnx_layer_norm,
                                 _onnx_matmul_bias, onnx_mlp, onnx_attention, onnx_rms_norm, onnx_swiglu, _onnx_mha,
                                 nb_batched_matmul, onnx_batched_matmul)


# ---------------------------------------------------------------------------------------------
# The numpy namespace: the reference semantics of every `ops.*` the workloads use.

class NumpyOps:
    """`ops` for the numpy reference: plain float32 numpy (NEP 50 keeps Python floats f32)."""

    exp, log, sqrt, tanh, matmul, maximum, minimum = (np.exp, np.log, np.sqrt, np.tanh, np.matmul, np.maximum,
                                                      np.minimum)
    # numpy functions (unlike ufuncs) would bind as methods of the namespace
    where, swapaxes, arange = staticmethod(np.where), staticmethod(np.swapaxes), staticmethod(np.arange)

    @staticmethod
    def mean(x: np.ndarray, axis: int = -1, keepdims: bool = False) -> np.ndarray:
        return x.mean(axis=axis, keepdims=keepdims)

    @staticmethod
    def relu(x: np.ndarray) -> np.ndarray:
        return np.maximum(x, 0)

    @staticmethod
    def sigmoid(x: np.ndarray) -> np.ndarray:
        return 1 / (1 + np.exp(-x))

    @staticmethod
    def gelu(x: np.ndarray) -> np.ndarray:
        return 0.5 * x * (1 + np.tanh(GELU_C * (x + 0.044715 * (x * x * x))))

    @staticmethod
    def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    @staticmethod
    def layer_norm(x: np.ndarray, weight: np.ndarray | None = None, bias: np.ndarray | None = None,
                   eps: float = LN_EPS) -> np.ndarray:
        m = x.mean(axis=-1, keepdims=True)
        d = x - m
        y = d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + eps)
        if weight is not None:
            y = y * weight
        if bias is not None:
            y = y + bias
        return y


NUMPY_OPS = NumpyOps()


# ---------------------------------------------------------------------------------------------
# The prim namespace: the same functions, traced into `prim` dialect text.

def _ttype(shape: tuple[int, ...]) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + "f32>"


class PrimValue:
    """An SSA value of a `PrimFunc` under construction (float32 tensor of a static shape)."""

    __array_priority__ = 1000  # numpy scalars on the left defer to our operators

    def __init__(self, fn: "PrimFunc", name: str, shape: tuple[int, ...]) -> None:
        self.fn, self.name, self.shape = fn, name, shape

    def _bin(self, kind: str, other: Any, swap: bool = False) -> "PrimValue":
        o = self.fn.lift(other)
        return self.fn.binary(kind, o, self) if swap else self.fn.binary(kind, self, o)

    def __add__(self, o: Any) -> "PrimValue": return self._bin("add", o)
    def __radd__(self, o: Any) -> "PrimValue": return self._bin("add", o, True)
    def __sub__(self, o: Any) -> "PrimValue": return self._bin("sub", o)
    def __rsub__(self, o: Any) -> "PrimValue": return self._bin("sub", o, True)
    def __mul__(self, o: Any) -> "PrimValue": return self._bin("mul", o)
    def __rmul__(self, o: Any) -> "PrimValue": return self._bin("mul", o, True)
    def __truediv__(self, o: Any) -> "PrimValue": return self._bin("div", o)
    def __rtruediv__(self, o: Any) -> "PrimValue": return self._bin("div", o, True)
    def __neg__(self) -> "PrimValue": return self.fn.unary("neg", self)
    def __matmul__(self, o: "PrimValue") -> "PrimValue": return self.fn.matmul(self, o)

    def __pow__(self, k: Any) -> "PrimValue":
        if isinstance(k, int) and 1 <= k <= 4:  # small integer powers: repeated multiplication
            r = self
            for _ in range(k - 1):
                r = r * self
            return r
        return self._bin("pow", k)

    def sum(self, axis: int = -1, keepdims: bool = False) -> "PrimValue":
        return self.fn.reduce("reduce_sum", self, axis, keepdims)

    def max(self, axis: int = -1, keepdims: bool = False) -> "PrimValue":
        return self.fn.reduce("reduce_max", self, axis, keepdims)

    def mean(self, axis: int = -1, keepdims: bool = False) -> "PrimValue":
        return self.fn.reduce("reduce_mean", self, axis, keepdims)

    @property
    def T(self) -> "PrimValue":
        return self.fn.transpose(self)


class PrimFunc:
    """Accumulates prim ops as text; `text(results)` closes the `func.func`."""

    def __init__(self, name: str, arg_shapes: Sequence[tuple[int, ...]]) -> None:
        self.name = name
        self.args = [PrimValue(self, f"%arg{i}", tuple(s)) for i, s in enumerate(arg_shapes)]
        self.lines: list[str] = []
        self._n = 0

    def _fresh(self) -> str:
        self._n += 1
        return f"%v{self._n}"

    def lift(self, x: Any) -> PrimValue:
        if isinstance(x, PrimValue):
            return x
        name = self._fresh()
        self.lines.append(f"{name} = prim.constant dense<{float(x):.9e}> : tensor<f32>")
        return PrimValue(self, name, ())

    def unary(self, kind: str, x: PrimValue) -> PrimValue:
        name = self._fresh()
        t = _ttype(x.shape)
        self.lines.append(f"{name} = prim.{kind} {x.name} : {t} -> {t}")
        return PrimValue(self, name, x.shape)

    def binary(self, kind: str, a: PrimValue, b: PrimValue) -> PrimValue:
        name = self._fresh()
        shape = tuple(np.broadcast_shapes(a.shape, b.shape))
        self.lines.append(f"{name} = prim.{kind} {a.name}, {b.name} : ({_ttype(a.shape)}, {_ttype(b.shape)}) "
                          f"-> {_ttype(shape)}")
        return PrimValue(self, name, shape)

    def select(self, c: PrimValue, a: PrimValue, b: PrimValue) -> PrimValue:
        name = self._fresh()
        shape = tuple(np.broadcast_shapes(c.shape, a.shape, b.shape))
        ct = _ttype(c.shape).replace("f32>", "i1>")
        self.lines.append(f"{name} = prim.select {c.name}, {a.name}, {b.name} : ({ct}, {_ttype(a.shape)}, "
                          f"{_ttype(b.shape)}) -> {_ttype(shape)}")
        return PrimValue(self, name, shape)

    def reduce(self, kind: str, x: PrimValue, axis: int, keepdims: bool) -> PrimValue:
        axis = axis % len(x.shape)
        shape = tuple(1 if i == axis else d for i, d in enumerate(x.shape) if keepdims or i != axis)
        name = self._fresh()
        kd = ", keepdims" if keepdims else ""
        self.lines.append(f"{name} = prim.{kind} {x.name} {{axes = [{axis}]{kd}}} : {_ttype(x.shape)} -> "
                          f"{_ttype(shape)}")
        return PrimValue(self, name, shape)

    def transpose(self, x: PrimValue) -> PrimValue:
        perm = list(range(len(x.shape)))[::-1]
        shape = tuple(x.shape[p] for p in perm)
        name = self._fresh()
        self.lines.append(f"{name} = prim.transpose {x.name} {{perm = {perm}}} : {_ttype(x.shape)} -> "
                          f"{_ttype(shape)}")
        return PrimValue(self, name, shape)

    def matmul(self, a: PrimValue, b: PrimValue) -> PrimValue:
        shape = (*a.shape[:-1], b.shape[-1])
        name = self._fresh()
        self.lines.append(f"{name} = prim.matmul {a.name}, {b.name} : ({_ttype(a.shape)}, {_ttype(b.shape)}) "
                          f"-> {_ttype(shape)}")
        return PrimValue(self, name, shape)

    def text(self, result: PrimValue) -> str:
        args = ", ".join(f"{a.name}: {_ttype(a.shape)}" for a in self.args)
        body = "\n".join("  " + line for line in self.lines)
        return (f"func.func @{self.name}({args}) -> {_ttype(result.shape)} {{\n{body}\n"
                f"  func.return {result.name} : {_ttype(result.shape)}\n}}\n")


class PrimOps:
    """`ops` for tracing into prim text; mirrors `NumpyOps` op for op."""

    def exp(self, x: PrimValue) -> PrimValue: return x.fn.unary("exp", x)
    def log(self, x: PrimValue) -> PrimValue: return x.fn.unary("log", x)
    def sqrt(self, x: PrimValue) -> PrimValue: return x.fn.unary("sqrt", x)
    def tanh(self, x: PrimValue) -> PrimValue: return x.fn.unary("tanh", x)
    def relu(self, x: PrimValue) -> PrimValue: return x.fn.unary("relu", x)
    def sigmoid(self, x: PrimValue) -> PrimValue: return x.fn.unary("sigmoid", x)
    def matmul(self, a: PrimValue, b: PrimValue) -> PrimValue: return a.fn.matmul(a, b)

    def maximum(self, a: PrimValue, b: Any) -> PrimValue:
        return a.fn.binary("max", a, a.fn.lift(b))

    def mean(self, x: PrimValue, axis: int = -1, keepdims: bool = False) -> PrimValue:
        return x.mean(axis=axis, keepdims=keepdims)

    def gelu(self, x: PrimValue) -> PrimValue:
        return _gelu_generic(self, x)

    def softmax(self, x: PrimValue, axis: int = -1) -> PrimValue:
        e = self.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    def layer_norm(self, x: PrimValue, weight: PrimValue | None = None, bias: PrimValue | None = None,
                   eps: float = LN_EPS) -> PrimValue:
        m = x.mean(axis=-1, keepdims=True)
        d = x - m
        y = d / self.sqrt((d * d).mean(axis=-1, keepdims=True) + eps)
        if weight is not None:
            y = y * weight
        if bias is not None:
            y = y + bias
        return y


def _gelu_generic(ops: Any, x: Any) -> Any:
    return 0.5 * x * (1 + ops.tanh(GELU_C * (x + 0.044715 * (x * x * x))))


PRIM_OPS = PrimOps()


def prim_func_text(fn: Callable[..., Any], shapes: Sequence[tuple[int, ...]], name: str = "k") -> str:
    """MLIR text (prim dialect) of `fn(PRIM_OPS, *args)` for float32 args of these shapes."""
    pf = PrimFunc(name, shapes)
    return pf.text(fn(PRIM_OPS, *pf.args))


# ---------------------------------------------------------------------------------------------
# The workload record.

#: The groups whose math has a matmul (numexpr cannot express them; their numba kernel, if any, calls BLAS).
MATMUL_GROUPS = ("matmul", "mlp", "attention", "swiglu", "mha", "bmm")

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Workload:
    """One benchmark workload. `sizes` are labels -> the input shapes of `fn`.

    `fn(ops, *arrays)` is the math; `numpy_out(out, *arrays)` the hand-tuned numpy
    with `out=` and in-place ops; `numexpr` an f32-clean expression over the input
    names `args` plus the float32 scalars `numexpr_consts`; `numba` the kernel
    `k(out, *arrays)` (plain Python, jitted by peers.py); `onnx(shapes)` a
    `ModelProto` with inputs named `args` and one output `y`.
    `group` names the PERFORMANCE.md target row it reports to; `sol_inputs` says
    which inputs a speed-of-light kernel must read (all, by default).
    """

    name: str
    group: str
    args: tuple[str, ...]
    sizes: dict[str, tuple[Shape, ...]]
    fn: Callable[..., Any]
    numpy_out: Callable[..., None] | None = None
    numexpr: str | None = None
    numexpr_consts: dict[str, float] = field(default_factory=dict)
    numba: Callable[..., None] | None = None
    onnx: Callable[[tuple[Shape, ...]], Any] | None = None
    ranges: tuple[tuple[float, float], ...] = ()
    rtol: float = 2e-5
    atol: float = 2e-6
    has_sol: bool = True
    note: str = ""

    def inputs(self, size: str, seed: int = 0) -> list[np.ndarray]:
        """Deterministic float32 inputs (uniform in each arg's range, default [-3, 3])."""
        rng = np.random.default_rng(seed)
        out = []
        for i, shape in enumerate(self.sizes[size]):
            lo, hi = self.ranges[i] if i < len(self.ranges) else (-3.0, 3.0)
            out.append(rng.uniform(lo, hi, shape).astype(F32))
        return out

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self.fn(NUMPY_OPS, *arrays)

    def prim_text(self, size: str, name: str = "k") -> str:
        return prim_func_text(self.fn, self.sizes[size], name)


# ---------------------------------------------------------------------------------------------
# Math of each workload (ops-generic).

def relu_chain(ops: Any, a: Any, b: Any, c: Any) -> Any:
    return ops.relu(a * b + c)


def gelu_tanh(ops: Any, x: Any) -> Any:
    return 0.5 * x * (1 + ops.tanh(GELU_C * (x + 0.044715 * (x * x * x))))


def exp_log_sqrt(ops: Any, x: Any) -> Any:
    return ops.sqrt(ops.exp(x * 0.5) + ops.log(x * x + 1))


def softmax_rows(ops: Any, x: Any) -> Any:
    return ops.softmax(x, axis=-1)


def layer_norm_rows(ops: Any, x: Any, w: Any, b: Any) -> Any:
    return ops.layer_norm(x, w, b, eps=LN_EPS)


def matmul_bias_relu(ops: Any, x: Any, w: Any, b: Any) -> Any:
    return ops.relu(ops.matmul(x, w) + b)


def matmul_bias_gelu(ops: Any, x: Any, w: Any, b: Any) -> Any:
    return ops.gelu(ops.matmul(x, w) + b)


def mlp_block(ops: Any, x: Any, g: Any, beta: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    h = ops.layer_norm(x, g, beta, eps=LN_EPS)
    return x + ops.matmul(ops.gelu(ops.matmul(h, w1) + b1), w2) + b2


def attention_block(ops: Any, q: Any, k: Any, v: Any) -> Any:
    return ops.matmul(ops.softmax(ops.matmul(q, k.T) * (1.0 / 8.0), axis=-1), v)  # head dim 64: 1/sqrt(64)




def rms_norm_rows(ops: Any, x: Any, w: Any) -> Any:
    return x / ops.sqrt(ops.mean(x * x, axis=-1, keepdims=True) + RMS_EPS) * w


def swiglu_block(ops: Any, x: Any, w1: Any, w3: Any, w2: Any) -> Any:
    a = ops.matmul(x, w1)
    return ops.matmul(a * ops.sigmoid(a) * ops.matmul(x, w3), w2)


def batched_matmul(ops: Any, a: Any, b: Any) -> Any:
    return ops.matmul(a, b)


def mha(ops: Any, q: Any, k: Any, v: Any) -> Any:
    """Multi-head attention over (batch, heads, S, d=64): softmax(q@kᵀ/8)@v."""
    return ops.matmul(ops.softmax(ops.matmul(q, ops.swapaxes(k, -1, -2)) * (1.0 / 8.0), axis=-1), v)


def causal_mha(ops: Any, q: Any, k: Any, v: Any) -> Any:
    """`mha` with key j > query i masked out (-inf before the softmax); the mask is built in the program."""
    s = ops.matmul(q, ops.swapaxes(k, -1, -2)) * (1.0 / 8.0)
    n = q.shape[-2]
    s = ops.where(ops.arange(n)[None, :] <= ops.arange(n)[:, None], s, -math.inf)
    return ops.matmul(ops.softmax(s, axis=-1), v)


# ---------------------------------------------------------------------------------------------

def _vec(n: int, k: int) -> tuple[Shape, ...]:
    return tuple((n,) for _ in range(k))


def _mm(m: int, k: int, n: int) -> tuple[Shape, ...]:
    return ((m, k), (k, n), (n,))


def _mlp(t: int, d: int) -> tuple[Shape, ...]:
    return ((t, d), (d,), (d,), (d, 4 * d), (4 * d,), (4 * d, d), (d,))


def _swiglu(t: int, d: int, f: int) -> tuple[Shape, ...]:
    return ((t, d), (d, f), (d, f), (f, d))


#: Multi-head attention: batch 2, 4 heads, head dim 64 (so 1/sqrt(d) = 1/8), S = 128 / 512 / 2048.
MHA_SIZES = {f"B=2,H=4,S={s}": ((2, 4, s, 64),) * 3 for s in (128, 512, 2048)}


#: Batched small GEMMs (issue 17: "without per-matrix Python overhead"): 64 matrices of 64x64, and the
#: (batch 2, 4 heads) S=512/d=64 shape of attention's q@kᵀ.
BMM_SIZES = {"64x(64x64@64x64)": ((64, 64, 64), (64, 64, 64)),
             "2x4x(512x64@64x512)": ((2, 4, 512, 64), (2, 4, 64, 512))}

ELEMENTWISE_SIZES = {"1e3": 1_000, "1e5": 100_000, "1e7": 10_000_000}

WORKLOADS: list[Workload] = [
    Workload("relu(a*b+c)", "elementwise", ("a", "b", "c"),
             {k: _vec(n, 3) for k, n in ELEMENTWISE_SIZES.items()}, relu_chain, relu_chain_out,
             "where(a*b+c > zero, a*b+c, zero)", {"zero": 0.0}, nb_relu_chain, onnx_relu_chain,
             note="numexpr: relu as where() with a float32 zero variable (maximum() would promote to f64)"),
    Workload("gelu_tanh(x)", "transcendental", ("x",),
             {k: _vec(n, 1) for k, n in ELEMENTWISE_SIZES.items()}, gelu_tanh, gelu_out,
             "half*x*(one + tanh(c0*(x + c1*x*x*x)))", {"half": 0.5, "one": 1.0, "c0": GELU_C, "c1": 0.044715},
             nb_gelu, onnx_gelu, rtol=1e-4, atol=1e-5),
    Workload("sqrt(exp(x/2)+log(x²+1))", "transcendental", ("x",),
             {k: _vec(n, 1) for k, n in ELEMENTWISE_SIZES.items()}, exp_log_sqrt, exp_log_sqrt_out,
             "sqrt(exp(x*half) + log(x*x + one))", {"half": 0.5, "one": 1.0}, nb_exp_log_sqrt,
             onnx_exp_log_sqrt, rtol=1e-4, atol=1e-5),
    Workload("softmax(x, -1)", "softmax", ("x",),
             {"64x64": ((64, 64),), "128x1024": ((128, 1024),), "4096x1024": ((4096, 1024),)},
             softmax_rows, softmax_out, None, {}, nb_softmax, onnx_softmax, rtol=1e-4, atol=1e-7),
    Workload("layer_norm(x, w, b)", "layernorm", ("x", "w", "b"),
             {"64x64": ((64, 64), (64,), (64,)), "128x1024": ((128, 1024), (1024,), (1024,)),
              "4096x1024": ((4096, 1024), (1024,), (1024,))},
             layer_norm_rows, layer_norm_out, None, {}, nb_layer_norm, onnx_layer_norm, rtol=1e-4, atol=1e-4),
    Workload("relu(x@W+b)", "matmul", ("x", "w", "b"), {"512x1024@1024x1024": _mm(512, 1024, 1024)},
             matmul_bias_relu, matmul_bias_relu_out, None, {}, None, _onnx_matmul_bias("relu"),
             ranges=((-1, 1), (-0.05, 0.05), (-1, 1)), rtol=1e-3, atol=1e-4, has_sol=False),
    Workload("gelu(x@W+b)", "matmul", ("x", "w", "b"), {"512x1024@1024x1024": _mm(512, 1024, 1024)},
             matmul_bias_gelu, matmul_bias_gelu_out, None, {}, None, _onnx_matmul_bias("gelu"),
             ranges=((-1, 1), (-0.05, 0.05), (-1, 1)), rtol=1e-3, atol=1e-4, has_sol=False),
    Workload("MLP block", "mlp", ("x", "g", "beta", "w1", "b1", "w2", "b2"),
             {"T=256,D=512": _mlp(256, 512), "T=64,D=256": _mlp(64, 256)}, mlp_block, None, None, {}, None,
             onnx_mlp, ranges=((-1, 1), (0.5, 1.5), (-0.1, 0.1), (-0.05, 0.05), (-0.1, 0.1), (-0.03, 0.03),
                               (-0.1, 0.1)), rtol=1e-3, atol=1e-3, has_sol=False,
             note="x + gelu(layer_norm(x)@W1+b1)@W2+b2"),
    Workload("attention block", "attention", ("q", "k", "v"),
             {"T=256,d=64": ((256, 64),) * 3, "T=1024,d=64": ((1024, 64),) * 3}, attention_block, None, None,
             {}, None, onnx_attention, ranges=((-1, 1),) * 3, rtol=1e-3, atol=1e-4, has_sol=False,
             note="softmax(q@k.T/8)@v"),
    Workload("rms_norm(x, w)", "rmsnorm", ("x", "w"),
             {"128x1024": ((128, 1024), (1024,)), "4096x1024": ((4096, 1024), (1024,))},
             rms_norm_rows, None, None, {}, nb_rms_norm, onnx_rms_norm, ranges=((-3, 3), (0.5, 1.5)),
             rtol=1e-4, atol=1e-5, note="x / sqrt(mean(x², -1) + 1e-6) * w"),
    Workload("SwiGLU block", "swiglu", ("x", "w1", "w3", "w2"),
             {"T=64,D=256,F=512": _swiglu(64, 256, 512), "T=256,D=512,F=1024": _swiglu(256, 512, 1024)},
             swiglu_block, None, None, {}, None, onnx_swiglu, ranges=((-1, 1),) + ((-0.05, 0.05),) * 3,
             rtol=1e-3, atol=1e-4, has_sol=False, note="(silu(x@W1) * (x@W3)) @ W2"),
    Workload("batched matmul", "bmm", ("a", "b"), BMM_SIZES, batched_matmul, None, None, {}, nb_batched_matmul,
             onnx_batched_matmul, ranges=((-1, 1),) * 2, rtol=1e-4, atol=1e-4, has_sol=False,
             note="a @ b over leading batch dims (np.matmul semantics)"),
    Workload("multi-head attention", "mha", ("q", "k", "v"), MHA_SIZES, mha, None, None, {}, None,
             _onnx_mha(False), ranges=((-1, 1),) * 3, rtol=1e-3, atol=1e-4, has_sol=False,
             note="softmax(q@kᵀ/8)@v over (batch, heads, S, 64)"),
    Workload("causal multi-head attention", "mha", ("q", "k", "v"), MHA_SIZES, causal_mha, None, None, {},
             None, _onnx_mha(True), ranges=((-1, 1),) * 3, rtol=1e-3, atol=1e-4, has_sol=False,
             note="mha with keys after the query masked to -inf (mask built in-program from arange)"),
]


def workload(name: str) -> Workload:
    """The workload called `name` (KeyError lists the known names)."""
    for w in WORKLOADS:
        if w.name == name:
            return w
    raise KeyError(f"no workload {name!r}; known: {[w.name for w in WORKLOADS]}")
