"""Reductions, shape ops, constants and (generated) matmul through the whole
path, against the numpy reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from fusebind.lowering import ObjectCache

from lowering_helpers import check, compile_func, reference, sample


def _t(shape: tuple[int | None, ...], elem: str) -> str:
    return "tensor<" + "".join(f"{'?' if d is None else d}x" for d in shape) + f"{elem}>"


def _reduced(shape: tuple, axes: list[int], keep: bool) -> tuple:
    return tuple((1 if keep else None) if i in axes else d for i, d in enumerate(shape) if keep or i not in axes)


REDUCTIONS = {"f32": ["reduce_sum", "reduce_max", "reduce_mean"], "f64": ["reduce_sum", "reduce_max", "reduce_mean"],
              "i32": ["reduce_sum", "reduce_max"], "i64": ["reduce_sum", "reduce_max"]}


def reductions_module(elem: str, shape: tuple[int | None, ...]) -> tuple[str, list[str]]:
    T = _t(shape, elem)
    rank = len(shape)
    cases = [([], False), (list(range(rank)), False), (list(range(rank)), True)]
    if rank >= 2:
        cases += [([rank - 1], False), ([0], True), ([0, rank - 1], False)]
    lines, rets, names = [], [], []
    for kind in REDUCTIONS[elem]:
        for j, (axes, keep) in enumerate(cases):
            if not axes and rank and kind != "reduce_sum":
                continue
            out = _t(_reduced(shape, axes, keep), elem)
            props = f"{{axes = [{', '.join(map(str, axes))}]{', keepdims' if keep else ''}}}"
            name = f"%{kind}{j}"
            lines.append(f"{name} = prim.{kind} %a {props} : {T} -> {out}")
            rets.append((name, out)); names.append(f"{kind}{axes}{'k' if keep else ''}")
    body = "\n  ".join(lines)
    types = ", ".join(t for _, t in rets)
    return (f"func.func @f(%a: {T}) -> ({types}) {{\n  {body}\n  func.return {', '.join(r for r, _ in rets)} : "
            f"{types}\n}}"), names


def _close(name: str, got: np.ndarray, want: np.ndarray, a: np.ndarray) -> None:
    """Sums: sequential vs numpy's pairwise order, so within the classic n*eps*max|a| bound; max exact."""
    if got.dtype.kind == "f" and ("sum" in name or "mean" in name):
        bound = np.finfo(a.dtype).eps * max(a.size, 1) * float(np.abs(a).max(initial=1.0))
        np.testing.assert_allclose(got, want, rtol=0, atol=bound, equal_nan=True, err_msg=name)
    else:
        check(name, got, want)


@pytest.mark.parametrize("elem", ["f32", "f64", "i32", "i64"])
@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (4, 1, 6), (33, 257)], ids=str)
def test_reductions_static(elem: str, shape: tuple[int, ...], object_cache: ObjectCache) -> None:
    text, names = reductions_module(elem, shape)
    f = compile_func(text, object_cache)
    a = sample(elem, shape, 11)
    if elem.startswith("f"):
        a = np.where(np.isfinite(a), a, 1.5).astype(a.dtype)
    for name, g, w in zip(names, f(a), reference(f.module, a)):
        _close(name, g, w, a)


def test_reductions_dynamic(object_cache: ObjectCache) -> None:
    text, names = reductions_module("f32", (None, None))
    f = compile_func(text, object_cache, dynamic=True)
    for shape in [(1, 1), (5, 3), (64, 129)]:
        a = sample("f32", shape, 3)
        a = np.where(np.isfinite(a), a, -2.0).astype(np.float32)
        want = reference(f.module, a)
        got = f(a, out_shapes=[w.shape for w in want])
        for name, g, w in zip(names, got, want):
            _close(f"{name}@{shape}", g, w, a)


def test_reduce_max_propagates_nan(object_cache: ObjectCache) -> None:
    text = """func.func @f(%a: tensor<3x4xf32>) -> tensor<3xf32> {
  %m = prim.reduce_max %a {axes = [1]} : tensor<3x4xf32> -> tensor<3xf32>
  func.return %m : tensor<3xf32>
}"""
    a = np.array([[1, np.nan, 3, 2], [np.nan, -np.inf, 0, 0], [-1, -2, -0.5, -9]], np.float32)
    (got,) = compile_func(text, object_cache)(a)
    check("reduce_max", got, np.max(a, axis=1))


def test_reduce_sum_over_size_zero_is_zero(object_cache: ObjectCache) -> None:
    text = """func.func @f(%a: tensor<0x3xf64>) -> tensor<3xf64> {
  %m = prim.reduce_sum %a {axes = [0]} : tensor<0x3xf64> -> tensor<3xf64>
  func.return %m : tensor<3xf64>
}"""
    (got,) = compile_func(text, object_cache)(np.zeros((0, 3)))
    assert got.tolist() == [0.0, 0.0, 0.0]


def test_shape_ops(object_cache: ObjectCache) -> None:
    text = """func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<4xf32>, %s: tensor<f32>) -> (tensor<4x2x3xf32>, tensor<6x4xf32>, tensor<24xf32>, tensor<3x4xf32>, tensor<1x1xf32>, tensor<f32>) {
  %t = prim.transpose %a {perm = [2, 0, 1]} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %r = prim.reshape %a : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %f = prim.reshape %t : tensor<4x2x3xf32> -> tensor<24xf32>
  %b2 = prim.broadcast_to %b : tensor<4xf32> -> tensor<3x4xf32>
  %s2 = prim.reshape %s : tensor<f32> -> tensor<1x1xf32>
  %s3 = prim.reshape %s2 : tensor<1x1xf32> -> tensor<f32>
  func.return %t, %r, %f, %b2, %s2, %s3 : tensor<4x2x3xf32>, tensor<6x4xf32>, tensor<24xf32>, tensor<3x4xf32>, tensor<1x1xf32>, tensor<f32>
}"""
    f = compile_func(text, object_cache)
    args = (sample("f32", (2, 3, 4), 1), sample("f32", (4,), 2), np.array(3.0, np.float32))
    for name, g, w in zip(["transpose", "reshape", "flatten", "broadcast", "0d->1x1", "1x1->0d"], f(*args),
                          reference(f.module, *args)):
        check(name, g, w)


def test_constants_all_dtypes(object_cache: ObjectCache) -> None:
    text = """func.func @f(%a: tensor<3xf32>) -> (tensor<3xf32>, tensor<2xi64>, tensor<2xi1>, tensor<f64>) {
  %c = prim.constant dense<[1.5, 1.0e+30, -0.0]> : tensor<3xf32>
  %s = prim.add %a, %c : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %i = prim.constant dense<[-9223372036854775808, 7]> : tensor<2xi64>
  %b = prim.constant dense<[true, false]> : tensor<2xi1>
  %d = prim.constant dense<2.5> : tensor<f64>
  func.return %s, %i, %b, %d : tensor<3xf32>, tensor<2xi64>, tensor<2xi1>, tensor<f64>
}"""
    f = compile_func(text, object_cache)
    a = np.array([1.0, -0.0, 3.0], np.float32)
    for name, g, w in zip(["add-const", "i64", "i1", "f64"], f(a), reference(f.module, a)):
        check(name, g, w)


def test_generated_matmul_is_correct(object_cache: ObjectCache) -> None:
    text = """func.func @f(%a: tensor<5x7xf64>, %b: tensor<7x3xf64>, %c: tensor<3xf64>) -> tensor<5x3xf64> {
  %m = prim.matmul %a, %b : (tensor<5x7xf64>, tensor<7x3xf64>) -> tensor<5x3xf64>
  %s = prim.add %m, %c : (tensor<5x3xf64>, tensor<3xf64>) -> tensor<5x3xf64>
  %r = prim.relu %s : tensor<5x3xf64> -> tensor<5x3xf64>
  func.return %r : tensor<5x3xf64>
}"""
    f = compile_func(text, object_cache)
    args = (sample("f64", (5, 7), 1), sample("f64", (7, 3), 2), sample("f64", (3,), 3))
    args = tuple(np.nan_to_num(x, posinf=2.0, neginf=-2.0) for x in args)
    (got,) = f(*args)
    np.testing.assert_allclose(got, reference(f.module, *args)[0], rtol=1e-12)
