"""The built-in example programs the `fusebind` command runs (`--example NAME`).

Owns the catalog `BUILTIN_EXAMPLES`: each `BuiltinExample` holds prim-dialect
MLIR text (generated here, so it ships inside the wheel), its entry function,
the default extent of its dynamic dimensions, an input generator with sane
scales (weights ~ N(0, 1/fan_in), as a real model is initialised), and a
plain-numpy version of the same math that the CLI times against.

The GELU of the MLP is the catalog's `gelu_tanh` (written once, there), run
on a prim-text builder for the IR and on numpy for the twin.

Must not: compile or run anything (the CLI does), or import xDSL: listing the
examples must stay cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

import numpy as np

from fusebind.compiler.catalog import gelu_tanh
from fusebind.compiler.prim_text import PrimTextBuilder, TextValue
from fusebind.dialect.errors import FusebindError

Inputs = list[np.ndarray]


@dataclass(frozen=True)
class BuiltinExample:
    """One built-in program: MLIR text, entry, and its plain-numpy twin."""

    name: str
    description: str
    mlir: str
    entry: str
    default_dim: int
    make_inputs: Callable[[np.random.Generator, int], Inputs]
    numpy_fn: Callable[..., np.ndarray]


def _t(*dims: int | str) -> str:
    return "tensor<" + "x".join(str(d) for d in dims) + "xf32>"


# ----------------------------------------------------------------- MLIR pieces
def _layernorm(p: str, x: str, gamma: str, beta: str, rows: str, d: int) -> list[str]:
    """Lines computing layernorm(x) over the last axis into %{p}ln (eps 1e-5)."""
    full, col = _t(rows, d), _t(rows, 1)
    return [
        f"  %{p}mean = prim.reduce_mean %{x} {{axes = [1], keepdims}} : {full} -> {col}",
        f"  %{p}xc = prim.sub %{x}, %{p}mean : ({full}, {col}) -> {full}",
        f"  %{p}sq = prim.mul %{p}xc, %{p}xc : ({full}, {full}) -> {full}",
        f"  %{p}var = prim.reduce_mean %{p}sq {{axes = [1], keepdims}} : {full} -> {col}",
        f"  %{p}eps = prim.constant dense<1.0e-05> : tensor<f32>",
        f"  %{p}ve = prim.add %{p}var, %{p}eps : ({col}, tensor<f32>) -> {col}",
        f"  %{p}inv = prim.rsqrt %{p}ve : {col} -> {col}",
        f"  %{p}xn = prim.mul %{p}xc, %{p}inv : ({full}, {col}) -> {full}",
        f"  %{p}xg = prim.mul %{p}xn, %{gamma} : ({full}, {_t(d)}) -> {full}",
        f"  %{p}ln = prim.add %{p}xg, %{beta} : ({full}, {_t(d)}) -> {full}",
    ]


def _gelu_tanh(p: str, h: str, hidden: int) -> tuple[list[str], str]:
    """Lines computing gelu(h) (the catalog's `gelu_tanh`, written once there) for h of shape
    (?, hidden), and the name of their result."""
    b = PrimTextBuilder("f32", prefix=f"%{p}g")
    g = gelu_tanh(b, TextValue(f"%{h}", (None, hidden)))
    return [f"  {line}" for line in b.lines], g.name[1:]


def _mlp_body(p: str, x: str, d: int, hidden: int) -> list[str]:
    """Pre-LN MLP with residual: %{p}y = x + W2 gelu(W1 ln(x) + b1) + b2."""
    r = "?"
    lines = _layernorm(p, x, f"{p}gamma", f"{p}beta", r, d)
    lines += [
        f"  %{p}h0 = prim.matmul %{p}ln, %{p}w1 : ({_t(r, d)}, {_t(d, hidden)}) -> {_t(r, hidden)}",
        f"  %{p}h = prim.add %{p}h0, %{p}b1 : ({_t(r, hidden)}, {_t(hidden)}) -> {_t(r, hidden)}",
    ]
    gelu, g = _gelu_tanh(p, f"{p}h", hidden)
    lines += gelu
    lines += [
        f"  %{p}o0 = prim.matmul %{g}, %{p}w2 : ({_t(r, hidden)}, {_t(hidden, d)}) -> {_t(r, d)}",
        f"  %{p}o = prim.add %{p}o0, %{p}b2 : ({_t(r, d)}, {_t(d)}) -> {_t(r, d)}",
        f"  %{p}y = prim.add %{x}, %{p}o : ({_t(r, d)}, {_t(r, d)}) -> {_t(r, d)}",
    ]
    return lines


def _mlp_params(p: str, d: int, hidden: int) -> list[str]:
    return [f"%{p}gamma: {_t(d)}", f"%{p}beta: {_t(d)}", f"%{p}w1: {_t(d, hidden)}", f"%{p}b1: {_t(hidden)}",
            f"%{p}w2: {_t(hidden, d)}", f"%{p}b2: {_t(d)}"]


def _attention_body(p: str, x: str, d: int) -> list[str]:
    """Single-head pre-LN self-attention with residual into %{p}y."""
    r = "?"
    scale = 1.0 / float(np.sqrt(d))
    lines = _layernorm(p, x, f"{p}gamma", f"{p}beta", r, d)
    for w in ("q", "k", "v"):
        lines.append(f"  %{p}{w} = prim.matmul %{p}ln, %{p}w{w} : ({_t(r, d)}, {_t(d, d)}) -> {_t(r, d)}")
    rr = _t(r, r)
    lines += [
        f"  %{p}kt = prim.transpose %{p}k {{perm = [1, 0]}} : {_t(r, d)} -> {_t(d, r)}",
        f"  %{p}s0 = prim.matmul %{p}q, %{p}kt : ({_t(r, d)}, {_t(d, r)}) -> {rr}",
        f"  %{p}scale = prim.constant dense<{scale:.9e}> : tensor<f32>",
        f"  %{p}s = prim.mul %{p}s0, %{p}scale : ({rr}, tensor<f32>) -> {rr}",
        f"  %{p}m = prim.reduce_max %{p}s {{axes = [1], keepdims}} : {rr} -> {_t(r, 1)}",
        f"  %{p}sc = prim.sub %{p}s, %{p}m : ({rr}, {_t(r, 1)}) -> {rr}",
        f"  %{p}e = prim.exp %{p}sc : {rr} -> {rr}",
        f"  %{p}z = prim.reduce_sum %{p}e {{axes = [1], keepdims}} : {rr} -> {_t(r, 1)}",
        f"  %{p}pr = prim.div %{p}e, %{p}z : ({rr}, {_t(r, 1)}) -> {rr}",
        f"  %{p}a = prim.matmul %{p}pr, %{p}v : ({rr}, {_t(r, d)}) -> {_t(r, d)}",
        f"  %{p}o = prim.matmul %{p}a, %{p}wo : ({_t(r, d)}, {_t(d, d)}) -> {_t(r, d)}",
        f"  %{p}y = prim.add %{x}, %{p}o : ({_t(r, d)}, {_t(r, d)}) -> {_t(r, d)}",
    ]
    return lines


def _attention_params(p: str, d: int) -> list[str]:
    return [f"%{p}gamma: {_t(d)}", f"%{p}beta: {_t(d)}"] + [f"%{p}w{w}: {_t(d, d)}" for w in "qkvo"]


def _func(name: str, params: list[str], body: list[str], result: str, ret_type: str, comment: str) -> str:
    head = f"// {comment}\nfunc.func @{name}(" + ", ".join(params) + f") -> {ret_type} {{\n"
    return head + "\n".join(body) + f"\n  func.return %{result} : {ret_type}\n}}\n"


# ----------------------------------------------------------------- numpy twins
def _np_layernorm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    xc = x - x.mean(axis=1, keepdims=True)
    var = (xc * xc).mean(axis=1, keepdims=True)
    return xc * (1.0 / np.sqrt(var + np.float32(1e-5))) * gamma + beta


#: numpy as a builder of the catalog's bodies, in float32 (constants as f32 scalars keep f32 arrays f32)
_NUMPY_F32 = SimpleNamespace(add=np.add, mul=np.multiply, tanh=np.tanh, constant=np.float32)


def _np_gelu_tanh(h: np.ndarray) -> np.ndarray:
    return gelu_tanh(_NUMPY_F32, h)


def _np_mlp(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, w1: np.ndarray, b1: np.ndarray,
            w2: np.ndarray, b2: np.ndarray) -> np.ndarray:
    return x + (_np_gelu_tanh(_np_layernorm(x, gamma, beta) @ w1 + b1) @ w2 + b2)


def _np_attention(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, wq: np.ndarray, wk: np.ndarray,
                  wv: np.ndarray, wo: np.ndarray) -> np.ndarray:
    ln = _np_layernorm(x, gamma, beta)
    q, k, v = ln @ wq, ln @ wk, ln @ wv
    s = (q @ k.T) * np.float32(1.0 / np.sqrt(x.shape[1]))
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return x + ((e / e.sum(axis=1, keepdims=True)) @ v) @ wo


def _np_block(x: np.ndarray, *params: np.ndarray) -> np.ndarray:
    return _np_mlp(_np_attention(x, *params[:6]), *params[6:])


def _np_chain(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.maximum(a * b + c, np.float32(0.0))


# ----------------------------------------------------------------- inputs
def _weights(rng: np.random.Generator, fan_in: int, *shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)


def _ln_params(rng: np.random.Generator, d: int) -> Inputs:
    return [(1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32), (0.1 * rng.standard_normal(d)).astype(np.float32)]


def _mlp_inputs(rng: np.random.Generator, d: int, hidden: int) -> Inputs:
    return [*_ln_params(rng, d), _weights(rng, d, d, hidden), _weights(rng, d, hidden),
            _weights(rng, hidden, hidden, d), _weights(rng, hidden, d)]


def _attention_inputs(rng: np.random.Generator, d: int) -> Inputs:
    return [*_ln_params(rng, d)] + [_weights(rng, d, d, d) for _ in range(4)]


def _x(rng: np.random.Generator, tokens: int, d: int) -> np.ndarray:
    return rng.standard_normal((tokens, d)).astype(np.float32)


# ----------------------------------------------------------------- the catalog
D_MODEL, D_HIDDEN = 64, 256

_MLP = _func("mlp", [f"%x: {_t('?', D_MODEL)}", *_mlp_params("", D_MODEL, D_HIDDEN)],
             _mlp_body("", "x", D_MODEL, D_HIDDEN), "y", _t("?", D_MODEL),
             "transformer MLP block: y = x + W2 gelu_tanh(W1 layernorm(x) + b1) + b2")
_ATTENTION = _func("attention", [f"%x: {_t('?', D_MODEL)}", *_attention_params("", D_MODEL)],
                   _attention_body("", "x", D_MODEL), "y", _t("?", D_MODEL),
                   "single-head self-attention: y = x + softmax(q k^T / sqrt(d)) v Wo, q/k/v from layernorm(x)")
_BLOCK = _func("transformer_block",
               [f"%x: {_t('?', D_MODEL)}", *_attention_params("a_", D_MODEL), *_mlp_params("m_", D_MODEL, D_HIDDEN)],
               _attention_body("a_", "x", D_MODEL) + _mlp_body("m_", "a_y", D_MODEL, D_HIDDEN), "m_y",
               _t("?", D_MODEL), "pre-LN transformer block: attention (layernorm, softmax) then MLP (layernorm, GELU)")
_CHAIN = _func("chain", [f"%{n}: {_t('?')}" for n in "abc"], [
    f"  %ab = prim.mul %a, %b : ({_t('?')}, {_t('?')}) -> {_t('?')}",
    f"  %s = prim.add %ab, %c : ({_t('?')}, {_t('?')}) -> {_t('?')}",
    f"  %r = prim.relu %s : {_t('?')} -> {_t('?')}",
], "r", _t("?"), "memory-bound elementwise chain: relu(a * b + c)")

BUILTIN_EXAMPLES: dict[str, BuiltinExample] = {
    ex.name: ex for ex in (
        BuiltinExample("transformer", "pre-LN transformer block: softmax attention + MLP (layernorm, GELU)",
                       _BLOCK, "transformer_block", 128,
                       lambda rng, n: [_x(rng, n, D_MODEL), *_attention_inputs(rng, D_MODEL),
                                       *_mlp_inputs(rng, D_MODEL, D_HIDDEN)], _np_block),
        BuiltinExample("mlp", "transformer MLP block: layernorm, matmul + bias, GELU (tanh), matmul + bias, residual",
                       _MLP, "mlp", 128, lambda rng, n: [_x(rng, n, D_MODEL), *_mlp_inputs(rng, D_MODEL, D_HIDDEN)],
                       _np_mlp),
        BuiltinExample("attention", "single-head softmax self-attention with layernorm and residual",
                       _ATTENTION, "attention", 128,
                       lambda rng, n: [_x(rng, n, D_MODEL), *_attention_inputs(rng, D_MODEL)], _np_attention),
        BuiltinExample("chain", "elementwise chain relu(a * b + c) on a vector", _CHAIN, "chain", 1 << 20,
                       lambda rng, n: [rng.standard_normal(n).astype(np.float32) for _ in range(3)], _np_chain),
    )
}

DEFAULT_EXAMPLE = "transformer"


class UnknownExampleError(FusebindError, KeyError):
    """`--example NAME` names no built-in example."""

    def __str__(self) -> str:
        return str(self.args[0])


def get_example(name: str) -> BuiltinExample:
    """The built-in example `name`; the error lists the known names."""
    try:
        return BUILTIN_EXAMPLES[name]
    except KeyError:
        known = ", ".join(sorted(BUILTIN_EXAMPLES))
        raise UnknownExampleError(f"unknown example '{name}'; the built-in examples are: {known} "
                                  "(list them with `fusebind examples`)") from None
