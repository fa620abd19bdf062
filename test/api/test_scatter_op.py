"""prim.scatter against numpy's `.at` (values, dtype, shape) on every arm: the reference interpreter,
arm 0 (the executor running the op's reference) and the fused arm (the compiled loop): every mode,
repeated and negative indices, the five element types, a wider loop type (numpy's per-step cast
back: integer wrap-around, float rounding), NaN in min / max, broadcast indices and values, and an
out-of-range index (fb.IndexOutOfBounds with numpy's message). One kernel per element type: the
five modes run chained in one region (a scatter feeding a scatter is one kernel)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import fusebind as fb
from fusebind.dialect import interpret, parse_module
from fusebind.dialect.errors import IndexOutOfBounds

LONG = os.environ.get("FUSEBIND_LONG", "").strip() in ("1", "true", "yes", "on")
#: f64 and i32 chains under FUSEBIND_LONG=1 (each is one more compile; the wider-loop cases compile both)
long_only = pytest.mark.skipif(not LONG, reason="long run: FUSEBIND_LONG=1")

NAMES = {np.float32: "f32", np.float64: "f64", np.int32: "i32", np.int64: "i64", np.bool_: "i1"}
UFUNC = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}
# positions along axis 0 of a 6x4 array: repeated (0 and -1 = 5 several times) and negative
IDX = np.array([[0, 5, -6, 2], [-1, 5, 0, 2], [0, 0, 3, -1], [5, -1, 4, 2], [0, 3, 3, 3]], np.int64)
IDX2 = np.array([[1], [1], [-2], [1], [0]], np.int32)  # broadcast along dim 1, i32
CHAIN = [("set", "i", "a"), ("add", "i", "b"), ("mul", "j", "c"), ("min", "i", "d"), ("max", "j", "e")]


def chain_text(t: str, v: str = "") -> str:
    """x (6x4, t) through set, add, mul, min, max scatters along axis 0 (values of element type
    v, default t; set's always t)."""
    v = v or t
    lines, cur = [], "%x"
    for k, (mode, idx, val) in enumerate(CHAIN):
        it = "tensor<5x4xi64>" if idx == "i" else "tensor<5x1xi32>"
        vt = f"tensor<5x4x{t if mode == 'set' else v}>"
        lines.append(f"  %r{k} = prim.scatter {cur}, %{idx}, %{val} {{mode = \"{mode}\", axis = 0}} : "
                     f"(tensor<6x4x{t}>, {it}, {vt}) -> tensor<6x4x{t}>")
        cur = f"%r{k}"
    vts = ", ".join(f"%{n}: tensor<5x4x{t if n == 'a' else v}>" for n in "abcde")
    return (f"func.func @f(%x: tensor<6x4x{t}>, %i: tensor<5x4xi64>, %j: tensor<5x1xi32>, {vts}) -> tensor<6x4x{t}> {{\n"
            + "\n".join(lines) + f"\n  func.return {cur} : tensor<6x4x{t}>\n}}\n")


def numpy_chain(x: np.ndarray, vals: list[np.ndarray]) -> np.ndarray:
    y = x.copy()
    cols = np.arange(4)
    for (mode, idx, _), v in zip(CHAIN, vals):
        rows = np.broadcast_to(IDX if idx == "i" else IDX2, (5, 4))
        if mode == "set":
            y[rows, cols] = v
        else:
            UFUNC[mode].at(y, (rows, cols), v)
    return y


def inputs(dtype: type, vdtype: type | None = None, seed: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    vdtype = vdtype or dtype
    if dtype is np.bool_:
        return rng.random((6, 4)) > 0.5, [rng.random((5, 4)) > 0.5 for _ in CHAIN]
    x = (rng.standard_normal((6, 4)) * 4).astype(dtype)
    vals = [(rng.standard_normal((5, 4)) * 3).astype(dtype if k == 0 else vdtype) for k in range(len(CHAIN))]
    return x, vals


def same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape)
    np.testing.assert_array_equal(got, want, err_msg=what)


def on_every_arm(text: str, args: list[np.ndarray], want: np.ndarray) -> fb.compile:
    same(interpret(parse_module(text), *args), want, "interpreter")
    same(fb.compile(text, optimize=False)(*args), want, "arm 0")
    fused = fb.compile(text)
    same(fused(*args), want, "fused")
    assert fused.stats.arms.fused_calls == 1 and fused.stats.arms.arm0_calls == 0, fused.explain(*args)
    return fused


@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float64, marks=long_only),
                                   pytest.param(np.int32, marks=long_only), np.int64, np.bool_],
                         ids=["f32", "f64", "i32", "i64", "bool"])
def test_every_mode_matches_numpy_on_every_arm(dtype):
    x, vals = inputs(dtype)
    if dtype in (np.int32, np.int64):
        vals[2] = vals[2] % 3 + 1  # small factors: mul's products stay readable (they wrap all the same)
        vals[1][[0, 1], 1] = np.iinfo(dtype).max // 2 + 7  # both add into x[5, 1]: the sum wraps around
        # (to near the minimum, which min keeps and max, never reaching row 5, leaves)
    args = [x, IDX, IDX2, *vals]
    fused = on_every_arm(chain_text(NAMES[dtype]), args, numpy_chain(x, vals))
    x2, vals2 = inputs(dtype, seed=1)  # the compiled kernel again, other values
    same(fused(x2, IDX, IDX2, *vals2), numpy_chain(x2, vals2), "fused, second call")


@pytest.mark.parametrize("dtype,vdtype", [(np.int32, np.int64), (np.float32, np.float64)], ids=["i32<-i64", "f32<-f64"])
def test_a_wider_loop_type_casts_back_every_step(dtype, vdtype):
    """numpy's ufunc.at with values of a wider type computes in that type and casts back to x's
    after each update: an int32 max of 2**40 stores 0 (so a later 3 wins), float32 sums round per
    step; min / max propagate NaN."""
    x, vals = inputs(dtype, vdtype)
    if dtype is np.int32:
        vals[4][0, 0] = 2 ** 40  # max: 2**40 wraps to 0 in int32
        vals[2] = vals[2] % 3 + 1
    else:
        vals[1] = vals[1] * np.float64(1 + 1e-9)  # rounds differently in f64 then f32 than in f32
        vals[3][1, 2], vals[4][2, 0] = np.nan, np.nan
    on_every_arm(chain_text(NAMES[dtype], NAMES[vdtype]), [x, IDX, IDX2, *vals], numpy_chain(x, vals))


ONE = """func.func @f(%x: tensor<6xf32>, %i: tensor<4xi64>, %v: tensor<4xf32>) -> tensor<6xf32> {
  %y = prim.neg %x : tensor<6xf32> -> tensor<6xf32>
  %r = prim.scatter %y, %i, %v {mode = "add", axis = 0} : (tensor<6xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<6xf32>
  func.return %r : tensor<6xf32>
}
"""


def test_out_of_range_index_raises_numpy_s_error_on_every_arm():
    x, v = np.arange(6, dtype=np.float32), np.ones(4, np.float32)
    with pytest.raises(IndexError) as numpy_error:
        np.add.at(-x, np.array([1, 9, -7, 0]), v)
    bad = np.array([1, 9, -7, 0])
    with pytest.raises(IndexOutOfBounds) as got:
        interpret(parse_module(ONE), x, bad, v)
    assert str(got.value) == str(numpy_error.value) == "index 9 is out of bounds for axis 0 with size 6"
    with pytest.raises(IndexOutOfBounds) as got:
        fb.compile(ONE, optimize=False)(x, bad, v)
    assert str(got.value) == str(numpy_error.value)
    f = fb.compile(ONE)  # the kernel checks (error channel), or the region runs arm 0: raises either way
    with pytest.raises(IndexOutOfBounds, match="index 9 is out of bounds for axis 0 with size 6"):
        f(x, bad, v)
    with pytest.raises(IndexOutOfBounds, match="index -7 is out of bounds for axis 0 with size 6"):
        f(x, np.array([1, -7, 9, 0]), v)
    want = -x
    np.add.at(want, np.array([1, -6, 5, 1]), v)
    same(f(x, np.array([1, -6, 5, 1]), v), want, "after the error, in range")


def test_broadcast_values_along_axis_1():
    """Axis 1, indices broadcast over dim 0, one value for every update (0-d)."""
    text = """func.func @f(%x: tensor<3x5xi64>, %i: tensor<1x4xi64>) -> tensor<3x5xi64> {
  %c = prim.constant dense<7> : tensor<i64>
  %y = prim.mul %x, %c : (tensor<3x5xi64>, tensor<i64>) -> tensor<3x5xi64>
  %r = prim.scatter %y, %i, %c {mode = "add", axis = 1} : (tensor<3x5xi64>, tensor<1x4xi64>, tensor<i64>) -> tensor<3x5xi64>
  func.return %r : tensor<3x5xi64>
}
"""
    x, i = np.arange(15, dtype=np.int64).reshape(3, 5), np.array([[4, -1, 0, 2]])
    want = x * 7
    np.add.at(want, (np.arange(3)[:, None], np.broadcast_to(i, (3, 4))), 7)
    on_every_arm(text, [x, i], want)


def test_a_kernel_checked_scatter_names_only_the_argument_its_indices_come_from() -> None:
    """The index check's sources are the op's INDEX_OPERANDS (the indices), not its values too:
    this said "from arguments 'b', 'w'"."""
    f = fb.jit(lambda b, w: fb.at(np.zeros(8, np.float32))[b + 1].add(w * 2.0))
    b, w = np.array([0, 6, 2]), np.ones(3, np.float32)
    want = np.zeros(8, np.float32)
    np.add.at(want, b + 1, w * 2.0)
    np.testing.assert_array_equal(f(b, w), want)
    with pytest.raises(fb.IndexOutOfBounds) as info:
        f(np.array([0, 7, 2]), w)
    assert "index 8 is out of bounds for axis 0 with size 8" in str(info.value)
    assert "from argument 'b';" in str(info.value), str(info.value)
