"""Sums and means read back by an elementwise op that broadcasts them (x - x.sum(axis,
keepdims=True), x / x.sum(...), x * x.mean(...)) give numpy's answer.

The bug (cab5bec, silent): a blocked float32 sum folded its last partial into the total with
a `linalg.generic` that reads its `outs` (an in-place update). `linalg-fuse-elementwise-ops`
fused it, through the cast, into the consumer; a fused producer that reads its `outs` stays an
output of the fused loop, indexed by the consumer's map ((d0, d1) -> (0, d1) over a parallel
d0), so every row re-read and re-added the total: row i of `a - a.sum(0, keepdims=True)` was
off by i * the column sum. The same shape of bug was in two older places: the row-wise kernel
that overwrites a stored row in place (548c14f: `e / e.sum(axis=(1, 2), keepdims=True) + c`
with e of shape (3, 1, 5)) and reductions over no axes (`axes = []`).

Checked three ways: the fused loops of every case (every axis subset of 2-D and 3-D inputs,
keepdims true/false, three consumers, float32 and a cover of float64/int32, static and dynamic
kernels, written as prim ops) share no output between parallel iterations
(`pipeline.fusion_hazards`, after the upstream fusion pass); values through `fb.jit` against
numpy, with the fused kernel running (not the unfused fallback); dynamic shapes (`fb.compile`
of `?` dims, and kernels emitted with every dim dynamic). The long run (FUSEBIND_LONG=1) takes
every case, each dtype, through both checks.
"""

from __future__ import annotations

import itertools
import math
import os
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import fusebind as fb
from fusebind.dialect import parse_module
from fusebind.lowering import LoweringError, ObjectCache, emit_linalg
from fusebind.lowering.pipeline import FUSION_PASS, fusion_hazards, run_upstream_pipeline
from fusebind.runtime.testing import isolated_global_state

from lowering_helpers import compile_func

LONG = os.environ.get("FUSEBIND_LONG", "").strip() in ("1", "true", "yes", "on")
DTYPES = [np.float32, np.float64, np.int32]
SHAPES = {2: [(3, 4), (37, 130)], 3: [(2, 3, 4), (5, 7, 300)]}


def subsets(rank: int) -> list[tuple[int, ...]]:
    return [c for k in range(1, rank + 1) for c in itertools.combinations(range(rank), k)]


def direct(axes: tuple[int, ...], keepdims: bool) -> bool:
    """Whether `x` broadcasts the reduction as it is: keepdims, or only leading axes dropped."""
    return keepdims or axes == tuple(range(len(axes)))


def _back(s: Any, x: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
    """The reduced `s` where `x` can broadcast it: reshaped to the keepdims shape when
    keepdims=False dropped an axis that is not leading (the reshape runs between kernels)."""
    if direct(axes, keepdims):
        return s
    return s.reshape(tuple(1 if j in axes else d for j, d in enumerate(x.shape)))


CONSUMERS: dict[str, Callable[[Any, tuple[int, ...], bool], Any]] = {
    "x - x.sum": lambda x, ax, kd: x - _back(x.sum(axis=ax, keepdims=kd), x, ax, kd),
    "x / x.sum": lambda x, ax, kd: x / _back(x.sum(axis=ax, keepdims=kd), x, ax, kd),
    "x * x.mean": lambda x, ax, kd: x * _back(x.mean(axis=ax, keepdims=kd), x, ax, kd),
}


def cases(full: bool) -> list[tuple[str, Any, tuple[int, ...], tuple[int, ...], bool]]:
    """(consumer, dtype, shape, axes, keepdims): every one, or (default run) one per consumer x
    dtype x rank, alternating the shape and the (directly broadcast) axes and keepdims."""
    out = []
    for name, dtype, rank in itertools.product(CONSUMERS, DTYPES, SHAPES):
        combos = list(itertools.product(SHAPES[rank], subsets(rank), (True, False)))
        if not full:
            k = DTYPES.index(dtype) + list(CONSUMERS).index(name) * len(DTYPES) + rank
            ways = [(axes, kd) for axes, kd in itertools.product(subsets(rank), (True, False)) if direct(axes, kd)]
            combos = [(SHAPES[rank][k % 2], *ways[(7 * k) % len(ways)])]
        out.extend((name, dtype, shape, axes, kd) for shape, axes, kd in combos)
    return out


def data(name: str, shape: tuple[int, ...], dtype: Any, seed: int = 0) -> np.ndarray:
    """Positive values under a division (no zero sums), signed ones elsewhere."""
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(1 if "/" in name else -9, 10, shape).astype(dtype)
    x = rng.random(shape) + 1 if "/" in name else rng.standard_normal(shape)
    return x.astype(dtype)


def check(got: np.ndarray, x: np.ndarray, name: str, axes: tuple[int, ...], what: str) -> None:
    """numpy's dtype and shape, and values within the sum's bound (docs/REDUCTIONS.md):
    |error of the sum| <= 2 log2(n) eps sum|x|, carried through the consumer, plus its own
    rounding. The bug's errors are whole partial sums, far outside it."""
    want = CONSUMERS[name](x, axes, True)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape, want.dtype, want.shape)
    if want.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    n = math.prod(x.shape[a] for a in axes)
    eps = np.finfo(want.dtype).eps
    xa = x.astype(np.float64)
    summed = np.abs(xa).sum(axis=axes, keepdims=True)
    sum_err = 2 * max(math.log2(n), 1.0) * eps * summed
    w = want.astype(np.float64)
    if name == "x - x.sum":
        tol = sum_err + 2 * eps * np.abs(w)
    elif name == "x / x.sum":
        tol = np.abs(w) * (sum_err / np.abs(xa.sum(axis=axes, keepdims=True)) + 2 * eps)
    else:
        tol = np.abs(xa) * sum_err / n + 2 * eps * np.abs(w)
    err = np.abs(got.astype(np.float64) - w)
    assert np.all(err <= tol), f"{what}: error {float(err.max()):.3g}, {float((err / tol).max()):.3g}x the bound"


@pytest.fixture(autouse=True)
def _isolated() -> Iterator[None]:
    with isolated_global_state():
        yield


def _hazards_after_fusion(text: str) -> list[str]:
    from mlir import ir, passmanager

    with ir.Context() as ctx:
        module = ir.Module.parse(text, ctx)
        passmanager.PassManager.parse(f"builtin.module({FUSION_PASS})", ctx).run(module.operation)
        return fusion_hazards(module)


# ------------------------------------------------------------------------ structure: every case

PRIM = {"x - x.sum": ("reduce_sum", "sub"), "x / x.sum": ("reduce_sum", "div"), "x * x.mean": ("reduce_mean", "mul")}
ELEM = {np.float32: "f32", np.float64: "f64", np.int32: "i32"}


def consumer_text(name: str, dtype: Any, shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> str:
    """The prim ops of `CONSUMERS[name]` (int32: the sum's consumers, sub and mul, in int32;
    the traced int mean is a float64 one)."""
    e = ELEM[dtype]
    reduce, consumer = PRIM[name]
    if e == "i32":
        reduce, consumer = "reduce_sum", {"div": "sub"}.get(consumer, consumer)

    def t(dims: Any) -> str:
        return f"tensor<{''.join(f'{d}x' for d in dims)}{e}>"

    kept = [1 if j in axes else d for j, d in enumerate(shape)]
    red = kept if keepdims else [d for j, d in enumerate(shape) if j not in axes]
    kd = ", keepdims" if keepdims else ""
    lines = [f"func.func @f(%x: {t(shape)}) -> {t(shape)} {{",
             f"  %s = prim.{reduce} %x {{axes = array<i64: {', '.join(map(str, axes))}>{kd}}} : {t(shape)} -> {t(red)}"]
    if not direct(axes, keepdims):
        lines.append(f"  %b = prim.reshape %s : {t(red)} -> {t(kept)}")
    b, bt = ("%s", t(red)) if direct(axes, keepdims) else ("%b", t(kept))
    lines += [f"  %d = prim.{consumer} %x, {b} : ({t(shape)}, {bt}) -> {t(shape)}",
              f"  func.return %d : {t(shape)}", "}"]
    return "\n".join(lines)


@pytest.mark.parametrize("rank", [2, 3])
def test_no_fused_loop_shares_an_output_between_parallel_iterations(rank: int) -> None:
    """After the upstream fusion pass, no generic reads an output that several parallel
    iterations write: float32 x every consumer x axis subset x keepdims x shape, static and
    dynamic kernels (float64 and int32: a cover; all of them under FUSEBIND_LONG=1). Before
    the fix 12 of the 69 kernels in 2-D and 24 of the 132 in 3-D failed: the static float32
    sums and means over one axis that is not the innermost (chain mode, whose last fold was
    outside a loop). float64's two-output fold was never fused (two uses); integer sums are
    not blocked."""
    from mlir import ir, passmanager

    bad, checked = [], 0
    with ir.Context() as ctx:
        fusion = passmanager.PassManager.parse(f"builtin.module({FUSION_PASS})", ctx)
        for name, dtype, shape, axes, kd in cases(full=True):
            if len(shape) != rank or not (LONG or dtype == np.float32 or (axes, kd) == ((rank - 1,), True)):
                continue
            func = next(iter(parse_module(consumer_text(name, dtype, shape, axes, kd)).ops))
            for dynamic in (False, True) if direct(axes, kd) else (False,):  # reshape needs static shapes
                if dynamic and shape != SHAPES[rank][0]:
                    continue  # one dynamic kernel serves every shape
                module = ir.Module.parse(emit_linalg(func, "k", dynamic=dynamic).text, ctx)
                fusion.run(module.operation)
                checked += 1
                hazards = fusion_hazards(module)
                if hazards:
                    bad.append(f"{name} {np.dtype(dtype)} {shape} axes={axes} keepdims={kd} "
                               f"dynamic={dynamic}: {hazards[0]}")
    assert checked >= 3 * len(subsets(rank)) * 2 * len(SHAPES[rank]) and not bad, f"{len(bad)} of {checked} kernels:\n" + "\n".join(bad[:10])


# ------------------------------------------------------------------------ values through fb.jit

def test_the_reported_examples(object_cache: ObjectCache) -> None:
    """Row 1 of `a - a.sum(0, keepdims=True)` was off by -3 a[1] (-a.sum(0)), row 2 by twice
    that; the (2, 3, 4) sum over axis 1 was off by up to 114."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    f = fb.jit(lambda a: a - a.sum(axis=0, keepdims=True), cache=object_cache)
    np.testing.assert_array_equal(f(a), a - a.sum(axis=0, keepdims=True))
    b = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    g = fb.jit(lambda b: b - b.sum(axis=1, keepdims=True), cache=object_cache)
    np.testing.assert_array_equal(g(b), b - b.sum(axis=1, keepdims=True))
    assert (f.stats.fused_calls, f.stats.arm0_calls, g.stats.fused_calls, g.stats.arm0_calls) == (1, 0, 1, 0)


@pytest.mark.parametrize("name", list(CONSUMERS))
def test_consumers_of_sums_and_means_give_numpys_answer(name: str, object_cache: ObjectCache) -> None:
    """Through fb.jit, with the fused kernel running where the consumer broadcasts the sum
    directly: a cover of dtype x rank x shape x axes x keepdims by default (every case under
    FUSEBIND_LONG=1)."""
    for _, dtype, shape, axes, kd in (c for c in cases(full=LONG) if c[0] == name):
        x = data(name, shape, dtype, seed=len(axes))
        f = fb.jit((lambda ax, k: lambda x: CONSUMERS[name](x, ax, k))(axes, kd), cache=object_cache)
        what = f"{name} {np.dtype(dtype)} {shape} axes={axes} keepdims={kd}"
        check(f(x), x, name, axes, what)
        if direct(axes, kd):  # one fused region, which must have compiled (no unfused fallback)
            assert (f.stats.fused_calls, f.stats.arm0_calls) == (1, 0), (what, f.stats)


VARIANCES = [  # the mean read back through a broadcast by the blocked sum of the squares
    ("var", np.float32, (37, 130), (0,)), ("var", np.float32, (5, 7, 300), (1,)),
    ("std", np.float32, (5, 7, 300), (0, 2)), ("var", np.float64, (3, 4), (0,)),
]


def test_variances_give_numpys_answer(object_cache: ObjectCache) -> None:
    """np.var / np.std (the numpy sweep's failure): off by up to 25 on (5, 7, 300) over axis 1
    before the fix. Every axis subset, shape and float dtype under FUSEBIND_LONG=1. Squares
    are nonnegative, so the sum's bound is relative: 2 log2(n) eps, plus the mean's share."""
    long = [(f, d, sh, ax) for f in ("var", "std") for d in (np.float32, np.float64)
            for r in SHAPES for sh in SHAPES[r] for ax in subsets(r)]
    for fname, dtype, shape, axes in long if LONG else VARIANCES:
        x = data("x - x.sum", shape, dtype, seed=7)
        f = fb.jit((lambda fn, ax: lambda x: getattr(x, fn)(axis=ax))(fname, axes), cache=object_cache)
        want = getattr(x, fname)(axis=axes)
        got = f(x)
        n = math.prod(shape[a] for a in axes)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=4 * max(math.log2(n), 1.0) * np.finfo(dtype).eps,
                                   err_msg=f"{fname} {np.dtype(dtype)} {shape} axes={axes}")
        assert (f.stats.fused_calls, f.stats.arm0_calls) == (1, 0), (fname, shape, axes, f.stats)


# ------------------------------------------------------------------------ dynamic shapes

def _prim_text(rank: int, axes: tuple[int, ...], keepdims: bool, op: str, consumer: str) -> str:
    """`x <consumer> reduce(x)` over `?` dims (float32): keepdims, or (keepdims false, leading
    axes) numpy's trailing alignment."""
    t = f"tensor<{'?x' * rank}f32>"
    red = "x".join("1" if j in axes else "?" for j in range(rank) if keepdims or j not in axes)
    rt = f"tensor<{red}xf32>" if red else "tensor<f32>"
    kd = ", keepdims" if keepdims else ""
    return (f"func.func @f(%x: {t}) -> {t} {{\n"
            f"  %s = prim.{op} %x {{axes = array<i64: {', '.join(map(str, axes))}>{kd}}} : {t} -> {rt}\n"
            f"  %d = prim.{consumer} %x, %s : ({t}, {rt}) -> {t}\n"
            f"  func.return %d : {t}\n}}\n")


DYNAMIC = [  # rank, axes, keepdims, prim reduction, prim consumer, CONSUMERS name
    (2, (0,), True, "reduce_sum", "sub", "x - x.sum"),
    (2, (1,), True, "reduce_mean", "mul", "x * x.mean"),
    (2, (0,), False, "reduce_sum", "div", "x / x.sum"),
    (3, (0, 2), True, "reduce_sum", "sub", "x - x.sum"),
    (3, (1,), True, "reduce_sum", "div", "x / x.sum"),
    (3, (0, 1), False, "reduce_mean", "mul", "x * x.mean"),
]


@pytest.mark.parametrize("rank, axes, keepdims, op, consumer, name", DYNAMIC)
def test_dynamic_shape_consumers(rank: int, axes: tuple[int, ...], keepdims: bool, op: str, consumer: str,
                                 name: str, object_cache: ObjectCache) -> None:
    """The same through fb.compile of `?` dims (a fused kernel per shape), and through one
    kernel whose every dim is dynamic, run at a small and a larger odd shape."""
    text = _prim_text(rank, axes, keepdims, op, consumer)
    f = fb.compile(text, cache=object_cache)
    dynamic = compile_func(text, object_cache, dynamic=True)
    for shape in SHAPES[rank]:
        x = data(name, shape, np.float32, seed=rank)
        what = f"{text.splitlines()[1].strip()} at {shape}"
        check(f(x), x, name, axes, f"fb.compile {what}")
        (got,) = dynamic(x, out_shapes=[shape])
        check(got, x, name, axes, f"dynamic kernel {what}")
    assert (f.stats.arms.fused_calls, f.stats.arms.arm0_calls) == (2, 0)


# ------------------------------------------------------------------------ the older siblings

ROW_OVERWRITE = """
func.func @f(%x: tensor<3x1x5xf32>, %c: tensor<3x4x5xf32>) -> tensor<3x4x5xf32> {
  %e = prim.exp %x : tensor<3x1x5xf32> -> tensor<3x1x5xf32>
  %s = prim.REDUCE %e {axes = array<i64: 1, 2>, keepdims} : tensor<3x1x5xf32> -> tensor<3x1x1xf32>
  %y = prim.CONSUMER %e, %s : (tensor<3x1x5xf32>, tensor<3x1x1xf32>) -> tensor<3x1x5xf32>
  %d = prim.add %y, %c : (tensor<3x1x5xf32>, tensor<3x4x5xf32>) -> tensor<3x4x5xf32>
  func.return %d : tensor<3x4x5xf32>
}
"""


@pytest.mark.parametrize("reduce, consumer", [("reduce_sum", "div"), ("reduce_max", "sub")])
def test_a_row_overwritten_in_place_then_broadcast(reduce: str, consumer: str, object_cache: ObjectCache) -> None:
    """The row-wise kernel overwrites the stored exp row with its last use (`elementwise_into`);
    with a size-1 dim in the row that a later op broadcasts, the overwrite ran once per
    broadcast iteration: off by 7.4 (max) before the fix; 0.4 through fb.jit (below)."""
    text = ROW_OVERWRITE.replace("REDUCE", reduce).replace("CONSUMER", consumer)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 1, 5)).astype(np.float32)
    c = rng.standard_normal((3, 4, 5)).astype(np.float32)
    e = np.exp(x)
    s = e.sum(axis=(1, 2), keepdims=True) if reduce == "reduce_sum" else e.max(axis=(1, 2), keepdims=True)
    want = (e / s if consumer == "div" else e - s) + c
    k = compile_func(text, object_cache)
    assert _hazards_after_fusion(k.emitted.text) == []
    np.testing.assert_allclose(k(x, c)[0], want, rtol=2e-6, atol=2e-6)


def test_a_softmax_over_a_size_one_axis_then_broadcast(object_cache: ObjectCache) -> None:
    def f(x: Any, c: Any) -> Any:
        e = np.exp(x - x.max(axis=(1, 2), keepdims=True))
        return e / e.sum(axis=(1, 2), keepdims=True) + c

    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 1, 5)).astype(np.float32)
    c = rng.standard_normal((3, 4, 5)).astype(np.float32)
    j = fb.jit(f, cache=object_cache)
    np.testing.assert_allclose(j(x, c), f(x, c), rtol=2e-6, atol=2e-6)
    assert (j.stats.fused_calls, j.stats.arm0_calls) == (1, 0)


NO_AXES = """
func.func @f(%x: tensor<SHAPExELEM>, %z: tensor<3x4xELEM>) -> tensor<3x4xELEM> {
  %s = prim.REDUCE %x {axes = array<i64>} : tensor<SHAPExELEM> -> tensor<SHAPExELEM>
  %d = prim.add %s, %z : (tensor<SHAPExELEM>, tensor<3x4xELEM>) -> tensor<3x4xELEM>
  func.return %d : tensor<3x4xELEM>
}
"""


@pytest.mark.parametrize("reduce, elem, shape", [
    (r, e, s) for r in ("reduce_sum", "reduce_mean", "reduce_max") for e, s in (("f32", (1, 4)), ("f32", ()), ("i32", (1, 4)))
    if not (r == "reduce_mean" and e == "i32")])  # prim.reduce_mean takes floats only
def test_a_reduction_over_no_axes_is_the_values(reduce: str, elem: str, shape: tuple[int, ...],
                                               object_cache: ObjectCache) -> None:
    """`axes = []` (and a 0-d operand) reduces nothing: numpy gives the values. It was an
    all-parallel generic that adds its input to its `outs`, summed once per broadcast row
    (off by 26 on a (1, 4) sum before the fix)."""
    dims = "x".join(map(str, shape))
    text = NO_AXES.replace("SHAPExELEM", f"{dims}x{elem}" if dims else elem).replace("ELEM", elem)
    text = text.replace("REDUCE", reduce)
    dtype = np.float32 if elem == "f32" else np.int32
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * 10).astype(dtype)
    z = (rng.standard_normal((3, 4)) * 10).astype(dtype)
    k = compile_func(text, object_cache)
    assert _hazards_after_fusion(k.emitted.text) == []
    np.testing.assert_array_equal(k(x, z)[0], x + z)


# ------------------------------------------------------------------------ the guard

HAZARD = """
func.func @k(%in0: memref<3x4xf32>, %out0: memref<3x4xf32>) attributes {llvm.emit_c_interface} {
  %t0 = bufferization.to_tensor %in0 restrict : memref<3x4xf32> to tensor<3x4xf32>
  %z = arith.constant 0.0 : f64
  %e0 = tensor.empty() : tensor<1x4xf64>
  %w = linalg.fill ins(%z : f64) outs(%e0 : tensor<1x4xf64>) -> tensor<1x4xf64>
  %w1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
      iterator_types = ["parallel", "parallel"]} ins(%t0 : tensor<3x4xf32>) outs(%w : tensor<1x4xf64>) {
  ^bb0(%p: f32, %s: f64):
    %pe = arith.extf %p : f32 to f64
    %n = arith.addf %s, %pe : f64
    linalg.yield %n : f64
  } -> tensor<1x4xf64>
  %e1 = tensor.empty() : tensor<3x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d1)>,
      affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%t0, %w1 : tensor<3x4xf32>, tensor<1x4xf64>) outs(%e1 : tensor<3x4xf32>) {
  ^bb0(%x: f32, %v: f64, %o: f32):
    %vt = arith.truncf %v : f64 to f32
    %d = arith.subf %x, %vt : f32
    linalg.yield %d : f32
  } -> tensor<3x4xf32>
  bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<3x4xf32>, memref<3x4xf32>) -> ()
  return
}
"""


REDUCED_HAZARD = """
func.func @k(%in0: memref<1x4xf32>, %in1: memref<3x4xf32>, %out0: memref<1x4xf32>) attributes {llvm.emit_c_interface} {
  %p = bufferization.to_tensor %in0 restrict : memref<1x4xf32> to tensor<1x4xf32>
  %x = bufferization.to_tensor %in1 restrict : memref<3x4xf32> to tensor<3x4xf32>
  %z = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<1x4xf32>
  %w = linalg.fill ins(%z : f32) outs(%e0 : tensor<1x4xf32>) -> tensor<1x4xf32>
  %w1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
      iterator_types = ["parallel", "parallel"]} ins(%p : tensor<1x4xf32>) outs(%w : tensor<1x4xf32>) {
  ^bb0(%a: f32, %s: f32):
    %n = arith.addf %s, %a : f32
    linalg.yield %n : f32
  } -> tensor<1x4xf32>
  %e1 = tensor.empty() : tensor<1x4xf32>
  %acc = linalg.fill ins(%z : f32) outs(%e1 : tensor<1x4xf32>) -> tensor<1x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d1)>,
      affine_map<(d0, d1) -> (0, d1)>], iterator_types = ["reduction", "parallel"]}
      ins(%x, %w1 : tensor<3x4xf32>, tensor<1x4xf32>) outs(%acc : tensor<1x4xf32>) {
  ^bb0(%xv: f32, %v: f32, %o: f32):
    %d = arith.subf %xv, %v : f32
    %q = arith.addf %o, %d : f32
    linalg.yield %q : f32
  } -> tensor<1x4xf32>
  bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<1x4xf32>, memref<1x4xf32>) -> ()
  return
}
"""


@pytest.mark.parametrize("text, consumer", [(HAZARD, "elementwise"), (REDUCED_HAZARD, "reduction")])
def test_a_kernel_fusion_would_make_wrong_is_refused_by_name(text: str, consumer: str) -> None:
    """An in-place update read through a broadcast (the bug's shape, written by hand), by an
    elementwise consumer (the shared output leaves out a parallel loop) or by a reduction
    (it leaves out the reduction loop and feeds the accumulator), is refused by the
    pipeline, naming the op's output, its map and the loops it leaves out (a failed compile
    leaves the region on its unfused arm, runtime/jit.py). A reduction's own accumulator,
    which also leaves out its loop, is not: every other test here builds one."""
    with pytest.raises(LoweringError) as info:
        run_upstream_pipeline(text)
    assert info.value.stage == "mlir-passes"
    assert ("internal error: elementwise fusion made a kernel that would compute a wrong answer, so it is not "
            "built:") in info.value.message
    assert ("output #0 of a linalg.generic is read by its payload and indexed by (d0, d1) -> (0, d1), which "
            "leaves out the loop(s) d0") in info.value.message
