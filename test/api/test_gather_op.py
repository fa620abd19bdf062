"""prim.gather / prim.take_along (issue 13): np.take and np.take_along_axis by traced integer
indices as real gather ops, against numpy (values, dtype, shape) through the interpreter, arm 0
(no fusion: the op's reference) and the fused arm (the gather folded into its consumer as an
index map); broadcasting, non-contiguous inputs, negative and out-of-range indices (exact
fb.IndexOutOfBounds messages), i32 / i64 indices, the five data dtypes; cross-entropy and an
embedding sum as one fused region; a gather's cost is what it reads.

Compile cost: the fused cases share shapes per dtype, so each kernel is built once per object
cache (the session fixture); the full dtype x index-dtype matrix runs under FUSEBIND_LONG=1."""

from __future__ import annotations

import os

import numpy as np
import pytest

import fusebind as fb
from fusebind.api import numpy_kernels as K
from fusebind.api.trace import trace
from fusebind.compiler.cost import MachineModel, compose_primitives_cost, compose_region_cost
from fusebind.dialect import interpret, parse_module, print_module
from fusebind.dialect.prim_gather import GatherOp, TakeAlongOp, check_range

from api_trace_helpers import same

LONG = os.environ.get("FUSEBIND_LONG", "") not in ("", "0")
RNG = np.random.default_rng(13)
DATA = {dt: (RNG.standard_normal((5, 6)) * 4).astype(dt) for dt in (np.float32, np.float64, np.int32, np.int64)}
DATA[np.bool_] = RNG.standard_normal((5, 6)) > 0
IDX = np.array([[4, -1, 0], [2, -5, 3]])  # negative ones count from the end
ALONG = np.array([[5, -6, 0, 2], [1, 1, -1, 3]])  # take_along_axis(x, ., 1) broadcasts rows: x[:2]


def _take(x, i):
    return np.take(x, i, axis=0)


def _take_math(x, i):
    y = np.take(x, i, axis=1)
    return (y * 2) if y.dtype != np.bool_ else ~y


def _along(x, i):
    return np.take_along_axis(x[:2], i, axis=1)


def _three_ways(fn, args, cache):
    """fn on args by the interpreter, arm 0 (fb.compile without fusion) and the fused arm (fb.jit)."""
    module = trace(fn, list(args), [f"a{k}" for k in range(len(args))], "f")
    interp = interpret(module, *args)
    arm0 = fb.compile(print_module(module), optimize=False)(*args)
    fused = fb.jit(fn, cache=cache)
    return {"interpreter": interp, "arm 0": arm0, "fused": fused(*args), "fused again": fused(*args)}, fused


# by default every data dtype and both index dtypes, spread over the three forms (a compile each);
# FUSEBIND_LONG=1: every form x data dtype x index dtype
_SLICE = {_take: [(np.float32, np.int64), (np.float64, np.int32), (np.bool_, np.int64)],
          _take_math: [(np.int32, np.int64), (np.float32, np.int32)],
          _along: [(np.int64, np.int64), (np.float32, np.int64), (np.bool_, np.int32)]}
CASES = [(fn, dt, it) for fn in _SLICE for dt in DATA for it in (np.int64, np.int32)
         if LONG or (dt, it) in _SLICE[fn]]


@pytest.mark.parametrize("fn, dt, it", CASES,
                         ids=[f"{f.__name__}-{np.dtype(d).name}-{np.dtype(i).name}" for f, d, i in CASES])
def test_gathers_match_numpy_on_every_arm(fn, dt, it, object_cache) -> None:
    x, i = DATA[dt], (ALONG if fn is _along else IDX).astype(it)
    want = fn(x, i)
    got, f = _three_ways(fn, (x, i), object_cache)
    for arm, g in got.items():
        same(g, want)
    assert f.stats.fused_calls == 2 and f.stats.arm0_calls == 0, f.stats


def test_take_along_broadcasts_both_ways_and_reads_non_contiguous_inputs(object_cache) -> None:
    x = np.arange(4 * 6, dtype=np.float32).reshape(6, 4).T  # (4, 6), transposed: not C-contiguous
    i = np.array([[9, 5], [9, 0], [9, -1], [9, 2]])[:, ::-2]  # (4, 1), a strided view
    rows = np.array([[3, 0, -2, 1, 1, 0]])  # (1, 6): one row of indices for every column

    def f(x, i, rows):
        return np.take_along_axis(x, i, axis=1) + np.take_along_axis(x, rows, axis=0)

    want = f(x, i, rows)
    got, jf = _three_ways(f, (x, i, rows), object_cache)
    for g in got.values():
        same(g, want)
    xb = np.arange(6, dtype=np.float32)[None, :]  # (1, 6): x broadcast over idx's rows
    ib = np.array([[0, 5], [-1, 2], [3, 3]])
    g = fb.jit(lambda x, i: np.take_along_axis(x, i, axis=1) * 1.0, cache=object_cache)
    same(g(xb, ib), np.take_along_axis(xb, ib, axis=1))
    v = DATA[np.float64][::2, ::-3]  # strided data
    same(fb.jit(_take, cache=object_cache)(v, IDX[:, :2] % 3), np.take(v, IDX[:, :2] % 3, axis=0))


@pytest.mark.parametrize("fn, bad, axis, size", [(_take, 5, 0, 5), (_take, -6, 0, 5), (_take_math, 6, 1, 6),
                                                 (_along, -7, 1, 6)])
def test_an_out_of_range_index_raises_on_every_arm(fn, bad, axis, size, object_cache) -> None:
    x = DATA[np.float32]
    i = (ALONG if fn is _along else IDX).copy()
    i[1, 1] = bad
    name = "numpy.take_along_axis" if fn is _along else "numpy.take"
    module = trace(fn, [x, i], ["a0", "a1"], "f")
    message = f"index {bad} is out of bounds for axis {axis} with size {size}"
    for run in (lambda: interpret(module, x, i), lambda: fb.compile(print_module(module), optimize=False)(x, i)):
        with pytest.raises(fb.IndexOutOfBounds) as got:
            run()
        assert str(got.value) == message
        assert isinstance(got.value, IndexError) and isinstance(got.value, fb.FusebindError)
    with pytest.raises(fb.IndexOutOfBounds) as got:
        fb.jit(fn, cache=object_cache)(x, i)
    assert str(got.value) == f"fusebind: in '{fn.__name__}': {name}: {message} (in argument #1 of '{fn.__name__}')"


def test_constant_indices_are_checked_when_tracing() -> None:
    with pytest.raises(fb.IndexOutOfBounds) as got:
        fb.jit(lambda x: np.take(x, [0, 7, 1]) * 2)(DATA[np.float32][0])
    assert str(got.value) == "fusebind: in '<lambda>': numpy.take: index 7 is out of bounds for axis 0 with size 6"
    same(check_range(np.array([[0, -5], [4, -1]], np.int32), 0, 5), np.array([[0, 0], [4, 4]]))
    with pytest.raises(fb.IndexOutOfBounds) as got:
        check_range(np.array([0, 5, -6]), 2, 5)  # the first bad one in C order
    assert str(got.value) == "index 5 is out of bounds for axis 2 with size 5"


def _computed(x, i):
    return np.take(x, i + 1, axis=0) * 2


@pytest.mark.parametrize("it", [np.int64, np.int32])
def test_computed_traced_indices_are_checked_where_they_are_read(it, object_cache) -> None:
    """Indices computed in the function: the fused kernel checks them (the error channel), arm 0
    and the interpreter by the op's reference; numpy's answer, or its IndexError on every arm."""
    x, i = DATA[np.float32], (IDX - 1).astype(it)  # in [-6, 3]: + 1 is in range
    got, f = _three_ways(_computed, (x, i), object_cache)
    for g in got.values():
        same(g, _computed(x, i))
    assert f.stats.fused_calls == 2, f.stats
    assert "prologue: gather" in f.explain(x, i)
    bad = i.copy()
    bad[0, 2] = 4  # 4 + 1 is past the end of axis 0 (size 5)
    bad[1, 0] = -7  # a later one (in C order) is not the one reported
    module = trace(_computed, [x, bad], ["a0", "a1"], "f")
    for arm, run in (("interpreter", lambda: interpret(module, x, bad)),
                     ("arm 0", lambda: fb.compile(print_module(module), optimize=False)(x, bad)),
                     ("fused", lambda: f(x, bad))):
        with pytest.raises(fb.IndexOutOfBounds) as err:
            run()
        assert "index 5 is out of bounds for axis 0 with size 5" in str(err.value), (arm, str(err.value))
    np.testing.assert_array_equal(f(x, i), _computed(x, i))  # the kernel's status is clear again


def _cross_entropy(z, labels):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    return (-np.log(np.take_along_axis(p, labels[:, None], axis=-1))).mean()


def _cross_entropy_of_log_softmax(z, labels):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    nll = -np.log(e / e.sum(axis=-1, keepdims=True))
    return np.take_along_axis(nll, labels[:, None], axis=-1).mean()


@pytest.mark.parametrize("ce", [_cross_entropy, _cross_entropy_of_log_softmax])
def test_cross_entropy_is_one_fused_region(ce, object_cache) -> None:
    z = RNG.standard_normal((16, 10)).astype(np.float32)
    labels = RNG.integers(-10, 10, 16)
    f = fb.jit(ce, cache=object_cache)
    got = f(z, labels)
    want = ce(z, labels)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-6)
    explain = f.explain(z, labels)
    assert explain.count("region @") == 1 and "chosen: fused" in explain and "prim.take_along" in explain, explain
    assert "prologue: take_along" in explain, explain
    f(z, labels)
    assert f.stats.fused_calls == 2 and f.stats.arm0_calls == 0, f.stats
    with pytest.raises(fb.IndexOutOfBounds, match=r"index 10 is out of bounds for axis 1 with size 10"):
        f(z, np.where(np.arange(16) == 3, 10, labels))


def test_gather_feeding_a_sum_and_a_lone_gather_are_fused_regions(object_cache) -> None:
    table = RNG.standard_normal((50, 8)).astype(np.float32)
    ids = np.array([3, 49, -1, 0, 7, 7])
    f = fb.jit(lambda t, i: np.take(t, i, axis=0).sum(axis=1), cache=object_cache)
    np.testing.assert_allclose(f(table, ids), np.take(table, ids, axis=0).sum(axis=1), rtol=1e-6)
    assert f(table, ids).dtype == np.float32 and f.stats.fused_calls == 2
    lone = fb.jit(_take, cache=object_cache)
    same(lone(table, ids), table[ids])
    explain = lone.explain(table, ids)
    assert explain.count("region @") == 1 and "chosen: fused" in explain, explain


def test_a_gathers_bytes_are_what_it_reads() -> None:
    """An embedding table of 50k rows read for 8 rows costs 8 rows, fused or not."""
    table = np.zeros((50_000, 64), np.float32)
    ids = np.arange(8)

    def embed(t, i):
        return np.take(t, i, axis=0) * 2.0

    module = parse_module(fb.jit(embed).optimized(table, ids))
    (region,) = [op for op in module.walk() if op.name == "fused.region"]
    machine = MachineModel.default()
    fused = compose_region_cost(region, machine)
    rows = 8 * 64 * 4
    assert fused.bytes == rows + 8 * 8 + rows  # the rows read, the indices, the result written
    ops = [op for op in region.body.blocks[0].ops if op.name.startswith("prim.")]
    (gather,) = [op for op in ops if isinstance(op, GatherOp)]
    unfused = compose_primitives_cost([gather], machine)
    assert unfused.bytes == rows + 4 * 8 * 8 + rows  # the reference checks the indices first (4 passes)
    assert unfused.bytes < table.nbytes / 100


def test_ops_verify_their_shapes_and_print_as_they_parse() -> None:
    assert GatherOp.infer_shape((5, 6, 7), (2, 3), axis=1) == (5, 2, 3, 7)
    assert GatherOp.infer_shape((5,), (), axis=0) == ()
    assert TakeAlongOp.infer_shape((1, 6), (3, 2), axis=1) == (3, 2)
    assert TakeAlongOp.infer_shape((4, 6), (1, 2), axis=1) == (4, 2)
    assert TakeAlongOp.infer_shape((None, 6), (3, 1), axis=0) == (3, 6)
    text = print_module(trace(lambda x, i: np.take_along_axis(x, i, axis=0), [DATA[np.int32], IDX[:1, :1]],
                              ["x", "i"], "f"))
    assert "prim.take_along %x, %i {axis = 0, in_bounds} : (tensor<5x6xi32>, tensor<1x1xi64>) -> tensor<1x6xi32>" \
        in text, text
    assert print_module(parse_module(text)) == text


@pytest.mark.parametrize("idx, op", [([0, 2, 4], "prim.slice"), ([4, 1], "prim.slice"), (-2, "prim.slice"),
                                     ([1, 1, 0], "prim.gather"), ([[0, 2], [4, 1]], "prim.gather")])
def test_static_indices_gather_or_slice_as_numpy_takes(idx, op) -> None:
    """A static arithmetic progression is a strided slice (no index array); other static indices
    are one prim.gather of a constant. Both give np.take's values and shape."""
    x = DATA[np.int64]
    module = trace(lambda a: np.take(a, idx, axis=0), [x], ["a"], "f")
    text = print_module(module)
    assert op in text and ({"prim.slice", "prim.gather"} - {op}).pop() not in text, text
    same(interpret(module, x), np.take(x, idx, axis=0))


@pytest.mark.parametrize("fn", [lambda a: np.pad(a, ((1, 2), (0, 1)), constant_values=7), lambda a: np.pad(a, 1),
                                lambda a: np.diag(a[0]), lambda a: np.diag(a[0], -2)])
@pytest.mark.parametrize("shape", [(3, 4), (2, 0)], ids=["full", "empty-axis"])
def test_constant_pad_and_diag_fill_their_holes_also_of_an_empty_axis(fn, shape) -> None:
    x = (np.arange(int(np.prod(shape))).reshape(shape) - 3).astype(np.int32)
    same(interpret(trace(fn, [x], ["a"], "f"), x), fn(x))


def test_an_error_can_name_the_callers_axis() -> None:
    """Advanced indexing gathers from intermediates: the message names numpy's axis (shown_axis)."""
    from fusebind.api.trace import trace_graph

    def f(x, i):
        return K.take_along(x, 0, i, "indexing", shown_axis=2) + K.gather(x, 0, np.array([1]), "indexing")

    module, graph = trace_graph(f, (DATA[np.float32], IDX[:1, :1]), ["x", "i"], "f")
    with pytest.raises(fb.IndexOutOfBounds) as got:
        graph.checks[0]([DATA[np.float32], np.full((1, 1), 9)])
    assert str(got.value) == ("fusebind: in 'f': indexing: index 9 is out of bounds for axis 2 with size 5 "
                              "(in argument #1 of 'f')")
    with pytest.raises(fb.IndexOutOfBounds) as got:
        trace_graph(lambda x: K.gather(x, 0, np.array([7]), "indexing", shown_axis=3), (DATA[np.float32],), ["x"], "g")
    assert str(got.value) == "fusebind: in 'g': indexing: index 7 is out of bounds for axis 3 with size 5"


@pytest.mark.parametrize("fn, args", [
    (lambda x, i: np.take(x, i, axis=1).sum(), (DATA[np.float32], np.array(-1))),  # a 0-d index
    (lambda b, i: np.take(b, i, axis=0).any(axis=1), (DATA[np.bool_], np.array([3, 0, -1]))),
    (lambda x, i: np.take_along_axis(x, i, axis=0).max(axis=1), (DATA[np.int32], np.array([[3, 0, 1, 2, 0, 1]]))),
], ids=["0d-index-sum", "bool-any", "take_along-max"])
def test_gathers_feeding_reductions_fuse_and_match_numpy(fn, args, object_cache) -> None:
    f = fb.jit(fn, cache=object_cache)
    got, want = f(*args), fn(*args)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert f.stats.fused_calls == 1 and f.explain(*args).count("region @") == 1


@pytest.mark.parametrize("shift, axis, concats", [(2, None, 1), (-7, None, 1), ((1, 2), (0, -1), 2), (3, 1, 1),
                                                  (6, 1, 0)])
def test_roll_is_two_slices_and_a_concat_when_it_rotates(shift, axis, concats) -> None:
    """np.roll is a rotation: x[off:] and x[:off] concatenated (no index array of the axis's
    length); a whole turn is x itself."""
    x = DATA[np.float64]
    module = trace(lambda a: np.roll(a, shift, axis), [x], ["a"], "f")
    text = print_module(module)
    assert "prim.gather" not in text and text.count("prim.concat") == concats, text
    same(interpret(module, x), np.roll(x, shift, axis))


@pytest.mark.parametrize("reps, op", [(2, "prim.concat"), ((3, 1), "prim.concat"), (9, "prim.gather")])
def test_tile_concatenates_a_few_copies_and_gathers_many(reps, op) -> None:
    x = DATA[np.int32]
    module = trace(lambda a: np.tile(a, reps), [x], ["a"], "f")
    assert op in print_module(module)
    same(interpret(module, x), np.tile(x, reps))
    flat = trace(lambda a: np.resize(a, (7, 11)), [x], ["a"], "g")
    same(interpret(flat, x), np.resize(x, (7, 11)))


def test_computed_indices_of_an_intermediate_name_the_callers_axis_on_every_arm(object_cache) -> None:
    """shown_axis travels with the op (error_axis): the kernel's check and the reference name it."""
    def f(x, i):
        return K.gather(x, 0, i + 1, "indexing", shown_axis=2) * 2

    x, bad = DATA[np.float32], np.array([0, 4])
    module = trace(f, [x, bad], ["x", "i"], "f")
    assert "error_axis = 2" in print_module(module)
    for run in (lambda: interpret(module, x, bad), lambda: fb.jit(f, cache=object_cache)(x, bad)):
        with pytest.raises(fb.IndexOutOfBounds, match="index 5 is out of bounds for axis 2 with size 5"):
            run()
