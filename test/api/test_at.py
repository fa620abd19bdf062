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


def test_traced_index_forms_refused():
    """A traced index mixed with other indices, and a traced boolean mask, are refused (they say
    what to write instead)."""
    i = np.zeros(2, np.int64)
    with pytest.raises(fb.UnsupportedOperation) as got:
        interp(lambda a, j: fb.at(a)[j, 0].add(1.0), X, i)
    assert str(got.value) == ("fusebind: in 't': fusebind.at(x)[...].add: a traced index is taken as one integer "
                              "array indexing one axis, after full slices only (fb.at(x)[i], fb.at(x)[:, i]); "
                              "combine it with other indices by computing flat positions, or pass the indices as "
                              "constants")
    with pytest.raises(fb.UnsupportedOperation) as got:
        interp(lambda a: fb.at(a)[a > 0].set(0.0), X)
    assert str(got.value) == ("fusebind: in 't': fusebind.at(x)[...].set with a traced boolean mask: the number of "
                              "updated elements would depend on the data; use fb.where(mask, value, x) for one "
                              "value (or a constant mask)")
    with pytest.raises(fb.UnsupportedOperation) as got:  # a list of traced arrays: the tracer's own words, once
        interp(lambda a, j: fb.at(a)[[j, j]].add(1.0), X, i)
    assert str(got.value).startswith("fusebind: in 't': numpy needs the values of a traced array here")
    with pytest.raises(fb.UnsupportedOperation, match="broadcast past the array's shape"):
        interp(lambda a, j: fb.put_along_axis(a, j, 1.0, axis=1), X[:1], np.zeros((3, 2), np.int64))


@pytest.mark.parametrize("method", ["set", "add", "mul", "min", "max"])
def test_traced_computed_indices_match_numpy(method):
    """Indices computed inside the function (not an argument): the op checks them; the
    interpreter's reference raises numpy's IndexError for a bad one."""
    j = np.array([1, -2, 0, 1, 1], np.int64)  # j - 1: repeated and negative rows of X
    v = np.arange(20, dtype=np.float32).reshape(5, 4) * 0.5 - 3
    same(interp(lambda a, k, w: getattr(fb.at(a)[k - 1], method)(w), X, j, v), numpy_update(method, X, j - 1, v))
    same(interp(lambda a, k: getattr(fb.at(a)[:, k * 2], method)(2.5), X, j[:2]),
         numpy_update(method, X, (slice(None), j[:2] * 2), 2.5))
    with pytest.raises(IndexError) as want:
        numpy_update(method, X, j + 2, 1.0)
    with pytest.raises(fb.IndexOutOfBounds) as got:
        interp(lambda a, k: getattr(fb.at(a)[k + 2], method)(1.0), X, j)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("method", ["set", "add", "max"])
def test_traced_index_on_a_later_axis(method):
    """fb.at(x)[:, i] and fb.at(x)[..., i] with i an argument: along that axis, every row."""
    i = np.array([[3, -1], [0, 3]], np.int32)
    v = np.arange(12, dtype=np.float64).reshape(3, 2, 2)
    same(interp(lambda a, k, w: getattr(fb.at(a)[:, k], method)(w), X, i, v),
         numpy_update(method, X, (slice(None), i), v))
    same(interp(lambda a, k: getattr(fb.at(a)[..., k], method)(-1.0), XI, i),
         numpy_update(method, XI, (Ellipsis, i), -1.0))
    rows, row = np.array([2, -1, 0]), np.array([5.0, 6.0, 7.0, 8.0], np.float32)
    same(interp(lambda a, k, w: getattr(fb.at(a)[k], method)(w), X, rows, row),
         numpy_update(method, X, rows, row))


def test_put_along_axis_with_traced_indices_matches_numpy():
    idx = np.array([[1, 3], [0, 0], [3, -4]])
    vals = np.array([[10, 20], [30, 40], [50, 60]], np.int64)

    def want_put(x, i, v, axis):
        y = x.copy()
        np.put_along_axis(y, i, v, axis)
        return y
    same(interp(lambda a, i, v: fb.put_along_axis(a, i, v, axis=1), X, idx, vals), want_put(X, idx, vals, 1))
    same(interp(lambda a, i: fb.put_along_axis(a, i, 9.0, axis=-1), XI, idx[:, :1]), want_put(XI, idx[:, :1], 9, -1))
    same(interp(lambda a, i: fb.put_along_axis(a, i, -1.0, axis=None), X, np.array([11, -12, 5])),
         want_put(X, np.array([11, -12, 5]), -1.0, None))
    f = fb.jit(lambda a, i, v: fb.put_along_axis(a, i, v, axis=1))
    same(f(X, idx, vals), want_put(X, idx, vals, 1))
    with pytest.raises(IndexError) as want:
        want_put(X, np.array([[1], [4], [0]]), 0.0, 1)
    with pytest.raises(fb.IndexOutOfBounds) as got:
        f(X, np.array([[1, 1], [4, 0], [0, 0]]), vals)
    assert str(got.value) == (f"fusebind: in '<lambda>': fusebind.put_along_axis: {want.value} (in argument #1 of "
                              "'<lambda>')")


def test_histogram_of_a_million_labels_compiles_and_matches_bincount():
    """fb.at(counts)[labels].add(1): 10^6 traced labels into 256 bins, one compiled kernel (the
    scatter loop; the labels are range-checked before the call), np.bincount's counts."""
    labels = np.random.default_rng(7).integers(0, 256, 10 ** 6)
    hist = fb.jit(lambda b: fb.at(np.zeros(256, np.int64))[b].add(1))
    for _ in range(2):
        same(hist(labels), np.bincount(labels, minlength=256))
    assert hist.stats.fused_calls == 2 and hist.stats.arm0_calls == 0, hist.explain(labels)
    assert "prim.scatter" in hist.explain(labels)


@pytest.mark.parametrize("method", ["add", "min", "max"])
def test_traced_argument_indices_histogram_jit(method):
    """A histogram by traced bins (an argument): numpy's assignment / np.<ufunc>.at values (float
    sums in numpy's order: exactly), and its IndexError from the call-time check, also after warm
    (fast-path) calls."""
    rng = np.random.default_rng(3)
    f = fb.jit(lambda b, w: getattr(fb.at(np.zeros(8, np.float32))[b], method)(w))
    for _ in range(3):
        bins, w = rng.integers(-8, 8, 40), rng.standard_normal(40).astype(np.float32)
        same(f(bins, w), numpy_update(method, np.zeros(8, np.float32), bins, w))  # numpy's order: exact
    with pytest.raises(IndexError) as want_exc:
        numpy_update(method, np.zeros(8, np.float32), np.array([3, -9, 0]), 1.0)
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


def test_a_large_update_has_no_limit():
    """No gather layers any more (they refused this: 2^31 elements of work): 2^15 positions are one scatter."""
    big = np.zeros(1 << 16, np.float32)
    same(interp(lambda a: fb.at(a)[::2].add(1.0), big), numpy_update("add", big, slice(None, None, 2), 1.0))


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


def test_computed_indices_are_checked_in_the_compiled_kernel():
    """Indices computed in the function reach the kernel, which checks them (the error channel):
    numpy's values in range, fb.IndexOutOfBounds with numpy's words out of range, and the next
    call is fine."""
    f = fb.jit(lambda b, w: fb.at(np.zeros(8, np.float32))[b * 3 - 8].add(w))
    b, w = np.array([1, 2, 5, 3, 0, 4, 2]), np.arange(7, dtype=np.float32)
    same(f(b, w), numpy_update("add", np.zeros(8, np.float32), b * 3 - 8, w))
    with pytest.raises(IndexError) as want:
        numpy_update("add", np.zeros(8, np.float32), np.array([1, 6, 0, 7, 0, 0, 0]) * 3 - 8, w)
    with pytest.raises(fb.IndexOutOfBounds, match=rf"^fusebind: in '<lambda>': prim.scatter: {want.value} \(from "
                                                  "argument"):
        f(np.array([1, 6, 0, 7, 0, 0, 0]), w)
    same(f(b[::-1].copy(), w), numpy_update("add", np.zeros(8, np.float32), b[::-1] * 3 - 8, w))
    assert f.stats.fused_calls == 2 and f.stats.arm0_calls == 0  # the failed call returned nothing


def test_non_contiguous_operands_and_a_fused_producer_of_the_values():
    """x a transposed view, the values a reversed transposed view computed on (w * 2 joins the
    scatter's region, with the reshape of the rows to x's rank), rows repeated: numpy's values, one
    fused kernel."""
    f = fb.jit(lambda a, i, w: fb.at(a)[i].add(w * 2.0))
    x = np.arange(24, dtype=np.float32).reshape(4, 6).T
    i, w = np.array([0, 4, 2, 0]), np.arange(16, dtype=np.float32).reshape(4, 4)[::-1].T
    same(f(x, i, w), numpy_update("add", x, i, w * np.float32(2.0)))
    (region,) = [line for line in f.explain(x, i, w).splitlines() if line.startswith("region @")]
    assert "prim.mul" in region and "prim.scatter" in region and f.stats.fused_calls == 1, region
