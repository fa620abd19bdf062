"""In-place matmul epilogues: BLAS writes the matmul output, the fused
epilogue then runs in that same buffer (the `fused.inplace` marker)."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

import fusebind as fb
from fusebind.dialect import interpret, parse_module

pytestmark = pytest.mark.usefixtures("isolated_bindings")

#: numpy reports its array data allocations to tracemalloc under this domain
NUMPY_TRACE_DOMAIN = 389047

M, K, N = 48, 32, 40
C1, C2 = math.sqrt(2.0 / math.pi), 0.044715


def _t(*shape: int) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + "f32>"


MN, MK, KN, VN = _t(M, N), _t(M, K), _t(K, N), _t(N)

BIAS_RELU = f"""
func.func @f(%a: {MK}, %b: {KN}, %bias: {VN}) -> {MN} {{
  %m = prim.matmul %a, %b : ({MK}, {KN}) -> {MN}
  %s = prim.add %m, %bias : ({MN}, {VN}) -> {MN}
  %r = prim.relu %s : {MN} -> {MN}
  func.return %r : {MN}
}}
"""

# gelu_tanh(m + bias), the catalog's bias_gelu
BIAS_GELU = f"""
func.func @f(%a: {MK}, %b: {KN}, %bias: {VN}) -> {MN} {{
  %m = prim.matmul %a, %b : ({MK}, {KN}) -> {MN}
  %x = prim.add %m, %bias : ({MN}, {VN}) -> {MN}
  %c1 = prim.constant dense<{C1}> : tensor<f32>
  %c2 = prim.constant dense<{C2}> : tensor<f32>
  %half = prim.constant dense<0.5> : tensor<f32>
  %one = prim.constant dense<1.0> : tensor<f32>
  %x2 = prim.mul %x, %x : ({MN}, {MN}) -> {MN}
  %x3 = prim.mul %x2, %x : ({MN}, {MN}) -> {MN}
  %t1 = prim.mul %c2, %x3 : (tensor<f32>, {MN}) -> {MN}
  %in = prim.add %x, %t1 : ({MN}, {MN}) -> {MN}
  %sc = prim.mul %c1, %in : (tensor<f32>, {MN}) -> {MN}
  %th = prim.tanh %sc : {MN} -> {MN}
  %hx = prim.mul %half, %x : (tensor<f32>, {MN}) -> {MN}
  %op = prim.add %one, %th : (tensor<f32>, {MN}) -> {MN}
  %r = prim.mul %hx, %op : ({MN}, {MN}) -> {MN}
  func.return %r : {MN}
}}
"""

RESIDUAL = f"""
func.func @f(%a: {MK}, %b: {KN}, %res: {MN}) -> {MN} {{
  %m = prim.matmul %a, %b : ({MK}, {KN}) -> {MN}
  %s = prim.add %m, %res : ({MN}, {MN}) -> {MN}
  %r = prim.relu %s : {MN} -> {MN}
  func.return %r : {MN}
}}
"""

# the epilogue's result is not returned: it feeds a second matmul
CHAINED = f"""
func.func @f(%a: {MK}, %b: {KN}, %bias: {VN}, %w: {_t(N, 8)}) -> {_t(M, 8)} {{
  %m = prim.matmul %a, %b : ({MK}, {KN}) -> {MN}
  %s = prim.add %m, %bias : ({MN}, {VN}) -> {MN}
  %r = prim.relu %s : {MN} -> {MN}
  %o = prim.matmul %r, %w : ({MN}, {_t(N, 8)}) -> {_t(M, 8)}
  func.return %o : {_t(M, 8)}
}}
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory):
    from fusebind.lowering import ObjectCache

    return ObjectCache(tmp_path_factory.mktemp("inplace-cache"))


def _args(text: str, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    func = next(iter(parse_module(text).ops))
    from fusebind.dialect.types import shape_of

    return [rng.standard_normal(tuple(shape_of(a.type))).astype(np.float32) for a in func.body.blocks[0].args]


def _inplace_decisions(f: fb.CompiledFunction, args: list[np.ndarray]) -> list:
    plan = f.executor.plan_for(args)
    return [d for d in plan.decisions if d.arm == "fused" and d.inplace is not None]


@pytest.mark.parametrize("text", [BIAS_RELU, BIAS_GELU, RESIDUAL], ids=["bias_relu", "bias_gelu", "residual"])
def test_inplace_epilogue_values_match_interpreter(text: str, cache) -> None:
    f = fb.compile(text, cache=cache, threads=1)
    args = _args(text, 0)
    (decision,) = _inplace_decisions(f, args)
    assert decision.inplace == (0, 0)
    assert "in place: result 0 written into operand 0's buffer" in f.explain(*args)
    for seed in (1, 2):  # the plan's buffers are reused: values must not leak between calls
        args = _args(text, seed)
        np.testing.assert_allclose(f(*args), interpret(parse_module(text), *args), rtol=2e-5, atol=2e-5)


def test_returned_result_is_fresh_per_call(cache) -> None:
    f = fb.compile(BIAS_RELU, cache=cache, threads=1)
    a1, a2 = _args(BIAS_RELU, 3), _args(BIAS_RELU, 4)
    r1 = f(*a1)
    kept = r1.copy()
    r2 = f(*a2)
    assert r1 is not r2 and not np.shares_memory(r1, r2)
    np.testing.assert_array_equal(r1, kept)  # the second call did not overwrite what the first returned
    np.testing.assert_allclose(r2, interpret(parse_module(BIAS_RELU), *a2), rtol=2e-5, atol=2e-5)


def test_epilogue_feeding_another_op_reuses_the_plan_buffer(cache) -> None:
    f = fb.compile(CHAINED, cache=cache, threads=1)
    args = _args(CHAINED, 5)
    assert [d.inplace for d in _inplace_decisions(f, args)] == [(0, 0)]
    for seed in (6, 7):
        args = _args(CHAINED, seed)
        np.testing.assert_allclose(f(*args), interpret(parse_module(CHAINED), *args), rtol=1e-4, atol=1e-4)


def _numpy_bytes(fn) -> tuple[int, int]:
    """(bytes of numpy array data still held after fn, peak during fn)."""
    tracemalloc.start()
    try:
        keep = fn()
        current = tracemalloc.take_snapshot().filter_traces([tracemalloc.DomainFilter(True, NUMPY_TRACE_DOMAIN)])
        held = sum(s.size for s in current.statistics("filename"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del keep
    return held, peak


def test_no_second_buffer_for_the_epilogue(cache) -> None:
    args = _args(BIAS_RELU, 8)
    out_bytes = M * N * 4
    fb.compile(BIAS_RELU, cache=cache, threads=1)(*args)  # compile and bind outside the measurement

    f = fb.compile(BIAS_RELU, cache=cache, threads=1)
    held, _ = _numpy_bytes(lambda: f.executor.plan_for(args))
    assert held < out_bytes  # in place: the plan keeps no matmul buffer (the call allocates the result)
    held, _ = _numpy_bytes(lambda: f(*args))
    assert out_bytes <= held < 2 * out_bytes  # one array per call: the result, which BLAS wrote first

    # control: verify mode runs arm 0 beside the fused arm, so it cannot write in place
    g = fb.compile(BIAS_RELU, cache=cache, threads=1, verify=True)
    held, _ = _numpy_bytes(lambda: g.executor.plan_for(args))
    assert held >= out_bytes
    assert _inplace_decisions(g, args) == []
    np.testing.assert_allclose(g(*args), f(*args), rtol=1e-6)


def test_marker_on_a_matmul_with_other_readers_is_not_honoured(cache) -> None:
    # a hand-written region claims in-place, but the matmul result is also returned
    text = f"""
func.func @f(%a: {MK}, %b: {KN}, %bias: {VN}) -> ({MN}, {MN}) {{
  %m = prim.matmul %a, %b : ({MK}, {KN}) -> {MN}
  %r = fused.region @bias_relu id 4 (%m, %bias) : ({MN}, {VN}) -> {MN} attributes {{fused.inplace = array<i64: 0, 0>}} {{
  ^bb0(%x: {MN}, %y: {VN}):
    %s = prim.add %x, %y : ({MN}, {VN}) -> {MN}
    %t = prim.relu %s : {MN} -> {MN}
    fused.yield %t : {MN}
  }}
  func.return %r, %m : {MN}, {MN}
}}
"""
    f = fb.compile(text, cache=cache, threads=1, optimize=False)
    args = _args(BIAS_RELU, 9)
    from fusebind.runtime.jit import JitCompiler  # bind the catalog kernel the region names
    from fusebind.compiler.optimize import WorkItem

    region = [op for op in parse_module(text).walk() if op.name == "fused.region"][0]
    JitCompiler(cache=cache).submit([WorkItem(4, "bias_relu", region.clone(), ("f32", "f32", "f32"))])
    plan = f.executor.plan_for(args)
    assert [(d.arm, d.inplace) for d in plan.decisions] == [("fused", None)]
    r, m = f(*args)
    np.testing.assert_allclose(m, args[0] @ args[1], rtol=1e-5)
    np.testing.assert_allclose(r, np.maximum(args[0] @ args[1] + args[2], 0), rtol=1e-5, atol=1e-5)
