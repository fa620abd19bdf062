"""Hypothesis properties: shape inference agrees with numpy, and random
modules survive print → parse (custom and generic) and interpret identically."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.ir import Block

from fusebind.dialect import interpret, parse_module, print_module, prim
from fusebind.dialect.types import broadcast_shapes, shape_of, tensor_type

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

dims = st.integers(min_value=1, max_value=4)
shapes = st.lists(dims, min_size=0, max_size=4).map(tuple)


def value(shape: tuple[int | None, ...], elem: str = "f32"):
    return Block(arg_types=[tensor_type(shape, elem)]).args[0]


@st.composite
def broadcastable_pair(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    out = draw(shapes)
    def derive() -> tuple[int, ...]:
        k = draw(st.integers(0, len(out)))
        return tuple(1 if draw(st.booleans()) else d for d in out[len(out) - k:])
    return derive(), derive()


@SETTINGS
@given(broadcastable_pair())
def test_binary_result_shape_is_numpy_broadcast(pair: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    a, b = pair
    op = prim.AddOp(value(a), value(b))
    op.verify()
    assert shape_of(op.results[0].type) == np.broadcast_shapes(a, b)


@SETTINGS
@given(shapes, shapes)
def test_broadcast_refusal_agrees_with_numpy(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    try:
        expected = np.broadcast_shapes(a, b)
    except ValueError:
        expected = None
    assert broadcast_shapes(a, b) == expected


@SETTINGS
@given(broadcastable_pair(), st.data())
def test_dynamic_dims_never_contradict_static_inference(pair, data: st.DataObject) -> None:
    a, b = pair
    dyn_a = tuple(None if data.draw(st.booleans()) else d for d in a)
    out = broadcast_shapes(dyn_a, b)
    static = np.broadcast_shapes(a, b)
    assert out is not None and len(out) == len(static)
    assert all(o is None or o == s for o, s in zip(out, static))


@SETTINGS
@given(st.lists(dims, min_size=1, max_size=4).map(tuple), st.data())
def test_reduction_shapes_match_numpy(shape: tuple[int, ...], data: st.DataObject) -> None:
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
    keepdims = data.draw(st.booleans())
    op = prim.ReduceSumOp(value(shape), axes=axes, keepdims=keepdims)
    op.verify()
    a = np.ones(shape, np.float32)
    expected = np.sum(a, axis=tuple(axes), keepdims=keepdims)
    assert shape_of(op.results[0].type) == expected.shape
    np.testing.assert_array_equal(op.reference(a), expected)


@SETTINGS
@given(st.lists(dims, min_size=1, max_size=4).map(tuple), st.randoms(use_true_random=False))
def test_transpose_and_reshape_match_numpy(shape: tuple[int, ...], rnd) -> None:
    perm = list(range(len(shape)))
    rnd.shuffle(perm)
    a = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    tr = prim.TransposeOp(value(shape, "i64"), perm)
    tr.verify()
    np.testing.assert_array_equal(tr.reference(a), np.transpose(a, perm))
    flat = (int(np.prod(shape)),)
    rs = prim.ReshapeOp(value(shape, "i64"), (-1,))
    rs.verify()
    assert shape_of(rs.results[0].type) == flat
    np.testing.assert_array_equal(rs.reference(a), a.reshape(-1))


UNARY = ["neg", "abs", "relu", "exp", "tanh", "sigmoid", "erf"]
BINARY = ["add", "sub", "mul", "max", "min", "floordiv", "rem", "pow"]


@st.composite
def random_module(draw: st.DrawFn) -> str:
    """A random straight-line function of elementwise ops over broadcastable f32 inputs."""
    out_shape = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple))
    n_args = draw(st.integers(1, 3))
    values: list[tuple[str, tuple[int, ...]]] = []
    params = []
    for i in range(n_args):
        k = draw(st.integers(0, len(out_shape)))
        s = tuple(1 if draw(st.booleans()) else d for d in out_shape[len(out_shape) - k:])
        params.append(f"%a{i}: {tensor_type(s, 'f32')}")
        values.append((f"%a{i}", s))
    lines = []
    for j in range(draw(st.integers(1, 8))):
        if draw(st.booleans()):
            name, s = draw(st.sampled_from(values))
            kind = draw(st.sampled_from(UNARY))
            t = tensor_type(s, "f32")
            lines.append(f"  %v{j} = prim.{kind} {name} : {t} -> {t}")
            values.append((f"%v{j}", s))
        else:
            (n1, s1), (n2, s2) = draw(st.sampled_from(values)), draw(st.sampled_from(values))
            r = np.broadcast_shapes(s1, s2)
            kind = draw(st.sampled_from(BINARY))
            lines.append(f"  %v{j} = prim.{kind} {n1}, {n2} : ({tensor_type(s1, 'f32')}, "
                         f"{tensor_type(s2, 'f32')}) -> {tensor_type(r, 'f32')}")
            values.append((f"%v{j}", r))
    last, s = values[-1]
    t = tensor_type(s, "f32")
    return (f"func.func @main({', '.join(params)}) -> {t} {{\n" + "\n".join(lines)
            + f"\n  func.return {last} : {t}\n}}\n")


@SETTINGS
@given(random_module())
def test_random_modules_round_trip_and_interpret_the_same(text: str) -> None:
    m = parse_module(text)
    custom = print_module(m)
    generic = print_module(m, generic=True)
    assert print_module(parse_module(custom)) == custom
    assert print_module(parse_module(generic)) == custom
    fn = next(iter(m.ops))
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal([int(d) for d in shape_of(t)]).astype(np.float32)
              for t in fn.function_type.inputs.data]
    np.testing.assert_array_equal(interpret(m, *arrays), interpret(parse_module(generic), *arrays))
