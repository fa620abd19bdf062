"""The in-place matmul epilogue through a single-use reshape (issue 16: conv's bias, activation and
residual written into the matmul's output): conv is matmul -> reshape (N, F, *out) -> epilogue, and
the row-major reshape of the matmul's C-contiguous output is a view of the same buffer, so the
epilogue may write its result there (compiler/inplace.py `matmul_buffer_of`; the executor
allocates the matmul's output as a view of the epilogue result's buffer). Never in place when the
matmul's result or the reshape has another reader or is returned, the reshaped value is not a
matmul's, the epilogue changes dtype or broadcasts the result larger, or the shape op is not a
reshape.

The feature is on by default (`inplace.THROUGH_RESHAPE`; the region runs as its in-place kernel
variant, runtime/builder_inplace.py); one test checks that switched off, conv's epilogue is the
plain elementwise region it was, not in place."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from fusebind.api import nn
from fusebind.compiler.context import OptimizationContext
from fusebind.compiler.inplace import INPLACE_ATTR, inplace_of, matmul_inplace_regions
from fusebind.compiler.optimize import optimize_graph
from fusebind.compiler.recipes import RecipeRegistry
from fusebind.dialect import RegionOp, interpret, parse_module
from fusebind.dialect.types import shape_of

RNG = np.random.default_rng(164)

MM, V, BIAS = "tensor<8x30xf32>", "tensor<1x8x5x6xf32>", "tensor<1x8x1x1xf32>"
HEAD = (f"  %m = prim.matmul %a, %b : (tensor<8x12xf32>, tensor<12x30xf32>) -> {MM}\n"
        f"  %v = prim.reshape %m : {MM} -> {V}\n"
        f"  %bb = prim.broadcast_to %bias {{shape = [1, 8, 5, 6]}} : {BIAS} -> {V}\n")
EPILOGUE = (f"  %s = prim.add %v, %bb : ({V}, {V}) -> {V}\n"
            f"  %r = prim.relu %s : {V} -> {V}\n")


def _func(body: str, results: str, extra_args: str = "") -> str:
    return (f"func.func @f(%a: tensor<8x12xf32>, %b: tensor<12x30xf32>, %bias: {BIAS}{extra_args}) -> ({results}) {{\n"
            f"{body}}}\n")


CONV_LIKE = _func(HEAD + EPILOGUE + f"  func.return %r : {V}\n", V)
# the epilogue's result is not returned: it feeds a second matmul (a plan buffer, reused every call)
CHAINED = _func(HEAD + EPILOGUE + f"  %q = prim.reshape %r : {V} -> tensor<8x30xf32>\n"
                f"  %o = prim.matmul %q, %w : ({MM}, tensor<30x4xf32>) -> tensor<8x4xf32>\n"
                "  func.return %o : tensor<8x4xf32>\n", "tensor<8x4xf32>", ", %w: tensor<30x4xf32>")


@pytest.fixture(autouse=True)
def through_reshape(request, monkeypatch):
    """The feature as it is by default (on), except for the test of the switch."""
    from fusebind.compiler import inplace

    if request.node.name.startswith("test_switched_off"):
        monkeypatch.setattr(inplace, "THROUGH_RESHAPE", False)


def _regions(module) -> list[RegionOp]:
    return [op for op in module.walk() if isinstance(op, RegionOp)]


def _args(text: str) -> list[np.ndarray]:
    func = next(iter(parse_module(text).ops))
    return [RNG.standard_normal(tuple(shape_of(a.type))).astype(np.float32) for a in func.body.blocks[0].args]


def _optimized(text: str):
    module = parse_module(text)
    return module, optimize_graph(module, OptimizationContext.gate_all(recipes=RecipeRegistry()))


def _same_values(a, b, arrays) -> None:
    x, y = interpret(a, *arrays), interpret(b, *arrays)
    for u, v in zip(x if isinstance(x, tuple) else (x,), y if isinstance(y, tuple) else (y,)):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ the compiler marks it
def test_epilogue_through_a_reshape_is_one_region_marked_in_place() -> None:
    module, result = _optimized(CONV_LIKE)
    (region,) = _regions(result.module)
    assert region.region_name.startswith("matmul_epilogue_")
    assert [op.name for op in region.body.blocks[0].ops] == ["prim.broadcast_to", "prim.add", "prim.relu", "fused.yield"]
    k = [getattr(v.owner, "name", None) for v in region.operands].index("prim.reshape")
    assert inplace_of(region) == (k, 0)
    (d,) = result.fused()
    assert d.rule == "matmul-epilogue" and d.inplace == (k, 0)
    assert f"in place: result 0 may reuse operand {k}'s buffer" in d.detail
    block = next(iter(result.module.ops)).body.blocks[0]
    assert matmul_inplace_regions(block) == {region: (k, 0)}
    _same_values(module, result.module, _args(CONV_LIKE))


UNSOUND = {
    # the matmul's result is also returned: its buffer is not the epilogue's to overwrite
    "matmul-returned": (HEAD + EPILOGUE + f"  func.return %r, %m : {V}, {MM}\n", f"{V}, {MM}", ""),
    # the reshape is also returned
    "reshape-returned": (HEAD + EPILOGUE + f"  func.return %r, %v : {V}, {V}\n", f"{V}, {V}", ""),
    # a second reshape reads the matmul
    "second-reader": (HEAD + EPILOGUE + f"  %u = prim.reshape %m : {MM} -> tensor<240xf32>\n"
                      f"  func.return %r, %u : {V}, tensor<240xf32>\n", f"{V}, tensor<240xf32>", ""),
    # the reshaped value is an argument (the caller's array), not a matmul temporary
    "reshape-of-argument": (f"  %v = prim.reshape %x : {MM} -> {V}\n"
                            f"  %bb = prim.broadcast_to %bias {{shape = [1, 8, 5, 6]}} : {BIAS} -> {V}\n"
                            + EPILOGUE + f"  func.return %r : {V}\n", V, f", %x: {MM}"),
    # the epilogue's result is f64: not the matmul's buffer's dtype
    "dtype-change": (HEAD + EPILOGUE + f"  %c = prim.cast %r : {V} -> tensor<1x8x5x6xf64>\n"
                     "  func.return %c : tensor<1x8x5x6xf64>\n", "tensor<1x8x5x6xf64>", ""),
    # a residual broadcasts the epilogue's result larger than the matmul's
    "broadcast-larger": (HEAD + f"  %s = prim.add %v, %bb : ({V}, {V}) -> {V}\n"
                         f"  %t = prim.add %s, %res : ({V}, tensor<3x8x5x6xf32>) -> tensor<3x8x5x6xf32>\n"
                         "  %r = prim.relu %t : tensor<3x8x5x6xf32> -> tensor<3x8x5x6xf32>\n"
                         "  func.return %r : tensor<3x8x5x6xf32>\n", "tensor<3x8x5x6xf32>",
                         ", %res: tensor<3x8x5x6xf32>"),
    # a transpose is not a view in the same element order
    "transpose": (f"  %m = prim.matmul %a, %b : (tensor<8x12xf32>, tensor<12x30xf32>) -> {MM}\n"
                  f"  %v = prim.transpose %m {{perm = [1, 0]}} : {MM} -> tensor<30x8xf32>\n"
                  "  %s = prim.add %v, %c : (tensor<30x8xf32>, tensor<30x8xf32>) -> tensor<30x8xf32>\n"
                  "  %r = prim.relu %s : tensor<30x8xf32> -> tensor<30x8xf32>\n"
                  "  func.return %r : tensor<30x8xf32>\n", "tensor<30x8xf32>", ", %c: tensor<30x8xf32>"),
}


@pytest.mark.parametrize("case", sorted(UNSOUND))
def test_unsound_epilogues_through_a_reshape_are_not_marked(case: str) -> None:
    body, results, extra = UNSOUND[case]
    text = _func(body, results, extra)
    module, result = _optimized(text)
    found = _regions(result.module)
    assert found, "the epilogue is still fused"
    for region in found:
        assert inplace_of(region) is None and INPLACE_ATTR not in region.attributes
    assert all(d.inplace is None for d in result.decisions)
    _same_values(module, result.module, _args(text))


def test_a_hand_written_marker_through_a_reshape_is_rechecked() -> None:
    """The executor re-checks a marker where the region stands: a reshape of an argument, or of a
    matmul whose result is also returned, is never given to the region as its output buffer."""
    region_text = (f"  %r = fused.region @e (%v, %bb) : ({V}, {V}) -> {V} attributes {{fused.inplace = array<i64: 0, 0>}} {{\n"
                   f"  ^bb0(%p: {V}, %q: {V}):\n"
                   f"    %s = prim.add %p, %q : ({V}, {V}) -> {V}\n"
                   f"    fused.yield %s : {V}\n  }}\n")
    ok = _func(HEAD + region_text + f"  func.return %r : {V}\n", V)
    returned = _func(HEAD + region_text + f"  func.return %r, %m : {V}, {MM}\n", f"{V}, {MM}")
    argument = _func(f"  %v = prim.reshape %x : {MM} -> {V}\n"
                     f"  %bb = prim.broadcast_to %bias {{shape = [1, 8, 5, 6]}} : {BIAS} -> {V}\n"
                     + region_text + f"  func.return %r : {V}\n", V, f", %x: {MM}")
    blocks = {name: next(iter(parse_module(t).ops)).body.blocks[0]
              for name, t in (("ok", ok), ("returned", returned), ("argument", argument))}
    assert list(matmul_inplace_regions(blocks["ok"]).values()) == [(0, 0)]
    assert matmul_inplace_regions(blocks["returned"]) == {}
    assert matmul_inplace_regions(blocks["argument"]) == {}


# ------------------------------------------------------------------ the executor runs it in place
@pytest.fixture
def isolated_bindings():
    from fusebind.runtime.testing import isolated_global_state

    with isolated_global_state():
        yield


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory):
    from fusebind.lowering import ObjectCache

    return ObjectCache(tmp_path_factory.mktemp("inplace-reshape-cache"))


def _inplace(f, args) -> list[tuple[int, int]]:
    return [d.inplace for d in f.executor.plan_for(args).decisions if d.arm == "fused" and d.inplace is not None]


@pytest.mark.usefixtures("isolated_bindings")
def test_returned_epilogue_through_a_reshape_runs_in_place(cache) -> None:
    f = fb.compile(CONV_LIKE, cache=cache, threads=1)
    args = _args(CONV_LIKE)
    assert _inplace(f, args) in ([(0, 0)], [(1, 0)])
    results = []
    for _ in range(2):  # the result is fresh per call: the second call does not overwrite the first
        args = _args(CONV_LIKE)
        r = f(*args)
        np.testing.assert_allclose(r, interpret(parse_module(CONV_LIKE), *args), rtol=2e-5, atol=2e-5)
        assert r.shape == (1, 8, 5, 6) and r.dtype == np.float32 and r.flags.c_contiguous
        results.append((r, r.copy(), args))
    (r1, kept, _), (r2, _, _) = results
    assert not np.shares_memory(r1, r2)
    np.testing.assert_array_equal(r1, kept)
    out = np.full((1, 8, 5, 6), np.nan, np.float32)  # the caller's out=: the matmul writes a view of it
    args = results[1][2]
    assert f(*args, out=out) is out
    np.testing.assert_allclose(out, interpret(parse_module(CONV_LIKE), *args), rtol=2e-5, atol=2e-5)


@pytest.mark.usefixtures("isolated_bindings")
def test_epilogue_through_a_reshape_feeding_a_matmul_reuses_the_plan_buffer(cache) -> None:
    f = fb.compile(CHAINED, cache=cache, threads=1)
    args = _args(CHAINED)
    assert len(_inplace(f, args)) == 1
    for _ in range(2):
        args = _args(CHAINED)
        np.testing.assert_allclose(f(*args), interpret(parse_module(CHAINED), *args), rtol=1e-4, atol=1e-4)


@pytest.mark.usefixtures("isolated_bindings")
def test_conv_bias_relu_epilogue_is_in_place_and_matches_numpy() -> None:
    """The brief's shape: 1x64x56x56, 64 filters 3x3, pad 1; the reference is nn.conv on numpy
    arrays (eager)."""
    x = RNG.standard_normal((1, 64, 56, 56)).astype(np.float32)
    w = (RNG.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32)
    b = RNG.standard_normal(64).astype(np.float32)
    f = fb.jit(lambda x, w, b: np.maximum(nn.conv(x, w, b, pads=(1, 1, 1, 1)), 0), threads=1)
    first = f(x, w, b)
    (d,) = [d for d in f.executor(x, w, b).plan_for([x, w, b]).decisions if d.name.startswith("matmul_epilogue_")]
    assert d.arm == "fused" and d.inplace is not None and d.inplace[1] == 0
    assert f"in place: result 0 written into operand {d.inplace[0]}'s buffer (its in-place kernel variant)" \
        in f.explain(x, w, b)
    np.testing.assert_allclose(first, np.maximum(nn.conv(x, w, b, pads=(1, 1, 1, 1)), 0), rtol=1e-5, atol=1e-5)
    kept = first.copy()
    x2 = RNG.standard_normal(x.shape).astype(np.float32)
    second = f(x2, w, b)
    np.testing.assert_allclose(second, np.maximum(nn.conv(x2, w, b, pads=(1, 1, 1, 1)), 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(first, kept)
    assert first.shape == (1, 64, 56, 56) and first.dtype == np.float32


SAME_SHAPE = ("func.func @f(%a: tensor<8x12xf32>, %b: tensor<12x30xf32>, %c: tensor<30xf32>) -> tensor<8x30xf32> {\n"
              f"  %m = prim.matmul %a, %b : (tensor<8x12xf32>, tensor<12x30xf32>) -> {MM}\n"
              f"  %v = prim.reshape %m : {MM} -> {MM}\n"
              f"  %s = prim.add %v, %c : ({MM}, tensor<30xf32>) -> {MM}\n"
              f"  %r = prim.relu %s : {MM} -> {MM}\n"
              f"  func.return %r : {MM}\n}}\n")


@pytest.mark.usefixtures("isolated_bindings")
def test_reshape_to_the_same_shape_runs_in_place_into_the_callers_out(cache) -> None:
    """Whenever the operand is a reshape, the matmul writes a view of the region's output buffer,
    also when the shapes agree: the caller's out= is written by the matmul, then in place."""
    f = fb.compile(SAME_SHAPE, cache=cache, threads=1)
    args = _args(SAME_SHAPE)
    assert _inplace(f, args) == [(0, 0)]
    np.testing.assert_allclose(f(*args), interpret(parse_module(SAME_SHAPE), *args), rtol=2e-5, atol=2e-5)
    out = np.full((8, 30), np.nan, np.float32)
    assert f(*args, out=out) is out
    np.testing.assert_allclose(out, interpret(parse_module(SAME_SHAPE), *args), rtol=2e-5, atol=2e-5)


def test_on_by_default() -> None:
    from fusebind.compiler import inplace

    assert inplace.THROUGH_RESHAPE is True


def test_switched_off_the_epilogue_through_a_reshape_is_the_elementwise_region_it_was() -> None:
    from fusebind.compiler import inplace

    assert inplace.THROUGH_RESHAPE is False
    module, result = _optimized(CONV_LIKE)
    (region,) = _regions(result.module)
    assert region.region_name.startswith("ew_") and inplace_of(region) is None
    assert all(d.inplace is None for d in result.decisions)
    _same_values(module, result.module, _args(CONV_LIKE))
