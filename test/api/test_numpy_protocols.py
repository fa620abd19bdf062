"""numpy's protocols on traced values (issue 11, items 1 and 5): numpy functions
give numpy's answer or a clear fb error, never a silent wrong one.

Each test here is a bug a user hit (numpy wrapped the tracer in a 0-d
object array and computed something else), a numpy mismatch (an empty max,
a repeated axis, exp of bool), or a misleading message. Values run through
fb.jit and are compared with numpy eagerly: values, dtype and shape.
"""

from __future__ import annotations

import operator

import numpy as np
import pytest

import fusebind as fb

RNG = np.random.default_rng(11)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((4, 5)).astype(np.float32)
V = RNG.standard_normal(4).astype(np.float32)


def same(got: object, want: object, rtol: float = 2e-6) -> None:
    g, w = np.asarray(got), np.asarray(want)
    assert (g.dtype, g.shape) == (w.dtype, w.shape)
    np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6)


# ---------------------------------------------------------------- item 1: the silent wrong answers
def test_dot_of_matrices_is_a_matrix_product() -> None:
    same(fb.jit(np.dot)(A, B), np.dot(A, B))  # was A * B, broadcast


def test_dot_of_vectors_is_0d() -> None:
    got = fb.jit(np.dot)(V, V)
    assert got.shape == () and got.dtype == np.float32  # was shape (4,)
    same(got, np.dot(V, V))


@pytest.mark.parametrize("a, b", [(A, A), (V, V), (A, V)])
def test_inner_sums_over_both_last_axes(a: np.ndarray, b: np.ndarray) -> None:
    same(fb.jit(np.inner)(a, b), np.inner(a, b))


@pytest.mark.parametrize("a, b", [(A, B), (V, A), (A > 0, B > 0)])
def test_kron_interleaves_the_axes(a: np.ndarray, b: np.ndarray) -> None:
    same(fb.jit(np.kron)(a, b), np.kron(a, b))


def test_nan_to_num_replaces_nan_and_infinities() -> None:
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 1.5], np.float32)
    same(fb.jit(np.nan_to_num)(x), np.nan_to_num(x))  # was x unchanged
    f = fb.jit(lambda x: np.nan_to_num(x, nan=-1.0, posinf=7.0))
    same(f(x), np.nan_to_num(x, nan=-1.0, posinf=7.0))


def test_take_without_axis_indexes_the_flattened_array() -> None:
    got = fb.jit(lambda a: np.take(a, 0))(A)
    assert got.shape == () and got == A.flat[0]  # was the whole array
    same(fb.jit(lambda a: np.take(a, [5, -1]))(A), np.take(A, [5, -1]))


def test_argsort_is_refused_naming_it() -> None:
    def f(a):
        return np.argsort(a)

    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.jit(f)(V)  # returned [0]
    assert str(info.value) == ("fusebind: in 'f': numpy.argsort is not supported on traced arrays; fusebind has no "
                               "sort op; sort outside the jitted function")


def test_an_unmapped_ufunc_is_refused_naming_it() -> None:
    def f(a):
        return np.nextafter(a, a)

    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.jit(f)(V)
    assert str(info.value) == ("fusebind: in 'f': numpy.nextafter is not supported by fusebind on traced arrays; "
                               "compute it outside the jitted function")


def test_ufunc_methods_and_keywords() -> None:
    same(fb.jit(np.add.reduce)(A), np.add.reduce(A))  # axis=0, as numpy's default
    same(fb.jit(lambda a: np.maximum.reduce(a, axis=None))(A), np.maximum.reduce(A, axis=None))
    same(fb.jit(lambda a: np.add(a, 1, dtype=np.float64))(A), np.add(A, 1, dtype=np.float64))
    same(fb.jit(lambda a, b: np.multiply.outer(a, b))(V, A), np.multiply.outer(V, A))

    def f(a):
        return np.subtract.accumulate(a)  # add / multiply / maximum / minimum accumulate (test_issue14_rest.py)

    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.jit(f)(V)
    assert str(info.value) == ("fusebind: in 'f': numpy.subtract.accumulate is not supported on traced arrays: only "
                               "add, multiply, maximum and minimum accumulate (np.cumsum / np.cumprod / "
                               "np.maximum.accumulate / np.minimum.accumulate); compute other running results "
                               "outside the jitted function")

    def g(a):
        return np.add(a, 1, out=a)

    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.jit(g)(V)
    assert str(info.value) == ("fusebind: in 'g': numpy.add(..., out=...) cannot write into an array inside a traced "
                               "function (traced arrays are immutable); use the result: y = numpy.add(...)")


_NO_VALUE = ("of a traced array needs its value, which a trace does not have; shapes are static, so use x.shape, "
             "len(x) or x.ndim for sizes and loops; convert values inside the trace with x.astype(...)")


@pytest.mark.parametrize("convert, text", [
    (int, "int()"), (float, "float()"), (complex, "complex()"), (operator.index, "operator.index()"),
    (lambda t: range(t), "operator.index()"),
])
def test_conversions_that_need_a_value_raise(convert: object, text: str) -> None:
    def f(x):
        return convert(x)  # type: ignore[operator]

    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.jit(f)(np.float32(1.0).reshape(()))
    assert str(info.value) == f"fusebind: in 'f': {text} {_NO_VALUE}"


def test_bool_and_asarray_raise_saying_what_to_use() -> None:
    def f(x):
        return x if x else -x

    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.jit(f)(V)
    assert str(info.value) == ("fusebind: in 'f': the truth value of a traced array is not known while tracing "
                               "(Python `if`, `while`, `and`, `or` and `not` need it); choose values with "
                               "fb.where(cond, a, b) (or np.where), and reduce to a traced bool with np.any / np.all")
    for convert in (np.asarray, np.array, lambda x: np.array([x, x])):
        with pytest.raises(fb.UnsupportedOperation, match=r"^fusebind: in '<lambda>': numpy needs the values of a "
                                                          r"traced array here \(np.asarray / np.array of it"):
            fb.jit(lambda x: convert(x))(V)


def test_len_iteration_and_indexing_use_the_static_shape() -> None:
    f = fb.jit(lambda a: tuple(row * len(a) for row in a))
    for got, want in zip(f(A), tuple(row * 3 for row in A)):
        same(got, want)
    same(fb.jit(lambda a: a[1, ::-1] + a[-1, None, :])(A), A[1, ::-1] + A[-1, None, :])
    same(fb.jit(lambda a: a[..., 1:3])(A), A[..., 1:3])

    def g(a):
        return a[3]

    with pytest.raises(fb.FusebindError, match="index 3 is out of bounds for axis 0 with size 3") as info:
        fb.jit(g)(A)
    assert isinstance(info.value, IndexError)


def test_static_answers_are_numpys() -> None:
    seen = {}

    def f(a, i):
        seen.update(shape=np.shape(a), ndim=np.ndim(a), size=np.size(a, 1), rt=np.result_type(a, i, 2.0),
                    complex=np.iscomplexobj(a), real=np.isrealobj(i))
        return a

    fb.jit(f)(A, np.arange(3, dtype=np.int32))
    assert seen == dict(shape=(3, 4), ndim=2, size=4, rt=np.dtype(np.float64), complex=False, real=True)


# ---------------------------------------------------------------- item 5: numpy's errors
def test_max_over_an_empty_axis_raises_like_numpy() -> None:
    def f(x):
        return x.max(axis=1)

    with pytest.raises(fb.FusebindValueError) as info:
        fb.jit(f)(np.zeros((3, 0), np.float32))  # returned -inf
    assert isinstance(info.value, ValueError)
    assert str(info.value) == ("fusebind: in 'f': numpy.max: zero-size array to reduction operation maximum which "
                               "has no identity")
    big = np.zeros((1 << 17, 0), np.float32)  # above the probe's full-size limit: numpy sees a shrunk stand-in
    with pytest.raises(fb.FusebindValueError, match="zero-size array to reduction operation maximum"):
        fb.jit(f)(big)
    same(fb.jit(lambda x: x.max(axis=0))(np.zeros((3, 0), np.float32)), np.zeros((3, 0), np.float32).max(axis=0))
    same(fb.jit(lambda x: x.max(axis=1, initial=-2.0))(np.zeros((3, 0), np.float32)),
         np.zeros((3, 0), np.float32).max(axis=1, initial=-2.0))


@pytest.mark.parametrize("call, message", [
    (lambda x: x.sum(axis=(0, 0)), "numpy.sum: duplicate value in 'axis'"),
    (lambda x: np.mean(x, axis=(1, -1)), "numpy.mean: duplicate value in 'axis'"),
    (lambda x: x.sum(axis=2), "numpy.sum: axis 2 is out of bounds for array of dimension 2"),
    (lambda x: np.transpose(x, (0, 2)), "numpy.transpose: axis 2 is out of bounds for array of dimension 2"),
])
def test_bad_axes_raise_numpys_axis_error(call: object, message: str) -> None:
    def f(x):
        return call(x)  # type: ignore[operator]

    with pytest.raises(fb.FusebindAxisError) as info:
        fb.jit(f)(A)  # sum(axis=(0, 0)) was accepted
    assert isinstance(info.value, np.exceptions.AxisError) and isinstance(info.value, ValueError)
    assert str(info.value) == f"fusebind: in 'f': {message}"


def test_exp_of_bool_is_float16_as_numpy() -> None:
    m = np.array([True, False])
    for fn in (fb.exp, np.exp, fb.sqrt, np.tanh):
        def f(x):
            return fn(x)  # noqa: B023

        got = fb.jit(f)(m)  # fb.exp once returned float64; numpy gives float16
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, np.asarray(np.exp(m) if fn is fb.exp else
                                                      np.sqrt(m) if fn is fb.sqrt else fn(m)))
    same(fb.jit(lambda x: fb.exp(x.astype(np.float32)))(m), np.exp(m.astype(np.float32)))


@pytest.mark.parametrize("dt", [np.int32, np.int64])
def test_float_functions_of_integers_compute_in_float64(dt: type) -> None:
    x = np.arange(-2, 3, dtype=dt)
    same(fb.jit(fb.exp)(x), np.exp(x), rtol=1e-14)
    same(fb.jit(np.tanh)(x), np.tanh(x), rtol=1e-14)
    assert fb.jit(fb.erf)(x).dtype == np.float64


# ---------------------------------------------------------------- the two messages
def test_unary_minus_of_bool_suggests_what_works() -> None:
    def f(m):
        return -m

    m = np.array([True, False, True])
    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.jit(f)(m)
    assert str(info.value) == ("fusebind: in 'f': unary minus of a bool array is not supported (numpy refuses it "
                               "too); use ~x or np.logical_not(x)")
    np.testing.assert_array_equal(fb.jit(lambda m: ~m)(m), ~m)  # both suggestions work and give numpy's answer
    np.testing.assert_array_equal(fb.jit(np.logical_not)(m), np.logical_not(m))
    np.testing.assert_array_equal(fb.jit(lambda m: m ^ True)(m), m ^ True)


def test_softmax_of_an_ndarray_names_what_exists() -> None:
    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.softmax(A)
    assert str(info.value) == ("fusebind.softmax works on traced arrays inside a @fusebind.jit function; got "
                               "ndarray (outside one, use scipy.special.softmax, or call it inside a @fb.jit "
                               "function)")
    e = np.exp(A - A.max(-1, keepdims=True))
    same(fb.jit(fb.softmax)(A), e / e.sum(-1, keepdims=True))


# ---------------------------------------------------------------- operators follow numpy too
def test_in_place_operators_keep_the_dtype_and_shape_as_numpy() -> None:
    def f(x, y):
        x += y
        return x

    same(fb.jit(f)(A.copy(), A.astype(np.float64)), A + A.astype(np.float64).astype(np.float32))
    with pytest.raises(fb.UnsupportedOperation, match="Cannot cast ufunc 'add' output from dtype"):
        fb.jit(f)(np.arange(3, dtype=np.int32), np.ones(3))
    with pytest.raises(fb.FusebindValueError, match=r"non-broadcastable output operand with shape \(4,\)"):
        fb.jit(f)(V, A)


def test_integer_floor_division_and_remainder_follow_numpy() -> None:
    x = np.arange(-6, 6, dtype=np.int32)
    y = np.array([3, -3, 2, 0] * 3, np.int32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(fb.jit(lambda a, b: a // b)(x, y), x // y)
        np.testing.assert_array_equal(fb.jit(lambda a, b: a % b)(x, y), x % y)
    same(fb.jit(lambda a: np.floor_divide(a, 1.5))(A), np.floor_divide(A, 1.5))


def test_power_operator_follows_ndarray_pow() -> None:
    # ndarray.__pow__ takes np.sqrt for ** 0.5 and np.square for ** 2: sqrt(-inf) is NaN where pow gives inf,
    # and bool ** 2 is np.square's int8 (issue 14's integer widths: answered in int8, not int64).
    x = np.array([-np.inf, -0.0, 4.0, np.nan], np.float32)
    with np.errstate(invalid="ignore"):
        want = x ** 0.5
        np.testing.assert_array_equal(fb.jit(lambda a: a ** 0.5)(x), want)
        np.testing.assert_array_equal(np.signbit(fb.jit(lambda a: a ** 0.5)(x)), np.signbit(want))
        np.testing.assert_array_equal(fb.jit(lambda a, s: a ** s)(x, 0.5), want)  # s decides at run time
        np.testing.assert_array_equal(fb.jit(lambda a, s: a ** s)(x, 3.0), x ** 3.0)

    def f(m):
        return m ** 2

    got, want = fb.jit(f)(np.array([True, False])), f(np.array([True, False]))
    assert got.dtype == want.dtype == np.int8
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(fb.jit(lambda m: m ** 3)(np.array([True, False])), np.array([True, False]) ** 3)


def test_signed_zeros_and_nan_survive_sign_and_indexing() -> None:
    x = np.array([1.5, -0.0, np.nan, -np.inf], np.float32)
    got = fb.jit(np.sign)(x)
    np.testing.assert_array_equal(got, np.sign(x))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.sign(x)))  # sign(-0.0) is +0.0
    picked = fb.jit(lambda a: (a[1], a[2], a[::-1]))(x)
    for g, w in zip(picked, (x[1], x[2], x[::-1])):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


def test_a_traced_mask_and_assignment_are_refused_clearly() -> None:
    # (x[1:] and x[idx] were refused here until prim.slice and prim.gather: test_indexing.py,
    # test_advanced_indexing.py)
    def g(x):
        return x[x > 0]

    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.jit(g)(V)
    assert str(info.value) == ("fusebind: in 'g': indexing with a traced boolean mask gives a shape that depends on "
                               "its values; select with fb.where(mask, x, other), or update with "
                               "fb.at(x)[mask].set(v); a mask known when tracing (a numpy array or fb.constant) "
                               "indexes as numpy's")

    def h(x):
        x[0] = 1.0
        return x

    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.jit(h)(V)
    assert str(info.value) == ("fusebind: in 'h': traced arrays are immutable (x[...] = v writes in place); build "
                               "the new array with y = fb.at(x)[...].set(v) (or fb.at(x)[...].add(v) for "
                               "x[...] += v; fb.where(mask, v, x) for a traced mask)")
