"""np.take_along_axis, np.choose and np.pad on traced arrays (and fb.<same name>), and the
creation functions as fb.<numpy name>: numpy's values, dtype and shape, numpy's errors for
constant indices out of range (fb.IndexOutOfBounds), and the refusal of traced indices.

Most cases trace and interpret (no compile); one jit per function checks the compiled path."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from fusebind.api.trace import trace_graph
from fusebind.dialect import interpret

from api_trace_helpers import interp, same

X = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
XI = np.arange(12, dtype=np.int64).reshape(3, 4) * 3 - 7


@pytest.mark.parametrize("idx,axis", [
    (np.array([[0], [3], [-1]]), 1), (np.array([[2, 0, 1, 1]]), 0), (np.array([[0, -4, 3, 3, 1]] * 3), 1),
    (np.array([11, 0, -12]), None), (np.zeros((1, 1), np.int32), -1)])
@pytest.mark.parametrize("x", [X, XI, X > 0], ids=["f32", "i64", "bool"])
def test_take_along_axis_matches_numpy(x, idx, axis):
    same(interp(lambda a: np.take_along_axis(a, idx, axis=axis), x), np.take_along_axis(x, idx, axis=axis))


def test_take_along_axis_jit_and_fb_name():
    idx = np.array([[1], [3], [0]])
    same(fb.jit(lambda a: fb.take_along_axis(a, idx, 1))(X), np.take_along_axis(X, idx, 1))


def test_take_along_axis_constant_index_out_of_range_raises_like_numpy():
    with pytest.raises(IndexError) as want:
        np.take_along_axis(X, np.array([[4]]), axis=1)
    with pytest.raises(fb.IndexOutOfBounds) as got:
        interp(lambda a: np.take_along_axis(a, np.array([[4]]), axis=1), X)
    assert isinstance(got.value, fb.FusebindIndexError) and isinstance(got.value, IndexError)
    assert str(got.value) == f"fusebind: in 't': numpy.take_along_axis: {want.value}"


def _cross_entropy(z, y):
    m = z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z - m).sum(axis=1, keepdims=True)) + m
    return np.mean(lse[:, 0] - np.take_along_axis(z, y[:, None], axis=1)[:, 0])


def test_cross_entropy_with_integer_label_argument_is_checked_before_each_call():
    """Traced indices read from an argument: numpy's values, and numpy's IndexError from a
    call-time check (also on the fast path, after warm calls)."""
    rng = np.random.default_rng(0)
    z = rng.standard_normal((8, 5)).astype(np.float32)
    ce = fb.jit(_cross_entropy)
    for y in (rng.integers(-5, 5, 8), rng.integers(0, 5, 8).astype(np.int32), rng.integers(-5, 5, 8)):
        got, want = ce(z, y), _cross_entropy(z, y)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)
    bad = np.array([0, 1, 2, 3, 4, -5, -6, 7])
    with pytest.raises(fb.IndexOutOfBounds) as got:
        ce(z, bad)
    assert str(got.value) == ("fusebind: in '_cross_entropy': numpy.take_along_axis: index -6 is out of bounds for "
                              "axis 1 with size 5 (in argument #1 of '_cross_entropy')")
    with pytest.raises(IndexError, match="index -6 is out of bounds for axis 1 with size 5"):
        _cross_entropy(z, bad)
    np.testing.assert_allclose(ce(z, bad[:6].repeat(2)[:8] % 5), _cross_entropy(z, bad[:6].repeat(2)[:8] % 5),
                               rtol=1e-6)


def test_take_along_axis_traced_argument_indices_all_axes_and_dtypes():
    rng = np.random.default_rng(1)
    idx = rng.integers(-3, 3, (2, 4))
    for x in (X, XI, X > 0):
        module, graph = trace_graph(lambda a, i: np.take_along_axis(a, i, axis=0), (x, idx), ["a", "i"], "t")
        for check in graph.checks:
            check([x, idx])
        same(interpret(module, x, idx), np.take_along_axis(x, idx, axis=0))
    idx = rng.integers(-4, 4, (2, 3)).astype(np.int32)
    module, graph = trace_graph(lambda a, i: np.take_along_axis(a, i.T, axis=1), (X, idx), ["a", "i"], "t")
    same(interpret(module, X, idx), np.take_along_axis(X, idx.T, axis=1))
    with pytest.raises(fb.IndexOutOfBounds, match=r"index 4 is out of bounds for axis 1 with size 4 \(in argument "
                                                  r"#1 of 't'\)"):
        graph.checks[0]([X, np.full((2, 3), 4)])


def test_take_along_axis_computed_traced_indices_are_checked_by_the_op():
    """(Refused until the kernel error channel: now the op's reference, or the kernel, checks them.)"""
    i = np.array([[0], [2], [-4]])
    same(interp(lambda a, i: np.take_along_axis(a, i + 1, axis=1), X, i), np.take_along_axis(X, i + 1, axis=1))
    with pytest.raises(fb.IndexOutOfBounds) as got:
        interp(lambda a, i: np.take_along_axis(a, i + 1, axis=1), X, np.array([[0], [3], [0]]))
    assert str(got.value) == "index 4 is out of bounds for axis 1 with size 4"


@pytest.mark.parametrize("a,mode", [(np.array([0, 1, 1, 0]), "raise"), (np.array([[0], [1], [1]]), "raise"),
                                    (np.array([0, 3, -1, 2]), "wrap"), (np.array([5, -3, 1, 0]), "clip")])
def test_choose_matches_numpy(a, mode):
    b = np.arange(4, dtype=np.int32) * 10
    same(interp(lambda x, y: np.choose(a, [x, y], mode=mode), X, b), np.choose(a, [X, b], mode=mode))


def test_choose_out_of_range_raises_like_numpy():
    with pytest.raises(ValueError) as want:
        np.choose(np.array([0, 2]), [X[0, :2], X[1, :2]])
    with pytest.raises(fb.FusebindValueError) as got:
        interp(lambda x, y: np.choose(np.array([0, 2]), [x, y]), X[0, :2], X[1, :2])
    assert str(got.value) == f"fusebind: in 't': numpy.choose: {want.value}"


@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
def test_choose_traced_chooser(mode):
    i = np.array([0, 1, 1, 0]) if mode == "raise" else np.array([-3, 1, 4, 0], np.int32)
    b = np.arange(4, dtype=np.int32) * 10
    module, graph = trace_graph(lambda c, x, y: np.choose(c, [x, y], mode=mode), (i, X[0], b), ["c", "x", "y"], "t")
    assert len(graph.checks) == (mode == "raise")
    same(interpret(module, i, X[0], b), np.choose(i, [X[0], b], mode=mode))
    if mode == "raise":
        with pytest.raises(ValueError) as want:
            np.choose(np.array([0, 2, 0, 0]), [X[0], b])
        with pytest.raises(fb.FusebindValueError) as got:
            graph.checks[0]([np.array([0, 2, 0, 0]), X[0], b])
        assert str(got.value) == f"fusebind: in 't': numpy.choose: {want.value} (entry 2, in argument #0 of 't')"


def test_choose_computed_chooser_refused():
    with pytest.raises(fb.UnsupportedOperation, match="numpy.choose with traced indices computed inside the "
                                                      "function: fusebind cannot check"):
        interp(lambda i, x: np.choose(i + 1, [x, x]), np.zeros(4, np.int64), X[0])


@pytest.mark.parametrize("width,mode,kw", [
    (1, "constant", {}), (((1, 2), (2, 0)), "constant", {"constant_values": ((1, 2), (3, 4))}),
    ((2, 1), "constant", {"constant_values": 7.9}), (((1, 2), (2, 1)), "edge", {}),
    (((2, 2), (3, 1)), "reflect", {}), (((5, 0), (6, 9)), "reflect", {}), (3, "symmetric", {}),
    (((4, 7), (9, 2)), "wrap", {}), (((0, 0), (1, 0)), "wrap", {})])
@pytest.mark.parametrize("x", [X, XI, X > 0], ids=["f32", "i64", "bool"])
def test_pad_matches_numpy(x, width, mode, kw):
    same(interp(lambda a: np.pad(a, width, mode=mode, **kw), x), np.pad(x, width, mode=mode, **kw))


def test_pad_jit_and_fb_name():
    same(fb.jit(lambda a: fb.pad(a, ((1, 0), (2, 1)), mode="reflect"))(X), np.pad(X, ((1, 0), (2, 1)), "reflect"))


def test_pad_refusals_and_numpy_errors():
    with pytest.raises(fb.UnsupportedOperation, match=r"numpy.pad mode='mean' is not supported on traced arrays; "
                                                      "fusebind has constant, edge, reflect, symmetric, wrap, empty"):
        interp(lambda a: np.pad(a, 1, mode="mean"), X)
    with pytest.raises(fb.UnsupportedOperation, match="numpy.pad reflect_type='odd' is not supported"):
        interp(lambda a: np.pad(a, 1, mode="reflect", reflect_type="odd"), X)
    with pytest.raises(fb.UnsupportedOperation, match="numpy.pad: pad widths and constant values must be known"):
        interp(lambda a, v: np.pad(a, 1, constant_values=v), X, np.float32(1))
    with pytest.raises(fb.FusebindValueError):
        interp(lambda a: np.pad(a, -1), X)
    with pytest.raises(ValueError):
        np.pad(X, -1)


@pytest.mark.parametrize("name,args,kwargs", [
    ("arange", (5,), {}), ("arange", (1.0, 2.0, 0.25), {}), ("arange", (3,), {"dtype": np.int32}),
    ("linspace", (0, 1, 7), {}), ("linspace", (0, 10, 4), {"endpoint": False, "dtype": np.int64}),
    ("zeros", ((2, 3),), {}), ("zeros", (4, np.int32), {}), ("ones", ((3,), bool), {}), ("full", ((2, 2), 7), {}),
    ("full", (3, 1.5, np.float32), {}), ("eye", (3, 4, 1), {}), ("eye", (2,), {"dtype": np.int64}),
    ("identity", (3,), {}), ("zeros_like", (XI,), {}), ("ones_like", (X,), {}), ("full_like", (XI, 2.7), {})])
def test_creation_is_numpy(name, args, kwargs):
    got = getattr(fb, name)(*args, **kwargs)
    assert isinstance(got, np.ndarray)
    same(got, getattr(np, name)(*args, **kwargs))


def test_empty_like_is_zeros_of_numpys_dtype_and_shape():
    same(fb.empty_like(XI, dtype=np.float32), np.zeros_like(XI, dtype=np.float32))


def test_creation_inside_trace_and_traced_fill():
    f = lambda a: a * fb.arange(4, dtype=np.float32) + fb.full((3, 4), a[1, 2]) + fb.zeros_like(a) + fb.eye(3, 4)
    same(interp(f, X), X * np.arange(4, dtype=np.float32) + np.full((3, 4), X[1, 2]) + np.eye(3, 4))
    same(fb.jit(lambda a: fb.ones_like(a, dtype=np.int32) + fb.full_like(a, 2))(X),
         np.ones_like(X, dtype=np.int32) + np.full_like(X, 2))


def test_creation_traced_shape_refused():
    with pytest.raises(fb.UnsupportedOperation, match=r"fusebind.full: its shape must be known when tracing"):
        interp(lambda a: fb.full((a.shape[0], a[0, 0]), 1.0), X)
    with pytest.raises(fb.UnsupportedOperation, match=r"fusebind.arange: its start, stop and step must be known"):
        interp(lambda a: fb.arange(a[0, 0]), X)
    with pytest.raises(ValueError) as want:
        np.full((3, 2), X[0])
    with pytest.raises(fb.FusebindValueError) as got:
        interp(lambda a: fb.full((3, 2), a[0]), X)
    assert str(got.value) == f"fusebind: in 't': {want.value}"
