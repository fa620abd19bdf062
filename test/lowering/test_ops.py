"""Every prim op and dtype, compiled through the whole path (emit -> MLIR
passes -> LLVM IR -> llvmlite -> JIT), against the numpy reference interpreter.

To keep the suite fast, all ops of one dtype and shape share one kernel: one
func with one result per op. Approximated functions (fastmath.py) are allowed
ULP_BOUND ulps; everything else must match bit for bit (NaNs as NaNs,
including the sign of zeros).
"""

from __future__ import annotations

import numpy as np
import pytest

from fusebind.lowering import ObjectCache

from lowering_helpers import BINARY, PREDS, UNARY, _t, check, compile_func, reference, sample

def all_ops_module(elem: str, shape: tuple[int | None, ...]) -> tuple[str, list[str]]:
    """A func of (a, b) with one result per elementwise op on `elem`."""
    T, B = _t(shape, elem), _t(shape, "i1")
    lines, results, names = [], [], []
    for i, op in enumerate(UNARY[elem]):
        lines.append(f"%u{i} = prim.{op} %a : {T} -> {T}")
        results.append((f"%u{i}", T)); names.append(op)
    for i, op in enumerate(BINARY[elem]):
        lines.append(f"%b{i} = prim.{op} %a, %b : ({T}, {T}) -> {T}")
        results.append((f"%b{i}", T)); names.append(op)
    for i, p in enumerate(PREDS):
        lines.append(f"%c{i} = prim.compare {p} %a, %b : ({T}, {T}) -> {B}")
        results.append((f"%c{i}", B)); names.append(f"compare-{p}")
    lines.append(f"%s = prim.select %c2, %a, %b : ({B}, {T}, {T}) -> {T}")
    results.append(("%s", T)); names.append("select")
    body = "\n  ".join(lines)
    rets = ", ".join(r for r, _ in results)
    types = ", ".join(t for _, t in results)
    text = (f"func.func @f(%a: {T}, %b: {T}) -> ({types}) {{\n  {body}\n"
            f"  func.return {rets} : {types}\n}}\n")
    return text, names


SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 1, 9), (1000,)]


@pytest.mark.parametrize("elem", ["f32", "f64", "i32", "i64"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)) or "0d")
def test_every_elementwise_op_static(elem: str, shape: tuple[int, ...], object_cache: ObjectCache) -> None:
    text, names = all_ops_module(elem, shape)
    f = compile_func(text, object_cache)
    a, b = sample(elem, shape, 1), sample(elem, shape, 2)
    got = f(a, b)
    want = reference(f.module, a, b)
    for name, g, w in zip(names, got, want):
        check(name, g, w)


@pytest.mark.parametrize("elem", ["f32", "f64", "i32", "i64"])
def test_every_elementwise_op_dynamic(elem: str, object_cache: ObjectCache) -> None:
    """One dynamic kernel (all dims `?`) serves every shape of its rank."""
    text, names = all_ops_module(elem, (None, None))
    f = compile_func(text, object_cache, dynamic=True)
    for shape in [(0, 3), (1, 1), (3, 7), (64, 33)]:
        a, b = sample(elem, shape, 3), sample(elem, shape, 4)
        got = f(a, b, out_shapes=[shape] * len(names))
        want = reference(f.module, a, b)
        for name, g, w in zip(names, got, want):
            check(f"{name}@{shape}", g, w)


def test_large_array_chain(object_cache: ObjectCache) -> None:
    n = 1_000_003
    text = f"""func.func @f(%a: tensor<{n}xf32>, %b: tensor<{n}xf32>, %c: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %m = prim.mul %a, %b : (tensor<{n}xf32>, tensor<{n}xf32>) -> tensor<{n}xf32>
  %s = prim.add %m, %c : (tensor<{n}xf32>, tensor<{n}xf32>) -> tensor<{n}xf32>
  %r = prim.relu %s : tensor<{n}xf32> -> tensor<{n}xf32>
  func.return %r : tensor<{n}xf32>
}}"""
    f = compile_func(text, object_cache)
    a, b, c = (sample("f32", (n,), s) for s in (5, 6, 7))
    (got,) = f(a, b, c)
    check("relu(a*b+c)", got, reference(f.module, a, b, c)[0])


def test_relu_keeps_negative_zero_and_nan(object_cache: ObjectCache) -> None:
    text = """func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = prim.relu %a : tensor<4xf32> -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}"""
    (got,) = compile_func(text, object_cache)(np.array([-0.0, np.nan, -1.0, 2.0], np.float32))
    assert np.signbit(got[0]) and got[0] == 0 and np.isnan(got[1]) and got[2] == 0 and got[3] == 2


def test_max_min_propagate_nan_and_match_numpy_on_signed_zeros(object_cache: ObjectCache) -> None:
    text = """func.func @f(%a: tensor<6xf64>, %b: tensor<6xf64>) -> (tensor<6xf64>, tensor<6xf64>) {
  %x = prim.max %a, %b : (tensor<6xf64>, tensor<6xf64>) -> tensor<6xf64>
  %n = prim.min %a, %b : (tensor<6xf64>, tensor<6xf64>) -> tensor<6xf64>
  func.return %x, %n : tensor<6xf64>, tensor<6xf64>
}"""
    a = np.array([-0.0, 0.0, np.nan, 1.0, np.nan, 3.0])
    b = np.array([0.0, -0.0, 1.0, np.nan, np.nan, -3.0])
    mx, mn = compile_func(text, object_cache)(a, b)
    check("max", mx, np.maximum(a, b))
    check("min", mn, np.minimum(a, b))


def test_integer_division_is_numpy_floor_division(object_cache: ObjectCache) -> None:
    text = """func.func @f(%a: tensor<8xi32>, %b: tensor<8xi32>) -> tensor<8xi32> {
  %d = prim.div %a, %b : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi32>
  func.return %d : tensor<8xi32>
}"""
    a = np.array([7, -7, 7, -7, 5, -2**31, -2**31, 0], np.int32)
    b = np.array([2, 2, -2, -2, 0, -1, 1, 0], np.int32)
    (got,) = compile_func(text, object_cache)(a, b)
    with np.errstate(all="ignore"):
        assert got.tolist() == (a // b).tolist()


def test_integer_add_mul_wrap(object_cache: ObjectCache) -> None:
    text = """func.func @f(%a: tensor<3xi64>, %b: tensor<3xi64>) -> (tensor<3xi64>, tensor<3xi64>) {
  %s = prim.add %a, %b : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  %m = prim.mul %a, %b : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  func.return %s, %m : tensor<3xi64>, tensor<3xi64>
}"""
    big = np.iinfo(np.int64).max
    a, b = np.array([big, -big - 1, 3 << 40], np.int64), np.array([1, -1, 5 << 30], np.int64)
    s, m = compile_func(text, object_cache)(a, b)
    with np.errstate(all="ignore"):
        assert s.tolist() == (a + b).tolist() and m.tolist() == (a * b).tolist()


def test_broadcasting_size1_and_rank(object_cache: ObjectCache) -> None:
    text = """func.func @f(%a: tensor<4x1x5xf32>, %b: tensor<3x1xf32>, %c: tensor<f32>) -> tensor<4x3x5xf32> {
  %s = prim.add %a, %b : (tensor<4x1x5xf32>, tensor<3x1xf32>) -> tensor<4x3x5xf32>
  %m = prim.mul %s, %c : (tensor<4x3x5xf32>, tensor<f32>) -> tensor<4x3x5xf32>
  func.return %m : tensor<4x3x5xf32>
}"""
    f = compile_func(text, object_cache)
    a, b, c = sample("f32", (4, 1, 5), 1), sample("f32", (3, 1), 2), np.array(2.5, np.float32)
    (got,) = f(a, b, c)
    check("broadcast", got, reference(f.module, a, b, c)[0])


@pytest.mark.parametrize("to", ["f32", "f64", "i32", "i64", "i1"])
@pytest.mark.parametrize("src", ["f32", "f64", "i32", "i64", "i1"])
def test_cast(src: str, to: str, object_cache: ObjectCache) -> None:
    text = f"""func.func @f(%a: tensor<9x{src}>) -> tensor<9x{to}> {{
  %r = prim.cast %a : tensor<9x{src}> -> tensor<9x{to}>
  func.return %r : tensor<9x{to}>
}}"""
    f = compile_func(text, object_cache)
    # float -> int is only specified in range and for non-NaN (numpy astype)
    vals = [0.0, -0.0, 1.0, -1.0, 2.75, -2.75, 100.0, 0.5, -7.0]
    a = np.array(vals).astype({"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64,
                               "i1": np.bool_}[src])
    (got,) = f(a)
    check(f"cast {src}->{to}", got, reference(f.module, a)[0])


@pytest.mark.parametrize("elem", ["f32", "f64", "i32", "i64"])
def test_floordiv_rem_and_int_pow_edges_bit_exact(elem: str, object_cache: ObjectCache) -> None:
    """The lowering of numpy's floor_divide / remainder (x // 0, MIN // -1, MIN % -1, signs,
    inf, NaN, -0.0) and of integer pow by a constant (square-and-multiply, wrapping), in one
    kernel with dynamic shapes (the form static kernels take); bit for bit against numpy."""
    npt = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}[elem]
    if elem[0] == "f":
        edges = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, -1.0, 5.0, -5.0, 0.1, 3.5, -7.25, 1e30, -1e-30],
                         npt)
    else:
        info = np.iinfo(npt)
        edges = np.array([info.min, info.min + 1, info.max, -7, -3, -1, 0, 1, 3, 7], npt)
    a, b = (v.reshape(-1) for v in np.meshgrid(edges, edges))
    T = _t((None,), elem)
    pow_line, outs, types = "", "%q, %r", f"{T}, {T}"
    if elem[0] == "i":  # a constant exponent up to 40: the kernel's pow, never a traced one
        E = _t((a.size,), elem)
        pow_line = (f"  %e = prim.constant dense<[{', '.join(str(i % 41) for i in range(a.size))}]> : {E}\n"
                    f"  %p = prim.pow %a, %e : ({T}, {E}) -> {T}\n")
        outs, types = "%q, %r, %p", f"{T}, {T}, {T}"
    text = (f"func.func @f(%a: {T}, %b: {T}) -> ({types}) {{\n"
            f"  %q = prim.floordiv %a, %b : ({T}, {T}) -> {T}\n  %r = prim.rem %a, %b : ({T}, {T}) -> {T}\n"
            f"{pow_line}  func.return {outs} : {types}\n}}")
    got = compile_func(text, object_cache, dynamic=True)(a, b, out_shapes=[a.shape] * len(outs.split(", ")))
    with np.errstate(all="ignore"):
        want = [np.floor_divide(a, b), np.remainder(a, b)]
    if elem[0] == "i":
        want.append(np.power(a, (np.arange(a.size) % 41).astype(npt)))
    for name, g, w in zip(("floordiv", "rem", "pow"), got, want):
        check(name, g, w)
