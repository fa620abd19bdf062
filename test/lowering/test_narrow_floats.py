"""f16 and bf16 through the lowering: stored narrow, computed in f32, rounded once.

Three ways on the same prim text (one module per dtype, shared by the tests, so each arm
compiles once): the interpreter (numpy op by op, ml_dtypes for bf16), arm 0 (each op its static
kernel: widen, compute in f32, round at the op's end, which is numpy's op-by-op answer) and the
fused arm (one kernel for the chain: rounded once at the end). The fused arm is compared with
the f32 computation rounded once.

Tolerances: a single op (add, exp, a reduction) is exactly the f32 result rounded to nearest
even, except that a transcendental's f32 value carries its fast-math error (<= 4 f32 ulp,
docs/FASTMATH.md), which can move a value that lies within 4 f32 ulp of a rounding boundary by
one narrow ulp: so 1 narrow ulp for transcendentals, 0 for the rest. The fused chain vs the
f32 chain rounded once: 1 narrow ulp (the same fast-math slack). Reductions accumulate in f32
(blocked): their f32 result differs from numpy's float64-accumulated one by n * 2^-24 relative at
most, far below half a narrow ulp except at a boundary: 1 narrow ulp.
FUSEBIND_LONG=1 adds more shapes and the whole op list.
"""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import fusebind as fb
from fusebind.dialect.types import FAMILIES
from fusebind.dialect import interpret, parse_module
from fusebind.dialect.prim_math import SinOp
from fusebind.lowering.pipeline import BF16_EXPAND, UPSTREAM_PIPELINE, with_narrow_float_passes

#: the narrow floats are a family of the element table (dialect/types.py FAMILIES): until it is
#: switched on they are refused as unsupported dtypes, and these tests have nothing to run
pytestmark = pytest.mark.skipif(not FAMILIES["narrow_float"], reason="FAMILIES['narrow_float'] is off")
LONG = os.environ.get("FUSEBIND_LONG", "").strip() in ("1", "true", "yes", "on")
NP = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}
SHAPES = [(4, 8)] + ([(1, 33), (16, 100)] if LONG else [])
#: the prim_math ops (sin, cos, ...) join once their DTYPES take the narrow floats (dialect/prim_math.py)
MATH = ["sin", "cos", "arctan", "log1p", "expm1", "cbrt"] if "f16" in SinOp.DTYPES else []
UNARY = ["exp", "tanh", "sqrt", "neg", "abs"] + MATH[:1] + (["log", "erf", "sigmoid", "relu"] + MATH[1:]
                                                            if LONG else [])
BINARY = ["add", "mul", "div", "max"] + (["sub", "min", "pow"] if LONG else [])
TRANSCENDENTAL = {"exp", "tanh", "sin", "log", "erf", "sigmoid", "cos", "arctan", "log1p", "expm1", "cbrt", "pow"}


def ulps(a: np.ndarray, b: np.ndarray, dt: np.dtype) -> int:
    """The largest distance between `a` and `b` in units of the narrow type's spacing at b."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert np.array_equal(np.isnan(a64), np.isnan(b64)), "NaN positions differ"
    ok = ~np.isnan(a64)
    if not ok.any():
        return 0
    same_inf = np.isinf(a64[ok]) | np.isinf(b64[ok])
    assert np.array_equal(a64[ok][same_inf], b64[ok][same_inf]), "infinities differ"
    fin = ~same_inf
    spacing = np.abs(np.spacing(np.asarray(b, dt)[ok][fin]).astype(np.float64))
    spacing = np.where(spacing == 0, np.finfo(dt).smallest_subnormal, spacing)
    return int(np.max(np.abs(a64[ok][fin] - b64[ok][fin]) / spacing, initial=0))


def _module(elem: str, shape: tuple[int, int]) -> str:
    """x, y -> each unary op of x, each binary op of x and y, a fused chain, reductions, matmul."""
    m, n = shape
    t = f"tensor<{m}x{n}x{elem}>"
    row, col, sc = f"tensor<{m}x{elem}>", f"tensor<{n}x{elem}>", f"tensor<{elem}>"
    mm = f"tensor<{m}x{m}x{elem}>"
    lines, outs = [], []

    def out(name: str, typ: str) -> None:
        outs.append((name, typ))

    for u in UNARY:
        lines.append(f"%u_{u} = prim.{u} %x : {t} -> {t}")
        out(f"%u_{u}", t)
    for bop in BINARY:
        lines.append(f"%b_{bop} = prim.{bop} %x, %y : ({t}, {t}) -> {t}")
        out(f"%b_{bop}", t)
    lines += [f"%c_e = prim.exp %x : {t} -> {t}", f"%c_m = prim.mul %c_e, %y : ({t}, {t}) -> {t}",
              f"%c_t = prim.tanh %c_m : {t} -> {t}", f"%chain = prim.add %c_t, %x : ({t}, {t}) -> {t}"]
    out("%chain", t)
    lines += [f'%r_sum = prim.reduce_sum %x {{axes = array<i64: 1>}} : {t} -> {row}',
              f'%r_mean = prim.reduce_mean %x {{axes = array<i64: 0>}} : {t} -> {col}',
              f'%r_max = prim.reduce_max %x {{axes = array<i64: 1>}} : {t} -> {row}',
              f'%r_all = prim.reduce_sum %x {{axes = array<i64: 0, 1>}} : {t} -> {sc}']
    out("%r_sum", row), out("%r_mean", col), out("%r_max", row), out("%r_all", sc)
    lines += [f"%yt = prim.transpose %y {{perm = [1, 0]}} : {t} -> tensor<{n}x{m}x{elem}>",
              f"%mm = prim.matmul %x, %yt : ({t}, tensor<{n}x{m}x{elem}>) -> {mm}"]
    out("%mm", mm)
    body = "\n  ".join(lines)
    names = ", ".join(o for o, _ in outs)
    types = ", ".join(ty for _, ty in outs)
    return (f"func.func @main(%x: {t}, %y: {t}) -> ({types}) {{\n  {body}\n  func.return {names} : {types}\n}}\n")


_COMPILED: dict[tuple[str, tuple[int, int]], tuple] = {}


def _three_ways(elem: str, shape: tuple[int, int]) -> tuple:
    key = (elem, shape)
    if key not in _COMPILED:
        text = _module(elem, shape)
        _COMPILED[key] = (text, parse_module(text), fb.compile(text, optimize=False), fb.compile(text))
    return _COMPILED[key]


def _inputs(elem: str, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(14)
    x = rng.uniform(0.05, 2.0, shape).astype(NP[elem])
    y = rng.uniform(0.5, 1.5, shape).astype(NP[elem])
    return x, y


def _f32_reference(elem: str, x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """The module's values computed in f32 (f64 for the reductions' accumulation), each rounded once."""
    import math

    a, b = x.astype(np.float32), y.astype(np.float32)
    f = {"exp": np.exp, "tanh": np.tanh, "sqrt": np.sqrt, "neg": np.negative, "abs": np.abs, "sin": np.sin,
         "log": np.log, "erf": np.vectorize(math.erf, otypes=[np.float64]), "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "cos": np.cos, "arctan": np.arctan, "log1p": np.log1p,
         "expm1": np.expm1, "cbrt": np.cbrt, "relu": lambda v: np.maximum(v, 0)}
    g = {"add": np.add, "mul": np.multiply, "div": np.divide, "max": np.maximum, "sub": np.subtract,
         "min": np.minimum, "pow": np.power}
    vals = [f[u](a) for u in UNARY] + [g[o](a, b) for o in BINARY]
    vals.append(np.tanh(np.exp(a) * b) + a)
    a64 = a.astype(np.float64)
    vals += [a64.sum(axis=1), a64.mean(axis=0), a.max(axis=1), a64.sum()]
    vals.append(a @ b.T)
    return [np.asarray(v).astype(np.float32).astype(NP[elem]) for v in vals]


def _labels() -> list[str]:
    return UNARY + BINARY + ["chain", "sum1", "mean0", "max1", "sum_all", "matmul"]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("elem", ["f16", "bf16"])
def test_every_arm_gives_the_narrow_dtype_and_the_f32_result_rounded_once(elem: str, shape: tuple[int, int]) -> None:
    text, module, arm0, fused = _three_ways(elem, shape)
    x, y = _inputs(elem, shape)
    with np.errstate(all="ignore"):
        ref = interpret(module, x, y)
    want = _f32_reference(elem, x, y)
    before = fused.stats.arms.fused_calls
    got = {"arm 0": arm0(x, y), "fused": fused(x, y)}
    assert fused.stats.arms.fused_calls > before, "the fused arm ran no fused kernel"
    for arm, outs in got.items():
        for label, o, r, w in zip(_labels(), outs, ref, want):
            assert o.dtype == NP[elem] and o.shape == w.shape, (arm, label, o.dtype, o.shape)
            slack = 1 if (label in TRANSCENDENTAL or label in ("chain", "sum1", "mean0", "sum_all", "matmul")) else 0
            assert ulps(o, w, NP[elem]) <= slack, f"{arm} {label}: {o} vs f32 rounded once {w}"
            if arm == "arm 0" and label in BINARY + ["neg", "abs", "sqrt", "max1"]:
                # a correctly rounded single op: numpy op by op (the interpreter) exactly
                assert ulps(o, r, NP[elem]) == 0, f"{arm} {label}: {o} vs numpy {r}"


def test_the_fused_chain_rounds_once_where_numpy_rounds_each_op() -> None:
    """exp(x) * y + x on f16: numpy rounds exp(x) and the product to f16; the fused kernel keeps
    them in f32. A value where the two differ shows the kernel computes in f32."""
    text = ("func.func @main(%x: tensor<64xf16>, %y: tensor<64xf16>) -> tensor<64xf16> {\n"
            "  %e = prim.exp %x : tensor<64xf16> -> tensor<64xf16>\n"
            "  %m = prim.mul %e, %y : (tensor<64xf16>, tensor<64xf16>) -> tensor<64xf16>\n"
            "  %s = prim.sub %m, %e : (tensor<64xf16>, tensor<64xf16>) -> tensor<64xf16>\n"
            "  func.return %s : tensor<64xf16>\n}\n")
    x = np.linspace(0.1, 3.0, 64).astype(np.float16)
    y = np.full(64, 1.0009765625, np.float16)  # 1 + 2^-10: exp(x) * y - exp(x) is exp(x) * 2^-10
    fused, arm0 = fb.compile(text), fb.compile(text, optimize=False)
    e32 = np.exp(x.astype(np.float32))
    once = (e32 * y.astype(np.float32) - e32).astype(np.float16)
    by_op = (np.exp(x) * y - np.exp(x))
    assert not np.array_equal(once, by_op)  # the inputs tell the two roundings apart
    assert ulps(fused(x, y), once, np.dtype(np.float16)) <= 1
    assert np.array_equal(arm0(x, y), by_op)


@pytest.mark.parametrize("elem", ["f16", "bf16"])
def test_overflow_nan_inf_and_ties_round_as_numpy(elem: str) -> None:
    """Round to nearest even at the top of the range (f16 max 65504, bf16 max 3.3895e38), NaN and
    infinities kept, ties to even, signed zero, subnormals: bit for bit numpy / ml_dtypes."""
    dt = NP[elem]
    big = float(np.finfo(dt).max)
    tiny = float(np.finfo(dt).smallest_subnormal)
    a = np.array([big, big, -big, np.nan, np.inf, -np.inf, -0.0, tiny, 1.0, 1.0, 3.0, 0.5], np.float32)
    b = np.array([1.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0 ** -8, 3 * 2.0 ** -8, 0.0, 2.0 ** -12], np.float32)
    if elem == "f16":
        b[8:10] = [2.0 ** -11, 3 * 2.0 ** -11]  # half an f16 ulp at 1.0: ties
    text = (f"func.func @main(%a: tensor<12xf32>, %b: tensor<12xf32>) -> (tensor<12x{elem}>, tensor<12x{elem}>) {{\n"
            f"  %s = prim.add %a, %b : (tensor<12xf32>, tensor<12xf32>) -> tensor<12xf32>\n"
            f"  %n = prim.cast %s : tensor<12xf32> -> tensor<12x{elem}>\n"
            f"  %h = prim.cast %a : tensor<12xf32> -> tensor<12x{elem}>\n"
            f"  %k = prim.cast %b : tensor<12xf32> -> tensor<12x{elem}>\n"
            f"  %p = prim.mul %h, %k : (tensor<12x{elem}>, tensor<12x{elem}>) -> tensor<12x{elem}>\n"
            f"  func.return %n, %p : tensor<12x{elem}>, tensor<12x{elem}>\n}}\n")
    with np.errstate(all="ignore"):
        want_sum = (a + b).astype(dt)
        want_mul = (a.astype(dt).astype(np.float32) * b.astype(dt).astype(np.float32)).astype(dt)
        for f in (fb.compile(text), fb.compile(text, optimize=False)):
            got_sum, got_mul = f(a, b)
            for got, want in ((got_sum, want_sum), (got_mul, want_mul)):
                assert got.dtype == dt
                assert np.array_equal(got.view(np.uint16)[~np.isnan(want)], want.view(np.uint16)[~np.isnan(want)])
                assert np.array_equal(np.isnan(got), np.isnan(want))
    # the cases do exercise the edges: max * 2 overflows to +-inf, -0.0 + 1.0 ... and the ties move
    assert np.isposinf(want_mul[1]) and np.isneginf(want_mul[2]) and want_sum[8] == 1.0


def test_only_kernels_naming_bf16_run_the_bf16_expansion() -> None:
    plain = with_narrow_float_passes(UPSTREAM_PIPELINE, "func.func @k(%a: memref<4xf16>)")
    assert plain == UPSTREAM_PIPELINE
    with_bf16 = [p for p, _ in with_narrow_float_passes(UPSTREAM_PIPELINE, "memref<4xbf16>")]
    assert with_bf16.index(BF16_EXPAND[0]) == with_bf16.index("convert-arith-to-llvm") - 1
