"""fb.vmap (issue 13, "Calls"): fn mapped over a batch dim by batching its traced IR.

Every answer is numpy's answer of stacking fn over the batch (`np.stack([f(x[i]) ...])`): values,
dtype and shape. The batching rules (one per op fact) run through the reference interpreter, which
compiles nothing; a few programs (a batched MLP layer, a batched softmax, nested vmap, a static
flag) run eagerly and under fb.jit through compiled kernels, on shared shapes. Every error message
is checked exactly. The registry walk is the "every prim op" guarantee: an op with neither a
batching rule nor an explicit refusal fails it."""

from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np
import pytest

import fusebind as fb
from api_trace_helpers import interp
from fusebind.api import vmap_rules
from fusebind.dialect.registry import registered_ops

RNG = np.random.default_rng(13)
X = RNG.standard_normal((5, 4)).astype(np.float32)  # batch 5 of float32[4]
Y = RNG.standard_normal((5, 4)).astype(np.float32)
X3 = RNG.standard_normal((5, 3, 4)).astype(np.float32)
W = RNG.standard_normal((4, 3)).astype(np.float32)
B = RNG.standard_normal(3).astype(np.float32)
IDX = RNG.integers(-4, 4, (5, 3))  # int64 indices into a float32[4]
M = RNG.standard_normal((5, 2, 4)).astype(np.float64)
N = RNG.standard_normal((5, 4, 3)).astype(np.float64)


def close(got: Any, want: np.ndarray) -> None:
    """numpy's dtype and shape exactly; values exactly for integers and bools, to rounding for floats
    (a batched reduction may add in another order than the per-example one)."""
    got = np.asarray(got)
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    else:
        np.testing.assert_array_equal(got, want)


def stacked(f: Callable[..., Any], *args: Any, in_axes: Any = 0) -> np.ndarray:
    """numpy's answer: f per example (numpy code on numpy arrays), stacked along a new axis 0."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    n = next(np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None)
    return np.stack([f(*[a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, axes)])
                     for i in range(n)])


def gelu(x: Any) -> Any:
    return 0.5 * x * (1.0 + np.tanh(np.float32(0.7978845608) * (x + np.float32(0.044715) * x * x * x)))


def softmax(x: Any) -> Any:
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


# ---------------------------------------------------------------- the batching rules (interpreter)
# (name, per-example numpy function, arguments, in_axes): each op fact, batched and unbatched operands
RULE_CASES: list[tuple[str, Callable[..., Any], tuple[Any, ...], Any]] = [
    ("unary", lambda a: np.exp(-np.abs(a)), (X,), 0),
    ("binary-broadcast", lambda a, b: a[:, None] * b + 1.5, (X3, X), (0, 0)),
    ("binary-unbatched-operand", lambda a, b: a - b, (X3, Y[0]), (0, None)),
    ("compare-select-cast", lambda a: np.where(a > 0, a, (a * 3).astype(np.int32)), (X,), 0),
    ("division-int", lambda a: (a * 7 // 3) % 4, (IDX,), 0),
    ("reductions", lambda a: a.sum(axis=0) + a.max() - a.mean(axis=1, keepdims=True), (X3,), 0),
    ("bool-reduction", lambda a: np.any(a > 1.0, axis=-1), (X3,), 0),
    ("transpose-reshape", lambda a: a.T.reshape(2, 6)[::-1], (X3,), 0),
    ("broadcast_to", lambda a: np.broadcast_to(a, (2, 4)) + np.broadcast_to(a[:1], (3, 4))[:2], (X,), 0),
    ("slice-negative-steps", lambda a: a[::-2, 1:] * a[2:0:-1].sum(), (X3,), 0),
    ("constant", lambda a: a + np.arange(4, dtype=np.float32), (X,), 0),
    ("matmul-rows-times-matrix", lambda a: a @ W + B, (X,), 0),
    ("matmul-both-batched", lambda a, b: a @ b, (M, N), (0, 0)),
    ("matmul-unbatched-lhs", lambda a, b: a @ b, (M[0], N), (None, 0)),
    ("matmul-lhs-higher-rank", lambda a, b: a @ b, (RNG.standard_normal((5, 2, 3, 4)), N), (0, 0)),
    ("matmul-rhs-higher-rank", lambda a, b: a @ b, (M, RNG.standard_normal((5, 2, 4, 3))), (0, 0)),
    ("concat", lambda a, b: np.concatenate([a, b, a[:1]]), (X, Y[0]), (0, None)),
    ("take-x-batched", lambda a, i: np.take(a, i, axis=1), (X3, IDX[0]), (0, None)),
    ("take-idx-batched", lambda a, i: np.take(a, i, axis=1), (X3[0], IDX), (None, 0)),
    ("take-both-batched", lambda a, i: np.take(a, i, axis=1), (X3, IDX), (0, 0)),
    ("take_along-both", lambda a, i: np.take_along_axis(a, i, 0), (X, IDX), (0, 0)),
    ("take_along-idx", lambda a, i: np.take_along_axis(a, i, 0), (X[0], IDX), (None, 0)),
    ("take_along-x", lambda a, i: np.take_along_axis(a, i, 0), (X, IDX[0]), (0, None)),
    ("scatter-add-traced", lambda a, i: fb.at(a)[i].add(1.0), (X, RNG.integers(0, 4, (5, 6))), (0, 0)),
    ("scatter-set-constant", lambda a: fb.at(a)[np.array([0, 1, 1])].set(5.0), (X,), 0),
    ("put_along_axis", lambda a, i, v: fb.put_along_axis(a, i, v, 0), (X, IDX[:, :2] % 4, Y[:, :2]), (0, 0, 0)),
    # (a scatter's values broadcast to the update shape from the right: lifted as an elementwise operand)
    ("scatter-values-broadcast", lambda a, i, v: fb.at(a)[:, i].set(v), (X3, IDX[:, :2] % 4, Y[:, :1]), (0, 0, 0)),
    ("scatter-scalar-values", lambda a, i, v: fb.at(a)[i].add(v), (X, IDX % 4, Y[:, 0]),
     (0, 0, 0)),
    ("scatter-x-unbatched", lambda a, i, v: fb.at(a)[i].max(v), (X[0], IDX % 4, Y[:, :1] * 9), (None, 0, 0)),
    ("put_along-idx-unbatched", lambda a, i, v: fb.put_along_axis(a, i, v, 1), (X3, IDX[:1, :2] % 4, Y[:, 0]),
     (0, None, 0)),
    ("in_axes-1", lambda a, b: a + b, (X, Y.T.copy()), (0, 1)),
    ("in_axes-negative", lambda a: a * 2, (X3,), -1),
]


@pytest.mark.parametrize("name,f,args,in_axes", RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_batching_rules_match_numpy_stacking(name: str, f: Callable[..., Any], args: tuple[Any, ...],
                                             in_axes: Any) -> None:
    got = interp(lambda *a: fb.vmap(f, in_axes=in_axes)(*a), *args)
    close(got, stacked(f, *args, in_axes=in_axes))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_every_dtype_through_shape_ops_and_a_reduction(dtype: type) -> None:
    a = (RNG.standard_normal((3, 5, 4)) * 4).astype(dtype)
    f = lambda x: np.where(x > x.min(), x, x.max(axis=0)).T[::-1].reshape(12)  # noqa: E731
    close(interp(lambda x: fb.vmap(f, in_axes=1)(x), a), stacked(f, a, in_axes=1))


def test_user_op_batches_as_elementwise() -> None:
    import user_ops

    f = lambda a, b: user_ops.cube(a) + user_ops.hypot2(a, b)  # noqa: E731
    close(interp(lambda a, b: fb.vmap(f, in_axes=(0, None))(a, b), X, Y[0]),
          np.stack([x * x * x + (x * x + Y[0] * Y[0]) for x in X]))


def test_every_registered_op_has_a_batching_rule_or_an_explicit_refusal() -> None:
    undecided = [cls.name for cls in registered_ops() if vmap_rules.batching_rule(cls) is None]
    assert undecided == [], f"ops with neither a batching rule nor a NoBatchingRule: {undecided}"


def test_an_op_without_a_rule_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    rules = dict(vmap_rules._BY_KIND)
    del rules["matmul"]
    monkeypatch.setattr(vmap_rules, "_BY_KIND", rules)
    monkeypatch.setattr(vmap_rules, "_REFUSED", {"matmul": "a test's refusal"})
    assert repr(vmap_rules.batching_rule(fb.dialect.prim.MatmulOp)) == "NoBatchingRule(\"a test's refusal\")"
    with pytest.raises(fb.UnsupportedOperation, match=re.escape(
            "fusebind.vmap: in 'f': prim.matmul has no batching rule yet (a test's refusal), and one of its operands "
            "depends on a mapped argument; compute it per example in a Python loop and np.stack the results, or "
            "keep that operand unmapped (in_axes None)")):
        def f(a):
            return a @ W
        interp(lambda a: fb.vmap(f)(a), X)
    # an op whose operands are all unmapped needs no rule: it is the same for every example
    close(interp(lambda a, w: fb.vmap(lambda a, w: a + (w @ w.T)[0], in_axes=(0, None))(a, w), X, W),
          X + (W @ W.T)[0])


# ---------------------------------------------------------------- structure: pytrees, out_axes, statics
def test_dict_pytrees_in_and_out_with_prefix_axes() -> None:
    params = {"w": RNG.standard_normal((4, 3)).astype(np.float32), "b": X[:, :3].copy()}

    def f(p, x):
        return {"y": x @ p["w"] + p["b"], "n": np.sum(x * x)}

    def g(w, b, x):
        out = fb.vmap(f, in_axes=({"w": None, "b": 0}, 0), out_axes={"y": 1, "n": 0})({"w": w, "b": b}, x)
        assert type(out) is dict and sorted(out) == ["n", "y"]
        return out["n"], out["y"]

    got = interp(g, params["w"], params["b"], X)
    close(got[0], np.sum(X * X, axis=1))
    close(got[1], (X @ params["w"] + params["b"]).T)
    v = fb.vmap(f, in_axes=({"w": None, "b": 0}, 0), out_axes={"y": 1, "n": 0})
    assert sorted(v(params, X)) == ["n", "y"]  # eager: the same dict, of numpy arrays
    close(v(params, X)["y"], (X @ params["w"] + params["b"]).T)


def test_tuple_out_axes_and_unmapped_results() -> None:
    got = interp(lambda a: fb.vmap(lambda a: (a * 2, a.sum(), np.float32(3) * np.ones(2, np.float32), 1.0),
                                   out_axes=(1, 0, 0, None))(a), X)
    close(got[0], (X * 2).T)
    close(got[1], X.sum(axis=1))
    close(got[2], np.full((5, 2), 3, np.float32))  # the same for every example: stacking repeats it
    close(got[3], np.array(1.0))  # out_axes None: returned as it is (a Python float: weak float64)


def test_static_python_flag_steers_the_trace() -> None:
    def f(x, flag):
        return x * 2 if flag else -x

    v = fb.vmap(f, in_axes=(0, None))
    close(v(X, True), X * 2)  # eager: the unmapped Python value is passed as it is (static)
    close(v(X, False), -X)
    j = fb.jit(v, static_argnums=1)
    close(j(X, True), X * 2)
    close(j(X, False), -X)


def test_python_values_keep_their_type_when_unmapped() -> None:
    # Regression guard: True == 1 (one hash), but bool * True is bool and bool * 1 is int64
    v = fb.vmap(lambda a, n: (a > 0) * n, in_axes=(0, None))
    close(v(X, True), (X > 0) * True)
    close(v(X, 1), (X > 0) * 1)
    close(fb.vmap(lambda a, mode: a.max() if mode == "max" else a.min(), in_axes=(0, None))(X, "max"), X.max(axis=1))


def test_namedtuple_dataclass_none_and_empty_batches() -> None:
    import dataclasses
    from collections import namedtuple

    P = namedtuple("P", "w b")

    @dataclasses.dataclass
    class D:
        a: Any
        b: Any

    got = fb.vmap(lambda p, a, n: D(a * p.w, a + p.b if n is None else a), in_axes=(P(None, 0), 0, None))(
        P(Y[0], Y), X, None)
    assert type(got) is D
    close(got.a, X * Y[0])
    close(got.b, X + Y)
    close(fb.vmap(lambda a: a @ W + a.sum())(X[:0]), np.zeros((0, 3), np.float32))
    r = fb.vmap(lambda a, w: (a[:, None] * w, w), in_axes=(0, None), out_axes=(-1, None))(X, Y[0])
    close(r[0], np.moveaxis(np.stack([a[:, None] * Y[0] for a in X]), 0, -1))
    close(r[1], Y[0])


def test_keyword_arguments_are_mapped_along_axis_0() -> None:
    close(interp(lambda a, b: fb.vmap(lambda x, y: x - 2 * y, in_axes=1)(a, y=b), X.T.copy(), Y), X - 2 * Y)
    v = fb.vmap(lambda x, y, scale=2.0: x - scale * y, in_axes=1)
    close(v(X.T.copy(), y=Y), X - 2 * Y)  # eager, with a default left as its Python value
    close(v(X.T.copy(), y=Y, scale=Y), X - Y * Y)  # a keyword array is mapped along axis 0


def test_closures_captures_nested_jit_and_weak_scalars_under_jit() -> None:
    inner = fb.jit(lambda a: np.tanh(a) * 2)

    @fb.jit
    def g(x, w, s):
        # w and s are the enclosing trace's values: fn closes over w, s stays a weak Python float
        return fb.vmap(lambda a: inner(a) @ w + W[0, 0] * s + s)(x)

    got = g(X, W, 0.5)
    assert got.dtype == np.float32  # the Python scalar stayed weak: float32, as numpy's
    close(got, np.tanh(X) * 2 @ W + W[0, 0] * np.float32(0.5) + np.float32(0.5))


def test_an_enclosing_tracer_on_the_left_of_an_operator() -> None:
    # Regression: `w * a` puts its op in the graph of its first operand, the enclosing trace's; it
    # must still be batched with fn's ops (it was left in the enclosing graph reading fn's value)
    g = fb.jit(lambda x, w: fb.vmap(lambda a: w * a - np.sum(w * a))(x))
    close(g(X, Y[0]), np.stack([Y[0] * a - np.sum(Y[0] * a) for a in X]))
    # nested: the innermost function reads a tracer two traces up
    h = fb.jit(lambda x, w: fb.vmap(lambda r: fb.vmap(lambda a: w[0] * a + r.sum())(r))(x))
    close(h(X, Y[0]), np.stack([[Y[0][0] * a + r.sum() for a in r] for r in X]))
    # an inner vmap whose first argument is the enclosing trace's, its second the per-example one
    k = fb.jit(lambda x, w: fb.vmap(lambda a: fb.vmap(lambda u, v: u * v, in_axes=(None, 0))(w, a))(x))
    close(k(X, Y[0]), np.stack([np.stack([Y[0] * v for v in a]) for a in X]))


def test_vmap_of_a_jitted_function_and_jit_of_vmap_keep_their_functions() -> None:
    # Regression: functools.update_wrapper copies the wrapped object's __dict__, so fb.jit(fb.vmap(f))
    # took f itself as its function (and ran it unmapped, giving f's answer on the whole batch)
    f = lambda a: a.reshape(2, 2) * a[0]  # noqa: E731
    v = fb.vmap(f)
    assert fb.jit(v).fn is v and fb.vmap(fb.jit(f)).fn.fn is f
    close(interp(lambda a: fb.jit(v)(a), X), stacked(f, X))


def test_nested_vmap_eager_and_under_jit() -> None:
    f = lambda a, b: a * b.sum()  # noqa: E731
    want = np.stack([np.stack([X[i, j] * Y[j].sum() for j in range(4)]) for i in range(5)])
    v = fb.vmap(fb.vmap(f, in_axes=(0, 0)), in_axes=(0, None))
    close(v(X, Y[:4]), want)
    close(fb.jit(v)(X, Y[:4]), want)


# ---------------------------------------------------------------- programs through compiled kernels
def test_batched_mlp_layer_eager_and_jit() -> None:
    def layer(x):
        return fb.gelu(x @ W + B)

    want = gelu(X @ W + B)
    v = fb.vmap(layer)
    close(v(X), want)
    close(fb.jit(v)(X), want)
    close(fb.jit(lambda x: fb.vmap(layer)(x) * 2)(X), want * 2)
    # the batched trace is the hand-batched one: a single GEMM of all rows, no reshapes around it
    assert fb.jit(v).mlir(X) == fb.jit(layer).mlir(X)


def test_batched_softmax_eager_and_jit() -> None:
    v = fb.vmap(fb.softmax)
    close(v(X3), softmax(X3))
    close(fb.jit(v)(X3), softmax(X3))
    close(fb.vmap(fb.softmax, in_axes=2, out_axes=2)(X3), np.moveaxis(softmax(np.moveaxis(X3, 2, 0)), 0, 2))


def test_batched_cross_entropy_indexing_each_example_by_its_label() -> None:
    logits = RNG.standard_normal((6, 5)).astype(np.float32)
    labels = RNG.integers(0, 5, 6)

    def xent(z, label):
        m = z.max()
        return np.log(np.sum(np.exp(z - m))) + m - z[label]  # z[label]: a traced 0-d index

    v = fb.vmap(xent)
    close(v(logits, labels), np.stack([xent(z, t) for z, t in zip(logits, labels)]))
    bad = labels.copy()
    bad[2] = 7
    with pytest.raises(fb.IndexOutOfBounds, match=r"index 7 is out of bounds for axis [01] with size 5 \("):
        v(logits, bad)


def test_out_of_range_indices_raise_numpy_s_index_error() -> None:
    bad = IDX.copy()
    bad[3, 1] = 9
    f = fb.vmap(lambda a, i: np.take_along_axis(a, i, 0))
    # (checked before the call, or in the kernel, whose words name the batched op's axis: 0 or 1)
    with pytest.raises(fb.IndexOutOfBounds, match=r"index 9 is out of bounds for axis [01] with size 4 \("):
        f(X, bad)
    with pytest.raises(fb.IndexOutOfBounds, match=r"index 9 is out of bounds for axis [01] with size 4 \("):
        fb.jit(f)(X, bad)
    close(f(X, IDX), np.take_along_axis(X, IDX, 1))  # and the next call works


def test_indices_computed_in_the_enclosing_trace_are_checked_by_the_op() -> None:
    # the per-example trace's call-time check reads its index argument, which the caller computes:
    # the op then checks the indices itself (in the kernel, or its reference), numpy's IndexError
    g = fb.jit(lambda a, i, k: fb.vmap(lambda a, i: np.take_along_axis(a, i, 0))(a, (i + k) % 4))
    close(g(X, IDX, 1), np.take_along_axis(X, (IDX + 1) % 4, 1))
    h = fb.jit(lambda a, i: fb.vmap(lambda a, i: np.take_along_axis(a, i, 0))(a, i + 1))
    with pytest.raises(fb.IndexOutOfBounds, match="index 4 is out of bounds for axis 1 with size 4"):
        h(X, np.where(IDX == 3, 3, 0))


# ---------------------------------------------------------------- errors
def f2(x, y):
    return x + y


ERRORS: list[tuple[str, Callable[[], Any], type, str]] = [
    ("sizes", lambda: fb.vmap(f2)(X, X3[:4, 0]), fb.FusebindValueError,
     "fusebind.vmap: 'f2' got inconsistent sizes for array axes to be mapped:\n"
     "  * one axis had size 5: axis 0 of argument 'x' of type float32[5,4]\n"
     "  * one axis had size 4: axis 0 of argument 'y' of type float32[4,4]"),
    ("python-scalar-mapped", lambda: fb.vmap(f2)(X, 1.0), fb.UnsupportedOperation,
     "fusebind.vmap: in_axes maps the argument 'y' of 'f2' along axis 0, but it is a float, not an array (a "
     "Python value has no axis to map); give it in_axes None"),
    ("rank-0", lambda: fb.vmap(f2)(X, np.float32(1)), fb.FusebindValueError,
     "fusebind.vmap: in_axes maps the argument 'y' of 'f2' along axis 0, which needs rank at least 1, but it "
     "has rank 0 (float32[]); give it in_axes None"),
    ("axis-range", lambda: fb.vmap(f2, in_axes=(2, 0))(X, X), fb.FusebindAxisError,
     "fusebind.vmap: in_axes maps the argument 'x' of 'f2' along axis 2, which is out of range for its rank 2 "
     "(float32[5,4])"),
    ("out-axis-range", lambda: fb.vmap(f2, out_axes=-3)(X, X), fb.FusebindAxisError,
     "fusebind.vmap: out_axes -3 for the result of 'f2' is out of range for its rank 2 (mapped: float32[5,4])"),
    ("mapped-result-out_axes-None", lambda: fb.vmap(f2, out_axes=None)(X, X), fb.FusebindValueError,
     "fusebind.vmap: out_axes is None for the result of 'f2', but it depends on a mapped argument (it differs "
     "per example); give it an out axis (an int), or return it reduced over the batch"),
    ("spec-type", lambda: fb.vmap(f2, in_axes=(0, "x")), fb.UnsupportedOperation,
     "fusebind.vmap: in_axes[1] is 'x' (a str); in_axes takes an int, None, or a tuple/list/dict of them "
     "matching the structure of the arguments"),
    ("spec-bool", lambda: fb.vmap(f2, out_axes=True), fb.UnsupportedOperation,
     "fusebind.vmap: out_axes is True (a bool); out_axes takes an int, None, or a tuple/list/dict of them "
     "matching the structure of the arguments"),
    ("spec-top-dict", lambda: fb.vmap(f2, in_axes={"x": 0}), fb.FusebindValueError,
     "fusebind.vmap: in_axes is a dict; at the top it gives the positional arguments' axes, so it is an int, "
     "None, or a tuple with one entry per positional argument (a dict may appear inside it, for a dict "
     "argument)"),
    ("not-a-prefix", lambda: fb.vmap(f2, in_axes=((0, 0), 0))(X, X), fb.FusebindValueError,
     "fusebind.vmap: in_axes is not a prefix of the structure it maps: at x it gives (0, 0), but x is an "
     "array (a leaf); give an int or None there, or a tuple matching it"),
    ("dict-keys", lambda: fb.vmap(f2, in_axes=({"a": 0}, 0))({"b": X}, X), fb.FusebindValueError,
     "fusebind.vmap: in_axes is not a prefix of the structure it maps: at x it gives {'a': 0}, but x is a "
     "dict with keys ['b']; give an int or None there, or a dict matching it"),
    ("entries", lambda: fb.vmap(f2, in_axes=(0,))(X, X), fb.FusebindValueError,
     "fusebind.vmap: in_axes of 'f2' has 1 entry ((0,)) but it was called with 2 positional arguments; give "
     "one entry per positional argument (keyword arguments are mapped along axis 0)"),
    ("nothing-mapped", lambda: fb.vmap(f2, in_axes=None)(X, X), fb.FusebindValueError,
     "fusebind.vmap: 'f2' was called with no mapped argument (in_axes None maps none of its arrays), so there "
     "is no batch size; map at least one array argument (in_axes not None)"),
    ("unhashable-static", lambda: fb.vmap(f2, in_axes=(0, None))(X, {1}), fb.UnsupportedOperation,
     "fusebind.vmap: the unmapped argument 'y' of 'f2' is an unhashable set; an unmapped Python value "
     "specializes the compiled function, so it must be hashable (a tuple instead of a list), or an array"),
    ("keyword-python-value", lambda: fb.vmap(f2)(X, y=2.0), fb.UnsupportedOperation,
     "fusebind.vmap: the keyword argument 'y' of 'f2' is mapped along axis 0 (keyword arguments always are, "
     "as in JAX), but it is a float, not an array (a Python value has no axis to map); pass it positionally "
     "with in_axes None, or bind it with functools.partial"),
    ("no-array-result", lambda: fb.vmap(lambda x: None)(X), fb.UnsupportedOperation,
     "fusebind.vmap: '<lambda>' returned None, with no array in it; a mapped function must return at least "
     "one array"),
    ("not-callable", lambda: fb.vmap(3), fb.UnsupportedOperation,
     "fusebind.vmap: the function to map must be callable, got a int"),
]


@pytest.mark.parametrize("name,call,cls,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_what_was_asked(name: str, call: Callable[[], Any], cls: type, message: str) -> None:
    with pytest.raises(cls, match=f"^{re.escape(message)}$"):
        call()


def test_errors_inside_a_trace_are_the_same() -> None:
    with pytest.raises(fb.FusebindValueError, match=re.escape("fusebind.vmap: 'f2' got inconsistent sizes")):
        fb.jit(lambda a, b: fb.vmap(f2)(a, b))(X, X3[:4, 0])
    with pytest.raises(fb.FusebindValueError, match=re.escape(
            "fusebind.vmap: in_axes maps the argument 'y' of 'f2' along axis 0, which needs rank at least 1, but "
            "it has rank 0 (float64[]); give it in_axes None")):
        fb.jit(lambda a, s: fb.vmap(f2)(a, s))(X, 2.0)  # a Python scalar argument: a 0-d weak tracer


def test_a_batched_cumsum_scans_each_example() -> None:
    x = np.arange(24, dtype=np.int64).reshape(4, 2, 3) - 7
    f = fb.vmap(lambda a: (np.cumsum(a, axis=1), np.cumprod(a, axis=0)))
    want = (np.stack([np.cumsum(e, axis=1) for e in x]), np.stack([np.cumprod(e, axis=0) for e in x]))
    for g, w in zip(fb.jit(f)(x), want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
