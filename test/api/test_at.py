"""fb.at(x)[idx].set / add / mul / min / max and fb.put_along_axis: numpy's values, dtype and shape
(a copy of x updated as numpy's assignment and ufunc.at update it, repeated indices included), numpy's
errors for constant indices, refusals of traced indices, and the refusals of numpy's in-place writers
on traced arrays, which point to these forms. Most cases trace and interpret; a few run through fb.jit."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from fusebind.api.trace import trace_graph
from fusebind.dialect import interpret

from api_trace_helpers import interp, same

X = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
XI = np.arange(12, dtype=np.int64).reshape(3, 4) * 3 - 7
XNAN = X.copy()
XNAN[1, 1] = np.nan

NUMPY = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def numpy_update(method, x, idx, v):
    y = x.copy()
    if method == "set":
        y[idx] = v
    else:
        NUMPY[method].at(y, idx, v)
    return y


IDX = [(np.array([0, 2, 0, 0]), np.array([1, 3, 1, 1])), (slice(1, None), slice(None, None, 2)),
       np.array([2, -1, 0, 2]), (Ellipsis, 1), X > 0, 1]


@pytest.mark.parametrize("idx", IDX, ids=["repeated", "slices", "rows", "ellipsis", "mask", "int"])
@pytest.mark.parametrize("method", ["set", "add", "mul", "min", "max"])
@pytest.mark.parametrize("x,v", [(X, 2.5), (XI, 3), (XNAN, np.float64(-1.25)), (X > 1, True)],
                         ids=["f32", "i64", "f32nan", "bool"])
def test_at_scalar_value_matches_numpy(x, v, method, idx):
    same(interp(lambda a: getattr(fb.at(a)[idx], method)(v), x), numpy_update(method, x, idx, v))


@pytest.mark.parametrize("method", ["set", "add", "mul", "min", "max"])
def test_at_traced_values_broadcast_and_repeat_like_numpy(method):
    idx = (np.array([[0, 2], [0, 0]]), np.array([[1, 3], [1, 1]]))
    v = np.array([[1.5, -2.0], [4.0, 0.5]], np.float64)  # float64 values into float32: numpy's loop, then a cast
    same(interp(lambda a, b: getattr(fb.at(a)[idx], method)(b), X, v), numpy_update(method, X, idx, v))
    row = np.array([[3, -1, 2, 5]], np.int64)  # a leading 1 dropped, as numpy's assignment does
    same(interp(lambda a, b: getattr(fb.at(a)[np.array([1, 1])], method)(b), XI, row),
         numpy_update(method, XI, np.array([1, 1]), row))


def test_at_constant_values_array_and_captured_x():
    v = np.array([10.0, 20.0, 30.0], np.float32)
    same(interp(lambda a: fb.at(a)[:, 0].set(v), X), numpy_update("set", X, (slice(None), 0), v))
    same(interp(lambda b: fb.at(X)[:, 1].add(b), v), numpy_update("add", X, (slice(None), 1), v))


def test_at_on_numpy_arrays_is_numpy_and_leaves_x_alone():
    x = X.copy()
    same(fb.at(x)[np.array([0, 0, 2])].add(1.0), numpy_update("add", X, np.array([0, 0, 2]), 1.0))
    same(x, X)


def test_scatter_add_histogram_jit():
    """A histogram by fb.at(...).add of weights at constant bins: repeated bins accumulate (np.add.at)."""
    bins = np.array([0, 3, 3, 1, 7, 3, 0, 2, 5, 5, 3, 6])
    hist = fb.jit(lambda w: fb.at(np.zeros(8, np.float32))[bins].add(w))
    for w in (np.ones(12, np.float32), np.linspace(0.5, 3, 12).astype(np.float32)):
        want = np.zeros(8, np.float32)
        np.add.at(want, bins, w)
        same(hist(w), want)
    np.testing.assert_array_equal(hist(np.ones(12, np.float32)), np.bincount(bins, minlength=8))


def test_put_along_axis_matches_numpy():
    idx = np.array([[1], [0], [3]])
    want = X.copy()
    np.put_along_axis(want, idx, 9.0, axis=1)
    same(fb.jit(lambda a: fb.put_along_axis(a, idx, 9.0, axis=1))(X), want)
    vals = np.array([[1, 2, 3, 4]], np.int64)
    want = XI.copy()
    np.put_along_axis(want, np.array([[2, 0, 2, 1]]), vals, axis=0)
    same(interp(lambda a, b: fb.put_along_axis(a, np.array([[2, 0, 2, 1]]), b, axis=0), XI, vals), want)
    want = XI.copy()
    np.put_along_axis(want, np.array([11, -12]), 0, axis=None)
    same(interp(lambda a: fb.put_along_axis(a, np.array([11, -12]), 0, axis=None), XI), want)


def test_constant_index_out_of_range_raises_like_numpy():
    with pytest.raises(IndexError) as want:
        X.copy()[5] = 1.0
    with pytest.raises(fb.IndexOutOfBounds) as got:
        interp(lambda a: fb.at(a)[5].set(1.0), X)
    assert str(got.value) == f"fusebind: in 't': fusebind.at(x)[...].set: {want.value}"
    with pytest.raises(IndexError) as want:
        np.take_along_axis(X, np.array([[4]]), axis=1)
    with pytest.raises(fb.IndexOutOfBounds) as got:
        interp(lambda a: fb.put_along_axis(a, np.array([[4]]), 0.0, axis=1), X)
    assert str(got.value) == f"fusebind: in 't': fusebind.put_along_axis: {want.value}"


def test_values_that_do_not_broadcast_raise_numpy_s_error():
    with pytest.raises(ValueError) as want:
        X.copy()[np.array([0, 1])] = np.zeros(3)
    with pytest.raises(fb.FusebindValueError) as got:
        interp(lambda a, b: fb.at(a)[np.array([0, 1])].set(b), X, np.zeros(3, np.float32))
    assert str(got.value) == f"fusebind: in 't': fusebind.at(x)[...].set: {want.value}"


def test_traced_indices_refused():
    msg = ("fusebind: in 't': {} with traced indices: fusebind cannot check their range inside a kernel yet, and an "
           "out-of-range index must raise IndexError rather than give a value; pass the indices as constants "
           "(Python ints, slices, lists or numpy arrays), or, for .add / .min / .max, one integer array argument "
           "of the jitted function indexing axis 0 (checked before each call)")
    i = np.zeros(2, np.int64)
    with pytest.raises(fb.UnsupportedOperation) as got:
        interp(lambda a, j: fb.at(a)[j, 0].add(1.0), X, i)
    assert str(got.value) == msg.format("fusebind.at(x)[...].add")
    with pytest.raises(fb.UnsupportedOperation) as got:
        interp(lambda a, j: fb.put_along_axis(a, j, 1.0, axis=0), X, i.reshape(1, 2)[:, :1])
    assert str(got.value) == msg.format("fusebind.put_along_axis")


@pytest.mark.parametrize("method", ["add", "min", "max"])
def test_traced_argument_indices_histogram_jit(method):
    """A histogram by traced bins (an argument): numpy's np.<ufunc>.at values, and its IndexError
    from the call-time check, also after warm (fast-path) calls."""
    rng = np.random.default_rng(3)
    f = fb.jit(lambda b, w: getattr(fb.at(np.zeros(8, np.float32))[b], method)(w))
    for _ in range(3):
        bins, w = rng.integers(-8, 8, 40), rng.standard_normal(40).astype(np.float32)
        want = np.zeros(8, np.float32)
        NUMPY[method].at(want, bins, w)
        got = f(bins, w)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    with pytest.raises(IndexError) as want_exc:
        NUMPY[method].at(np.zeros(8, np.float32), np.array([3, -9, 0]), 1.0)
    with pytest.raises(fb.IndexOutOfBounds) as got_exc:
        f(np.array([3, -9, 0]), np.ones(3, np.float32))
    assert str(got_exc.value) == (f"fusebind: in '<lambda>': fusebind.at(x)[...].{method}: {want_exc.value} (in "
                                  "argument #0 of '<lambda>')")


@pytest.mark.parametrize("method", ["add", "min", "max"])
@pytest.mark.parametrize("x,v", [(XI, 3), (X, np.float64(2.5)), (X > 0, True)], ids=["i64", "f32", "bool"])
def test_traced_argument_indices_rows(x, v, method):
    i = np.array([2, -1, 0, 2, 2], np.int32)
    module, graph = trace_graph(lambda a, j: getattr(fb.at(a)[j], method)(v), (x, i), ["a", "j"], "t")
    assert len(graph.checks) == 1
    graph.checks[0]([x, i])
    got, want = interpret(module, x, i), numpy_update(method, x, i, v)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_traced_computed_indices_and_set_refused():
    msg = "fusebind: in 't': fusebind.at(x)[...].{} with traced indices: fusebind cannot check their range"
    with pytest.raises(fb.UnsupportedOperation, match=msg.format("add").replace("[...]", r"\[...\]")
                       .replace("(x)", r"\(x\)")):
        interp(lambda a, j: fb.at(a)[j + 1].add(1.0), X, np.zeros(2, np.int64))
    with pytest.raises(fb.UnsupportedOperation, match=msg.format("set").replace("[...]", r"\[...\]")
                       .replace("(x)", r"\(x\)")):
        interp(lambda a, j: fb.at(a)[j].set(1.0), X, np.zeros(2, np.int64))


def test_too_large_an_update_refused():
    big = np.zeros(1 << 13, np.float32)
    with pytest.raises(fb.UnsupportedOperation, match=r"fusebind.at\(x\)\[...\].add updates 4096 positions of an "
                                                      r"array of 8192 elements, 1 times at the most repeated one"):
        interp(lambda a: fb.at(a)[::2].add(1.0), big)


WRITES = "writes into its argument in place (and returns None), and traced arrays are immutable"


@pytest.mark.parametrize("fn,message", [
    (lambda a: a.__setitem__(0, 1.0),
     "traced arrays are immutable (x[...] = v writes in place); build the new array with y = fb.at(x)[...].set(v) "
     "(or fb.at(x)[...].add(v) for x[...] += v; fb.where(mask, v, x) for a traced mask)"),
    (lambda a: np.put_along_axis(a, np.zeros((3, 1), np.int64), 0.0, axis=1),
     f"numpy.put_along_axis is not supported on traced arrays; it {WRITES}; use y = fb.put_along_axis(x, indices, "
     "values, axis), which returns the new array"),
    (lambda a: np.put(a, [0], [1.0]),
     f"numpy.put is not supported on traced arrays; it {WRITES}; use y = fb.at(x.ravel())[indices].set(values)"
     ".reshape(x.shape) (np.put's flat indices, mode='raise')"),
    (lambda a: np.place(a, a > 0, [0.0]),
     f"numpy.place is not supported on traced arrays; it {WRITES}; use y = fb.where(mask, v, x) for one value v, "
     "or, for a constant mask, fb.at(x)[mask].set(values) (one value per masked element)"),
    (lambda a: np.putmask(a, a > 0, 0.0),
     f"numpy.putmask is not supported on traced arrays; it {WRITES}; use y = fb.where(mask, values, x) (values "
     "broadcast)"),
    (lambda a: a.put([0], 1.0),
     f"ndarray.put {WRITES}; use y = fb.at(x.ravel())[indices].set(values).reshape(x.shape)")],
    ids=["setitem", "put_along_axis", "put", "place", "putmask", "ndarray.put"])
def test_in_place_writers_point_to_the_functional_form(fn, message):
    with pytest.raises(fb.UnsupportedOperation) as got:
        interp(fn, X)
    assert str(got.value) == f"fusebind: in 't': {message}"
