"""Advanced indexing (issue 13): integer arrays, lists, constant boolean masks and ints next to them,
with numpy's rule for where the broadcast index dims go; numpy's values, dtype and shape through
the interpreter, arm 0 and the fused arm; traced masks and bad keys are refused by name.

Compile cost: the constant keys share one input and one traced function (one kernel per arm)."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from fusebind.api.trace import trace
from fusebind.dialect import interpret, print_module

X = np.random.default_rng(7).standard_normal((5, 4, 6)).astype(np.float32)
MASK0 = np.array([True, False, True, True, False])
MASK12 = np.random.default_rng(1).random((4, 6)) > 0.5
KEYS = [
    [0, 2], ([4, -1, 0],), (slice(None), [1, 3]), ([0, 2], [1, 3]), ([0, 2], slice(None), [1, -6]),
    (Ellipsis, [0, -1]), (1, [0, 1], slice(2, 4)),  # an int next to an array is advanced: dims in place
    ([[0], [2]], [1, 3]),  # index arrays broadcast to (2, 2)
    (slice(None), [1, 3], [0, 5]), (None, [1, 2]), ([1, 2], None, [0, 1]),  # None between: dims go first
    (MASK0,), (slice(None), MASK12), (MASK0, slice(None, None, -1), 0), (np.array([], np.intp),),
    (np.array([[3, 1], [0, 4]], np.int32), slice(1, None, 2)),
]


def _all(x):
    return tuple(x[k] for k in KEYS)


def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, got.dtype, want.shape, want.dtype)
    assert np.array_equal(got, want), what


def test_constant_index_arrays_and_masks_match_numpy_on_every_arm(object_cache) -> None:
    module = trace(_all, [X], ["x"], "f")
    want = _all(X)
    arms = {"interpreter": interpret(module, X), "arm 0": fb.compile(print_module(module), optimize=False)(X),
            "fused": fb.jit(_all, cache=object_cache)(X)}
    for arm, got in arms.items():
        assert len(got) == len(want)
        for k, g, w in zip(KEYS, got, want):
            _same(g, w, f"{arm}: x[{k}]")


def test_a_non_contiguous_argument_and_a_consumer(object_cache) -> None:
    view = X.transpose(2, 0, 1)[::-1]  # (6, 5, 4), strides of both signs
    f = fb.jit(lambda v: (v[[5, 0, 2], :, [1, 1, 3]] * 2.0 + 1.0, v[:, MASK0].sum(axis=0)), cache=object_cache)
    a, b = f(view)
    _same(a, view[[5, 0, 2], :, [1, 1, 3]] * np.float32(2.0) + np.float32(1.0), "gather then math")
    np.testing.assert_allclose(b, view[:, MASK0].sum(axis=0), rtol=1e-6, atol=1e-6)
    assert b.dtype == np.float32 and b.shape == (3, 4)


def test_a_constant_mask_through_fb_constant_indexes_as_numpy() -> None:
    m = fb.constant(MASK0)
    f = fb.jit(lambda x: x[m] + 1.0)
    _same(f(X), X[MASK0] + np.float32(1.0), "x[fb.constant(mask)]")


@pytest.mark.parametrize("key, cls, msg", [
    ([5], fb.IndexOutOfBounds, "index 5 is out of bounds for axis 0 with size 5"),
    (([0, 1], [0, 1, 2]), fb.FusebindIndexError, "shape mismatch: indexing arrays could not be broadcast together"),
    (np.array([0.5]), fb.FusebindIndexError, "arrays used as indices must be of integer (or boolean) type"),
])
def test_bad_constant_keys_raise_numpys_error(key, cls, msg) -> None:
    with pytest.raises(cls, match=msg.replace("(", r"\(").replace(")", r"\)")):
        fb.jit(lambda x: x[key])(X)


def test_a_traced_mask_is_refused_pointing_to_where_and_at() -> None:
    with pytest.raises(fb.UnsupportedOperation, match=r"traced boolean mask .*fb\.where\(mask, x, other\).*"
                                                      r"fb\.at\(x\)\[mask\]\.set\(v\)"):
        fb.jit(lambda x: x[x > 0])(X)


def test_a_traced_float_index_is_refused_by_name() -> None:
    with pytest.raises(fb.UnsupportedOperation, match="must be of integer .* traced float32 array"):
        fb.jit(lambda x, i: x[i])(X, np.array([0.0], np.float32))


I = np.array([2, 0, -1, 4], np.int64)
J = np.array([5, 0, -6, 1], np.int32)


def test_traced_index_arrays_match_numpy(object_cache) -> None:
    f = fb.jit(lambda x, i, j: (x[i], x[..., j[:2]], x[i, :, j], x[i[:, None], 1:3, j[None, :]] * 2.0,
                                x[1, :, j // 2] + x[i, 0, j]), cache=object_cache)
    got = f(X, I, J)
    want = (X[I], X[..., J[:2]], X[I, :, J], X[I[:, None], 1:3, J[None, :]] * np.float32(2.0),
            X[1, :, J // 2] + X[I, 0, J])
    for k, (g, w) in enumerate(zip(got, want)):
        _same(g, w, f"result {k}")


def test_a_traced_index_out_of_range_raises_index_out_of_bounds() -> None:
    f = fb.jit(lambda x, i, j: x[i, :, j])
    with pytest.raises(fb.IndexOutOfBounds, match="index 5 is out of bounds for axis 0 with size 5"):
        f(X, np.array([5, 0]), np.array([0, 0]))
    with pytest.raises(fb.IndexOutOfBounds, match="index -7 is out of bounds for axis 2 with size 6"):
        f(X, np.array([1, 0]), np.array([0, -7]))
    _same(f(X, I, J), X[I, :, J], "a good call after the errors")


def test_computed_traced_indices_are_checked_in_the_kernel_with_numpys_axis() -> None:
    f = fb.jit(lambda x, i, j: x[i % 5, 1:, j + 1])
    _same(f(X, I, J // 2), X[I % 5, 1:, J // 2 + 1], "computed indices")
    with pytest.raises(fb.IndexOutOfBounds, match="index 6 is out of bounds for axis 2 with size 6"):
        f(X, I, J)
