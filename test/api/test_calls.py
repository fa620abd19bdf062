"""Calls as JAX users expect them (issue 13): keyword and default arguments,
static arguments, pytrees in and out, nested @fb.jit. Values against numpy,
errors exactly. One shape and dtype (float32[16]) throughout, so the cases
share compiled kernels."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import numpy as np
import pytest

import fusebind as fb

X = np.linspace(-1.0, 1.0, 16, dtype=np.float32)
Y = np.linspace(0.5, 2.0, 16, dtype=np.float32)
Z = np.full(16, 3.0, np.float32)


def _jit(fn, cache, **options):
    return fb.jit(fn, cache=cache, **options)


# ---------------------------------------------------------------- keywords and defaults (step 1)
def test_keyword_and_default_arguments_bind_as_python_does(object_cache) -> None:
    f = _jit(lambda x, y=2.0: x * y + 1, object_cache)
    np.testing.assert_allclose(f(X), X * 2.0 + 1)  # the default stays a Python value (weak)
    assert f(X).dtype == np.float32
    np.testing.assert_allclose(f(X, y=Y), X * Y + 1)
    np.testing.assert_allclose(f(y=Y, x=X), X * Y + 1)
    np.testing.assert_allclose(f(X, Y), X * Y + 1)
    np.testing.assert_allclose(f(X), X * 2.0 + 1)  # after the two-argument calls, the default again
    assert f.stats.traces == 2  # given (x) and given (x, y): positionally or by keyword is one binding


def test_which_parameter_was_given_is_part_of_the_key(object_cache) -> None:
    # Regression: with the same leaf shapes, f(x, z=...) must not reuse f(x, y=...)'s trace.
    def f(x, y=None, z=None):
        return x + y if z is None else x - z

    g = _jit(f, object_cache)
    np.testing.assert_allclose(g(X, z=Z), X - Z)
    np.testing.assert_allclose(g(X, Y), X + Y)
    np.testing.assert_allclose(g(X, y=Y), X + Y)
    np.testing.assert_allclose(g(X, None, Z), X - Z)
    # nor may plain positional arrays reuse the trace of one tuple with the same leaves
    h = _jit(lambda a, b=None: a[0] - a[1] if b is None else a + b, object_cache)
    np.testing.assert_allclose(h((X, Y)), X - Y)
    np.testing.assert_allclose(h(X, Y), X + Y)
    np.testing.assert_allclose(h((X, Y)), X - Y)


def test_keyword_only_parameters_and_wrong_calls(object_cache) -> None:
    def f(x, *, scale=1.0, shift):
        return x * scale + shift

    g = _jit(f, object_cache)
    np.testing.assert_allclose(g(X, shift=Y), X + Y)
    np.testing.assert_allclose(g(X, shift=Y, scale=3.0), X * 3.0 + Y)
    with pytest.raises(TypeError) as info:
        g(X)
    assert str(info.value) == "f(): missing a required argument: 'shift'"
    with pytest.raises(TypeError) as info:
        g(X, Y)
    assert str(info.value) == "f(): too many positional arguments"


# ---------------------------------------------------------------- static arguments (step 2)
def test_static_argnames_specialize_the_trace(object_cache) -> None:
    @fb.jit(static_argnames=("flag",), cache=object_cache)
    def f(x, flag):
        return x * 2 if flag else x - 1

    for _ in range(2):  # the second round runs the cached traces
        np.testing.assert_allclose(f(X, flag=True), X * 2)
        np.testing.assert_allclose(f(X, flag=False), X - 1)
        np.testing.assert_allclose(f(X, True), X * 2)
    assert f.stats.traces == 2
    np.testing.assert_allclose(f(X, flag=1), X * 2)  # 1 == True, but an int: its own trace
    assert f.stats.traces == 3


def test_static_argnums_and_a_static_axis(object_cache) -> None:
    f = _jit(lambda x, axis, keep: np.sum(x, axis=axis, keepdims=keep), object_cache, static_argnums=(1, 2))
    m = X.reshape(4, 4)
    for axis in (0, 1, (0, 1)):
        out = f(m, axis, True)
        np.testing.assert_allclose(out, m.sum(axis=axis, keepdims=True), rtol=1e-6)
        assert out.shape == m.sum(axis=axis, keepdims=True).shape
    np.testing.assert_allclose(f(m, -1, False), m.sum(axis=-1), rtol=1e-6)


def test_static_errors_are_clear(object_cache) -> None:
    f = _jit(lambda x, axes: x + 1, object_cache, static_argnames="axes")
    with pytest.raises(fb.UnsupportedOperation) as info:
        f(X, axes=[0, 1])
    assert str(info.value) == ("fusebind: static argument 'axes' of '<lambda>' is an unhashable list; a static "
                               "argument is part of the trace key, so pass a hashable value (a tuple instead of a "
                               "list, a frozenset instead of a set)")
    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.jit(lambda x, y: x, static_argnames=("z",))
    assert str(info.value) == ("fusebind.jit: static_argnames='z' of '<lambda>' names no parameter; its parameters "
                               "are x, y")
    with pytest.raises(fb.UnsupportedOperation) as info:
        fb.jit(lambda x, y: x, static_argnums=2)
    assert str(info.value) == ("fusebind.jit: static_argnums=2 of '<lambda>': it has 2 positional parameters (x, y)")


# ---------------------------------------------------------------- pytrees (step 3)
Pair = namedtuple("Pair", "a b")


@dataclasses.dataclass
class Params:
    w: np.ndarray
    b: np.ndarray


def test_pytrees_in_and_out(object_cache) -> None:
    f = _jit(lambda p, xs: {"s": p["w"] * xs[0] + p["b"], "t": (xs[1], None), "a": [xs[0] - 1]}, object_cache)
    out = f({"w": Y, "b": Z}, [X, Y])
    assert list(out) == ["a", "s", "t"]  # dicts come back with sorted keys, as in JAX
    np.testing.assert_allclose(out["s"], Y * X + Z)
    assert type(out["t"]) is tuple and out["t"][1] is None
    np.testing.assert_array_equal(out["t"][0], Y)
    assert type(out["a"]) is list
    np.testing.assert_allclose(out["a"][0], X - 1)
    out = f({"b": Z, "w": Y}, (X, Y))  # key order does not matter; a tuple is another structure
    np.testing.assert_allclose(out["s"], Y * X + Z)
    assert f.stats.traces == 2


def test_namedtuples_dataclasses_none_and_weak_scalar_leaves(object_cache) -> None:
    g = _jit(lambda p, q, s, nothing: Pair(p.w * q.a + s, Params(w=p.b - q.b, b=q.a)), object_cache)
    out = g(Params(w=X, b=Y), Pair(Y, Z), 2.0, None)
    assert type(out) is Pair and type(out.b) is Params
    assert out.a.dtype == np.float32  # a Python scalar leaf stays weak (NEP 50)
    np.testing.assert_allclose(out.a, X * Y + 2.0)
    np.testing.assert_allclose(out.b.w, Y - Z)
    np.testing.assert_array_equal(out.b.b, Y)


def test_a_one_tuple_or_list_result_keeps_its_structure(object_cache) -> None:
    np.testing.assert_allclose(_jit(lambda x: (x + 1,), object_cache)(X)[0], X + 1)
    out = _jit(lambda x: [x + 1, x * 2], object_cache)(X)
    assert type(out) is list and len(out) == 2
    np.testing.assert_allclose(out[1], X * 2)


def test_pytree_errors_are_clear(object_cache) -> None:
    f = _jit(lambda d: {"y": d["x"] + 1}, object_cache)
    with pytest.raises(fb.UnsupportedOperation) as info:
        f({"x": X}, out=np.empty_like(X))
    assert str(info.value) == ("fusebind: '<lambda>' returns a pytree (a dict); out= is supported only for an array "
                               "or a flat tuple of arrays: call it without out= and copy the results")
    g = _jit(lambda d: d["x"] + d["y"], object_cache)  # pytree arguments, an array result: out= works
    buf = np.empty_like(X)
    assert g({"x": X, "y": Y}, out=buf) is buf
    np.testing.assert_allclose(buf, X + Y)
    with pytest.raises(fb.UnsupportedOperation) as info:
        _jit(lambda x: {"y": None}, object_cache)(X)
    assert str(info.value) == ("fusebind: '<lambda>' returned a dict with no array in it; a jitted function must "
                               "return at least one array")
    with pytest.raises(fb.UnsupportedOperation) as info:
        f({"x": "fast"})
    assert str(info.value) == ("fusebind: argument 'd['x']' (#0) of '<lambda>' is a str; a jitted function takes "
                               "arrays, Python scalars and pytrees of them (tuples, lists, dicts, namedtuples, "
                               "dataclasses, None). Mark a Python value static, e.g. fb.jit(f, "
                               "static_argnames=('d',)), or bind it outside (functools.partial(f, d=...) or a "
                               "closure)")


# ---------------------------------------------------------------- nested jit (step 4)
def test_a_nested_jitted_function_inlines_into_the_trace(object_cache) -> None:
    @fb.jit(static_argnames=("k",), cache=object_cache)
    def inner(a, k=3.0):
        return a * k

    np.testing.assert_allclose(inner(X), X * 3.0)  # called eagerly first: it has a fast path
    outer = _jit(lambda x, y: inner(x) + inner(y, k=0.5) + 1, object_cache)
    for _ in range(2):
        np.testing.assert_allclose(outer(X, Y), X * 3.0 + Y * 0.5 + 1, rtol=1e-6)
    assert inner.stats.traces == 1 and inner.stats.calls == 1  # inlined: no nested executor ran
    assert outer.stats.fused_calls == 2  # one fused kernel for the whole thing
    np.testing.assert_allclose(inner(Y), Y * 3.0)


# ---------------------------------------------------------------- a model forward (done-means)
def test_a_model_forward_with_a_params_dict_and_a_static_flag_runs_fused(object_cache) -> None:
    @fb.jit(static_argnames=("training",), cache=object_cache)
    def forward(params, x, *, training):
        h = np.tanh(x * params["w"] + params["b"])
        if training:
            h = h * 0.5
        return {"out": h * 2.0 - 1.0, "h": h}

    def ref(params, x, training):
        h = np.tanh(x * params["w"] + params["b"])
        if training:
            h = h * np.float32(0.5)
        return {"out": h * np.float32(2.0) - np.float32(1.0), "h": h}

    params = {"w": Y, "b": Z - 2.5}
    for training in (True, False, True):
        got, want = forward(params, X, training=training), ref(params, X, training)
        assert sorted(got) == ["h", "out"]
        for k in want:
            assert got[k].dtype == want[k].dtype == np.float32
            np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6)
    assert forward.stats.traces == 2
    assert forward.stats.fused_calls == 3 and forward.stats.arm0_calls == 0


def test_a_traced_array_kept_past_its_trace_is_refused_clearly(object_cache) -> None:
    kept = []
    _jit(lambda x: kept.append(x) or x + 1, object_cache)(X)
    with pytest.raises(fb.UnsupportedOperation) as info:
        _jit(lambda x: x * 2, object_cache)(kept[0])
    assert str(info.value) == ("fusebind: argument 'x' (#0) of '<lambda>' is a traced array kept from a trace that "
                               "has ended (stored from inside a jitted function); pass numpy arrays, or return the "
                               "value from the jitted function")


def test_an_inlined_function_s_captured_array_is_read_at_every_call(object_cache) -> None:
    # Regression: the array a nested jitted function closes over is looked up in *its* closure,
    # so rebinding it between calls of the outer function is seen (not the value at trace time).
    w = Y.copy()
    inner = _jit(lambda a: a * w, object_cache)
    outer = _jit(lambda x: inner(x) + 1, object_cache)
    np.testing.assert_allclose(outer(X), X * Y + 1)
    w = Z.copy()  # noqa: F841 (read through inner's closure cell)
    np.testing.assert_allclose(outer(X), X * Z + 1)
    assert outer.stats.traces == 1


def test_nested_out_and_unsortable_dict_keys_are_refused_clearly(object_cache) -> None:
    inner = _jit(lambda a: a + 1, object_cache)
    buf = np.empty_like(X)
    with pytest.raises(fb.UnsupportedOperation) as info:
        _jit(lambda x: inner(x, out=buf) * 2, object_cache)(X)
    assert str(info.value) == ("fusebind: the jitted function '<lambda>' is called with out= inside another jitted "
                               "function, where it is inlined: return its result instead")
    with pytest.raises(fb.UnsupportedOperation) as info:
        _jit(lambda d: d[1] + d["a"], object_cache)({1: X, "a": Y})
    assert str(info.value) == ("fusebind: d is a dict whose keys cannot be sorted (1, 'a'); a pytree dict's "
                               "children are ordered by sorted key, as in JAX: use keys of one type (all str, say)")


def test_plain_positional_calls_keep_the_fast_path_and_leaves_get_readable_names(object_cache) -> None:
    f = _jit(lambda p, x=None: p["w"] * p["b"] if x is None else p * x + 1, object_cache)
    np.testing.assert_allclose(f(X, Y), X * Y + 1)
    assert f._fast is not None  # the call's arguments are the kernel's: the one-native-call route
    np.testing.assert_allclose(f({"w": X, "b": Y}), X * Y)
    assert f._fast is None  # a pytree call: its leaves are not the call's arguments
    np.testing.assert_allclose(f(X, Y), X * Y + 1)
    assert f._fast is not None
    assert "%p_b: tensor<16xf32>" in f.mlir({"w": X, "b": Y}) and "%p_w" in f.mlir({"w": X, "b": Y})
