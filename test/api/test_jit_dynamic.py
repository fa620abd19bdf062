"""fb.jit's shape polymorphism (docs/DYNAMIC-SHAPES.md): dynamic=True, the automatic default,
sizes 0 and 1 staying static, programs whose ops depend on a size, the table's static and
dynamic rows, explain, and compile counts. Every case shares one (?, 64) float32 program so
the suite compiles few kernels."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from fusebind.dialect.fused import RegionOp
from fusebind.runtime.bindings import global_bindings
from fusebind.runtime.resolve import row_is_dynamic

W = np.linspace(0.5, 1.5, 64, dtype=np.float32)


def body(x, w):
    y = x * w
    return np.tanh(y) / ((y * y).sum(axis=1, keepdims=True) + 1.0)


def rows(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + n).standard_normal((n, 64)).astype(np.float32)


def check(f, *args) -> None:
    got, want = f(*args), body(*args)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)


def kernels(f) -> int:
    """Kernels compiled or loaded from the object cache (both are a compile the call paid for once)."""
    st = f.stats
    return st.compiles + st.object_cache_hits


def test_dynamic_true_serves_twenty_batch_sizes_with_one_kernel() -> None:
    f = fb.jit(body, dynamic=True)
    for n in range(2, 22):
        check(f, rows(n), W)
    assert kernels(f) == 1  # the one fused region, compiled once for every size
    assert f.stats.fused_calls == 20 and f.stats.arm0_calls == 0
    text = f.explain(rows(30), W)
    assert "shapes: dynamic trace x: float32[?,?], w: float32[?]" in text
    assert "[dynamic kernel for any shape]" in text


def test_automatic_dim_turns_dynamic_on_its_second_size_and_keeps_the_static_row() -> None:
    f = fb.jit(body)
    check(f, rows(8), W)
    assert kernels(f) == 1  # the first size: a static kernel
    check(f, rows(9), W)  # a second size of dim 0: traced as ?x64 and compiled once
    assert kernels(f) == 2
    for n in (10, 17, 33, 9):
        check(f, rows(n), W)
    assert kernels(f) == 2
    # the table holds both rows under the static kernel's key; each call gets the right one
    ex = f.executor(rows(8), W)
    d8 = ex.plan_for([rows(8), W]).decisions[0]
    assert d8.arm == "fused" and d8.kernel.of == 2 and not row_is_dynamic(d8.kernel.row)
    bound = global_bindings().lookup(d8.kernel.key, d8.kernel.dtypes, "cpu")
    assert sorted(row_is_dynamic(r) for r in bound) == [False, True]
    assert any("shape=8x64,64,8x64" in r.caps for r in bound)
    assert any("shape=?x64,64,?x64" in r.caps for r in bound)
    d12 = ex.plan_for([rows(12), W]).decisions[0]
    assert d12.arm == "fused" and row_is_dynamic(d12.kernel.row)
    text8, text12 = f.explain(rows(8), W), f.explain(rows(12), W)
    assert "[static kernel for 8x64,64,8x64]" in text8 and "row 1 not used" in text8
    assert "[dynamic kernel for ?x64,64,?x64]" in text8  # named as the row that lost
    assert "shapes: dynamic trace x: float32[?,64], w: float32[64]" in text12
    assert "-- the only row that fits [dynamic kernel for ?x64,64,?x64]" in text12


def test_sizes_zero_and_one_stay_static_and_match_numpy() -> None:
    f = fb.jit(body)
    for n in (4, 5, 1, 0, 6, 1):
        check(f, rows(n), W)
    ex1, ex5 = f.executor(rows(1), W), f.executor(rows(5), W)
    assert ex5.dynamic and not ex1.dynamic and f.executor(rows(0), W) is not ex5


def test_broadcasting_a_dim_that_is_one_then_n() -> None:
    def add(x, y):
        return x * 2.0 + y

    f = fb.jit(add)
    x = rows(6)
    for y in (rows(1), rows(6, 1), rows(1, 2), rows(6, 3)):  # y broadcasts on the 1-row calls
        got = f(x, y)
        assert got.shape == (6, 64)
        np.testing.assert_array_equal(got, x * np.float32(2.0) + y)
    for n in (7, 8):  # then x and y grow together, and y of one row again
        for y in (rows(n, 4), rows(1, 5)):
            np.testing.assert_array_equal(f(rows(n), y), rows(n) * np.float32(2.0) + y)


def test_a_reshape_to_a_constant_pins_its_size() -> None:
    def flat(x):
        return x.reshape(-1) * 3.0  # the target, n * 64, is a constant of each trace

    f = fb.jit(flat)
    for n in (3, 4, 5):
        got = f(rows(n))
        assert got.shape == (n * 64,)
        np.testing.assert_array_equal(got, rows(n).reshape(-1) * np.float32(3.0))
    assert not any(ex.dynamic for ex in f._executors.values())


def test_a_size_in_a_python_computation_or_branch_is_never_a_wrong_answer() -> None:
    def scaled(x):
        return x * (1.0 / x.shape[0])  # a constant that depends on the size

    def branch(x):
        return x * 2.0 if x.shape[0] > 10 else x * 3.0  # the same graph for 4 and 5, not for 20

    for fn in (scaled, branch):
        for dynamic in (None, True):
            f = fb.jit(fn, dynamic=dynamic)
            for n in (4, 5, 20, 12):
                np.testing.assert_allclose(f(rows(n)), fn(rows(n)), rtol=1e-6)


def test_dynamic_true_keeps_a_pinned_argument_static_and_the_others_dynamic() -> None:
    def two(x, v):
        return x * 2.0, v.reshape(-1) + 1.0

    f = fb.jit(two, dynamic=True)
    for n, m in ((5, 3), (6, 3), (7, 3), (7, 4)):
        a, b = rows(n), rows(m, 9)[:, :8].copy()
        got = f(a, b)
        np.testing.assert_array_equal(got[0], a * np.float32(2.0))
        np.testing.assert_array_equal(got[1], b.reshape(-1) + np.float32(1.0))
    ex = f.executor(rows(5), rows(3, 9)[:, :8].copy())
    assert ex.dynamic and "x: float32[?,?], v: float32[3,8]" in f.explain(rows(5), rows(3, 9)[:, :8].copy())


def test_dynamic_false_traces_every_shape_and_bad_values_are_refused() -> None:
    f = fb.jit(lambda x: x * 2.0, dynamic=False)
    for n in (3, 4):
        np.testing.assert_array_equal(f(rows(n)), rows(n) * np.float32(2.0))
    assert f.stats.traces == 2 and not any(ex.dynamic for ex in f._executors.values())
    with pytest.raises(fb.FusebindValueError, match=r"dynamic must be None \(automatic\), True or False, got 'yes'"):
        fb.jit(lambda x: x, dynamic="yes")


def test_a_dynamic_trace_runs_the_region_as_dynamic_types() -> None:
    f = fb.jit(body, dynamic=True)
    check(f, rows(3), W)
    ex = f.executor(rows(3), W)
    general = ex.optimized_func(None, None)
    (region,) = [op for op in general.walk() if isinstance(op, RegionOp)]
    assert str(region.operands[0].type) == "tensor<?x?xf32>"


def test_a_catalog_region_keeps_its_one_kernel_for_every_size() -> None:
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    f = fb.jit(softmax)
    for n in (8, 9, 10, 8, 2):
        np.testing.assert_allclose(f(rows(n)), softmax(rows(n)), rtol=1e-5, atol=1e-7)
    assert kernels(f) == 1 and f.stats.arm0_calls == 0  # the catalog kernel serves every shape
    assert "[dynamic kernel for any shape]" in f.explain(rows(8)) and f.executor(rows(8)).dynamic


def test_means_and_variances_divide_by_the_call_s_sizes() -> None:
    def centred(x):
        d = x - x.mean(axis=-1, keepdims=True)
        return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5) + x.mean()

    f = fb.jit(centred, dynamic=True)
    for shape in ((3, 64), (5, 64), (5, 17), (9, 33)):
        x = np.random.default_rng(shape[0]).standard_normal(shape).astype(np.float32)
        got = f(x)
        assert got.shape == shape and got.dtype == np.float32
        np.testing.assert_allclose(got, centred(x), rtol=2e-5, atol=2e-5)
    assert kernels(f) <= 2 and any(ex.dynamic for ex in f._executors.values())


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.bool_])
def test_other_dtypes_under_dynamic_dims_keep_numpy_s_dtype(dtype) -> None:
    def mix(x, y):
        return (x | y) if dtype is np.bool_ else (x + y) * 3 - x

    f = fb.jit(mix)
    for n in (3, 4, 7):
        x, y = ((rows(n, s) * 4).astype(dtype) for s in (1, 2))
        got, want = f(x, y), mix(x, y)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert f.executor(*((rows(7) * 4).astype(dtype),) * 2).dynamic


def test_verify_mode_checks_the_dynamic_kernel_at_every_size() -> None:
    f = fb.jit(body, dynamic=True, verify=True)
    for n in (3, 4, 6):
        check(f, rows(n), W)  # verify raises FusedArmMismatch if the fused arm disagrees with arm 0
    assert f.stats.fused_calls == 3 and kernels(f) == 1
