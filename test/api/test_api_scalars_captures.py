"""The call boundary of @fb.jit against eager numpy: Python scalar arguments
(weak, NEP 50), captured arrays (read at every call), `fb.constant`, and the
clear errors for what a jitted function cannot take or return (issue 11)."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb

F32 = np.array([1.5, -2.0, 3.0, 0.25], np.float32)
I32 = np.array([1, -2, 3, 7], np.int32)
BOOL = np.array([True, False, True, False])


def _jit(fn, cache):
    return fb.jit(fn, cache=cache)


# ---------------------------------------------------------------- Python scalar arguments (item 2)
@pytest.mark.parametrize("arr", [F32, I32, BOOL], ids=["float32", "int32", "bool"])
@pytest.mark.parametrize("s", [2, 0.5, True], ids=["int", "float", "bool"])
def test_scalar_argument_promotes_as_numpy(arr, s, object_cache) -> None:
    f = _jit(lambda x, s: x * s, object_cache)
    g = _jit(lambda x, s: s + x, object_cache)
    for fn, ref in ((f, arr * s), (g, s + arr)):
        out = fn(arr, s)
        assert out.dtype == ref.dtype, (arr.dtype, s)
        np.testing.assert_array_equal(out, ref)


def test_scalar_value_is_not_in_the_trace_key_but_its_type_is(object_cache) -> None:
    f = _jit(lambda x, s: fb.exp(x) * s + 1, object_cache)
    for s in (2.0, 3.0, -0.5, 7.25):
        out = f(F32, s)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, np.exp(F32) * s + 1, rtol=1e-6)
    assert f.stats.traces == 1
    assert f._fast is not None  # later values ran on the fast path, as 0-d arguments
    h = _jit(lambda x, s: x * s, object_cache)
    assert h(I32, 2).dtype == np.int32 and h(I32, 3).dtype == np.int32
    assert h.stats.traces == 1
    assert h(I32, 2.0).dtype == np.float64  # a new Python type: a new trace
    assert h(I32, True).dtype == np.int32
    assert h.stats.traces == 3
    np.testing.assert_array_equal(h(I32, 2.5), I32 * 2.5)


def test_int_argument_out_of_range_raises_overflow_as_numpy(object_cache) -> None:
    with pytest.raises(OverflowError) as np_info:
        np.ones(3, np.int32) * 2**40
    f = _jit(lambda x, s: fb.exp(x.astype(np.float32)) * (x * s), object_cache)
    np.testing.assert_allclose(f(I32, 2), np.exp(I32.astype(np.float32)) * (I32 * 2), rtol=1e-6)
    f(I32, 2)  # the fast path
    with pytest.raises(fb.FusebindOverflowError) as info:
        f(I32, 2**40)
    assert isinstance(info.value, OverflowError)
    assert str(np_info.value) == "Python integer 1099511627776 out of bounds for int32"
    assert str(info.value) == (f"fusebind: in '<lambda>': {np_info.value} (the value of s, converted to the "
                               "int32 of the array it meets, as numpy does)")
    np.testing.assert_allclose(f(I32, -2**31), np.exp(I32.astype(np.float32)) * (I32 * -2**31), rtol=1e-6)
    out = f(F32, 2**40)  # the int32 trace's check does not apply to float32 arrays (numpy converts to float32)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.exp(F32) * (F32 * 2**40), rtol=1e-6)
    with pytest.raises(OverflowError, match="out of bounds for int32"):
        f(I32, 2**31)  # after the float32 trace ran on the fast path

    g = _jit(lambda x, s: x * (s * 1024), object_cache)  # Python arithmetic first, then numpy's conversion
    np.testing.assert_array_equal(g(I32, 3), I32 * 3072)
    with pytest.raises(OverflowError, match=r"Python integer 1099511627776 out of bounds for int32 \(the value "
                                            r"of \(s \* 1024\)"):
        g(I32, 2**30)
    with pytest.raises(fb.FusebindOverflowError, match="Python integer 9223372036854775808 out of bounds for "
                                                       "int64"):
        g(F32, 2**63)


def test_int_comparisons_are_exact_as_numpy(object_cache) -> None:
    f = _jit(lambda x, s: (x < s, x == 2**40, x > -2**40), object_cache)
    a, b, c = f(I32, 2**40)
    np.testing.assert_array_equal(a, I32 < 2**40)
    np.testing.assert_array_equal(b, I32 == 2**40)
    np.testing.assert_array_equal(c, I32 > -2**40)
    assert a.all() and not b.any() and c.all()


def test_python_arithmetic_on_scalar_arguments_follows_python(object_cache) -> None:
    f = _jit(lambda x, s, t: x * (s / t), object_cache)
    out = f(F32, 1, 4)
    assert out.dtype == np.float32  # 1 / 4 is a Python float: weak
    np.testing.assert_array_equal(out, F32 * 0.25)
    with pytest.raises(ZeroDivisionError):
        f(F32, 1, 0)  # as eager Python raises
    g = _jit(lambda x, s, t: x + (s + t), object_cache)
    out = g(BOOL, True, True)  # True + True is the Python int 2
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, BOOL + (True + True))
    h = _jit(lambda x, s, t: x * s ** t, object_cache)
    np.testing.assert_array_equal(h(I32, 2, 3), I32 * 8)
    with pytest.raises(fb.UnsupportedOperation) as info:
        h(I32, 2, -1)  # 2 ** -1 is a float: the type depends on the values
    assert str(info.value) == (
        "fusebind: in '<lambda>': the Python scalar expression (s ** t) is a float for these arguments, but it "
        "was traced as a int; its type depends on the values, which a trace cannot follow: convert it "
        "explicitly (float(...)) in the function")


def test_bool_arrays_with_python_scalars(object_cache) -> None:
    f = _jit(lambda x, a, b, c: (x + a, x * b, x + c), object_cache)
    r = f(BOOL, 1, 1.5, True)
    refs = (BOOL + 1, BOOL * 1.5, BOOL + True)
    assert [o.dtype for o in r] == [np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.bool_)]
    for o, ref in zip(r, refs):
        np.testing.assert_array_equal(o, ref)


# ---------------------------------------------------------------- captured arrays (item 3)
def test_captured_mutation_is_seen_on_the_fast_path(object_cache) -> None:
    W = np.ones(4, np.float32)
    f = _jit(lambda x: fb.exp(x) * W + 1, object_cache)
    np.testing.assert_allclose(f(F32), np.exp(F32) + 1, rtol=1e-6)
    f(F32)
    assert f._fast is not None
    W[:] = 2
    np.testing.assert_allclose(f(F32), np.exp(F32) * 2 + 1, rtol=1e-6)
    W[1] = -3
    np.testing.assert_allclose(f(F32), np.exp(F32) * W + 1, rtol=1e-6)
    out = np.empty(4, np.float32)
    assert f(F32, out=out) is out
    np.testing.assert_allclose(out, np.exp(F32) * W + 1, rtol=1e-6)
    assert f.stats.traces == 1


def test_captured_mutation_is_seen_on_the_slow_path(object_cache) -> None:
    W = np.ones(4, np.float32)
    f = _jit(lambda x: x * W, object_cache)
    np.testing.assert_array_equal(f(F32), F32)
    W[:] = 3
    np.testing.assert_array_equal(f(F32), F32 * 3)
    assert f._fast is None and f.stats.traces == 1


_GLOBAL_W = np.ones(4, np.float32)


def test_rebinding_a_captured_name_is_seen(object_cache) -> None:
    global _GLOBAL_W
    f = _jit(lambda x: fb.exp(x) * _GLOBAL_W + 1, object_cache)
    f(F32)
    f(F32)
    _GLOBAL_W = _GLOBAL_W * 5  # a new array under the same global name
    np.testing.assert_allclose(f(F32), np.exp(F32) * 5 + 1, rtol=1e-6)
    V = np.ones(4, np.float32)

    def g(x):
        return x * V

    jg = _jit(g, object_cache)
    jg(F32)
    V = np.full(4, 7, np.float32)  # noqa: F841 (read through g's closure cell)
    np.testing.assert_array_equal(jg(F32), F32 * 7)
    _GLOBAL_W = np.ones(4, np.float32)


def test_captured_shape_or_dtype_change_retraces(object_cache) -> None:
    W = np.ones(4, np.float32)
    f = _jit(lambda x: x * W, object_cache)
    f(F32)
    W = np.full(1, 2, np.float32)
    np.testing.assert_array_equal(f(F32), F32 * 2)
    assert f.stats.traces == 2
    W = np.full(4, 3.0)
    out = f(F32)
    assert out.dtype == np.float64 and f.stats.traces == 3
    np.testing.assert_array_equal(out, F32 * W)
    W = np.full(1, 4, np.float32)  # back to a traced signature: no new trace
    np.testing.assert_array_equal(f(F32), F32 * 4)
    assert f.stats.traces == 3


def test_constant_is_baked_in(object_cache) -> None:
    W = np.ones(4, np.float32)
    Wc = fb.constant(W)
    f = _jit(lambda x: x * Wc, object_cache)
    np.testing.assert_array_equal(f(F32), F32)
    W[:] = 9  # the constant is a copy taken by fb.constant
    np.testing.assert_array_equal(f(F32), F32)
    text = f.mlir(F32)
    assert "prim.constant" in text and "(%x: tensor<4xf32>) ->" in text  # no hidden argument
    with pytest.raises(ValueError, match="read-only"):
        Wc[0] = 2
    assert type(Wc * 2) is np.ndarray and isinstance(Wc[1:], fb.ConstantArray)


def test_where_with_a_captured_array_promotes_as_numpy(object_cache) -> None:
    W = np.array([4, 5, 6, 7], np.float32)
    f = _jit(lambda x: fb.where(x > 0, W, 0), object_cache)
    out, ref = f(F32), np.where(F32 > 0, W, 0)
    assert out.dtype == ref.dtype == np.float32
    np.testing.assert_array_equal(out, ref)


def test_one_hidden_argument_per_captured_array(object_cache) -> None:
    W = np.array([4, 5, 6, 7], np.float32)
    f = _jit(lambda x: fb.exp(x) * W + W, object_cache)
    assert '(%x: tensor<4xf32>, %W: tensor<4xf32>) ->' in f.mlir(F32)
    np.testing.assert_allclose(f(F32), np.exp(F32) * W + W, rtol=1e-6)
    np.testing.assert_allclose(f(W), np.exp(W) * W + W, rtol=1e-6)  # captured and passed explicitly
    with pytest.raises(fb.ArgumentError, match=r"out of '<lambda>' overlaps argument 'W \(captured\)' \(#1\)"):
        f(F32, out=W)


def test_captured_non_contiguous_view_and_numpy_scalar(object_cache) -> None:
    M = np.ones((4, 2), np.float32)
    V = M[:, 1]
    f = _jit(lambda x: fb.exp(x) * V + np.float64(1), object_cache)
    out = f(F32)
    assert out.dtype == np.float64  # a numpy scalar is strong
    M[:, 1] = 3
    np.testing.assert_allclose(f(F32), np.exp(F32) * V + np.float64(1), rtol=1e-6)


# ---------------------------------------------------------------- the call boundary's errors
def test_returning_none_says_what_to_return(object_cache) -> None:
    # (returning pytrees, keyword arguments, static arguments and nested jit: test_calls.py)
    def forgot(x):
        x + 1

    with pytest.raises(fb.UnsupportedOperation) as info:
        _jit(forgot, object_cache)(F32)
    assert str(info.value) == ("fusebind: 'forgot' returned None; a jitted function must return an array or a "
                               "tuple of arrays (is a `return` missing?)")


def test_a_str_argument_says_to_mark_it_static(object_cache) -> None:
    f = _jit(lambda x, y: x + y, object_cache)
    with pytest.raises(fb.UnsupportedOperation) as info:
        f(F32, "fast")
    assert str(info.value) == ("fusebind: argument 'y' (#1) of '<lambda>' is a str; a jitted function takes arrays, "
                               "Python scalars and pytrees of them (tuples, lists, dicts, namedtuples, dataclasses, "
                               "None). Mark a Python value static, e.g. fb.jit(f, static_argnames=('y',)), or bind "
                               "it outside (functools.partial(f, y=...) or a closure)")


_TWO = """
func.func @a(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = prim.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @b(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = prim.mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
"""


def test_compile_entry_errors_name_the_functions() -> None:
    with pytest.raises(fb.EntryError) as info:
        fb.compile(_TWO)
    assert isinstance(info.value, KeyError) and isinstance(info.value, fb.FusebindError)
    assert str(info.value) == ("fusebind.compile: the module defines 2 functions (@a, @b) and none is @main, so "
                               "entry= must choose one: pass entry='a', for example")
    with pytest.raises(KeyError) as info:
        fb.compile(_TWO, entry="mlp")
    assert str(info.value) == ("fusebind.compile: entry='mlp': the module has no function @mlp; it defines @a, @b "
                               "(pass entry='a' or entry='b')")
    with pytest.raises(fb.ArgumentError) as info:
        fb.compile(_TWO, entry=1)
    assert str(info.value) == ("fusebind.compile: entry must be the name of a function (a str), got int 1; the "
                               "module defines @a, @b")
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(fb.compile(_TWO, entry="@b")(x), x * x)
