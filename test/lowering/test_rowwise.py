"""Row-wise emission (fusebind/lowering/rowwise.py): regions whose reductions run
over trailing axes are one loop over rows. Values against the reference
interpreter for every shape class the planner accepts, the planner's refusals,
and the optimized LLVM IR (vectorized at 512 bits, no malloc, one division per row)."""

from __future__ import annotations

import numpy as np
import pytest

from fusebind.dialect import parse_module
from fusebind.lowering import ObjectCache, emit_linalg
from fusebind.lowering.build import default_fastmath
from fusebind.lowering.rowwise import RowPlan, plan_rows

from lowering_helpers import compile_func, reference, ulp_distance


def _t(shape: tuple[int | None, ...]) -> str:
    return "tensor<" + "".join(f"{'?' if d is None else d}x" for d in shape) + "f32>"


def softmax(r: int, c: int) -> str:
    T, R = _t((r, c)), _t((r, 1))
    return f"""func.func @softmax(%x: {T}) -> {T} {{
  %m = prim.reduce_max %x {{axes = [1], keepdims}} : {T} -> {R}
  %d = prim.sub %x, %m : ({T}, {R}) -> {T}
  %e = prim.exp %d : {T} -> {T}
  %s = prim.reduce_sum %e {{axes = [1], keepdims}} : {T} -> {R}
  %y = prim.div %e, %s : ({T}, {R}) -> {T}
  func.return %y : {T}
}}"""


def layernorm_affine(r: int, c: int) -> str:
    T, R, W, S = _t((r, c)), _t((r, 1)), _t((c,)), "tensor<f32>"
    return f"""func.func @ln(%x: {T}, %w: {W}, %b: {W}) -> {T} {{
  %eps = prim.constant dense<1.0e-05> : {S}
  %mu = prim.reduce_mean %x {{axes = [1], keepdims}} : {T} -> {R}
  %d = prim.sub %x, %mu : ({T}, {R}) -> {T}
  %d2 = prim.mul %d, %d : ({T}, {T}) -> {T}
  %var = prim.reduce_mean %d2 {{axes = [1], keepdims}} : {T} -> {R}
  %ve = prim.add %var, %eps : ({R}, {S}) -> {R}
  %rs = prim.rsqrt %ve : {R} -> {R}
  %n = prim.mul %d, %rs : ({T}, {R}) -> {T}
  %s = prim.mul %n, %w : ({T}, {W}) -> {T}
  %y = prim.add %s, %b : ({T}, {W}) -> {T}
  func.return %y : {T}
}}"""


def reduce_epilogue(r: int, c: int) -> str:
    """Prologue exp(x)*2, a sum without keepdims, epilogue log: one value per row, plus the row itself."""
    T, V, S = _t((r, c)), _t((r,)), "tensor<f32>"
    return f"""func.func @lse(%x: {T}) -> ({V}, {T}) {{
  %two = prim.constant dense<2.0> : {S}
  %e = prim.exp %x : {T} -> {T}
  %e2 = prim.mul %e, %two : ({T}, {S}) -> {T}
  %s = prim.reduce_sum %e2 {{axes = [1]}} : {T} -> {V}
  %l = prim.log %s : {V} -> {V}
  %h = prim.mul %l, %two : ({V}, {S}) -> {V}
  func.return %h, %e2 : {V}, {T}
}}"""


def rank3(a: int, b: int, c: int, axes: str, keep: bool) -> str:
    T = _t((a, b, c))
    n = len(axes.split(","))
    R = _t((a, b, 1) if n == 1 else (a, 1, 1)) if keep else _t((a, b) if n == 1 else (a,))
    kd = ", keepdims" if keep else ""
    return f"""func.func @r3(%x: {T}) -> {R} {{
  %a = prim.abs %x : {T} -> {T}
  %s = prim.reduce_max %a {{axes = [{axes}]{kd}}} : {T} -> {R}
  %y = prim.sqrt %s : {R} -> {R}
  func.return %y : {R}
}}"""


def map_reduce_reused(r: int, c: int, elem: str = "f32") -> str:
    """A row that is reduced and used again (emitted with its reduction in one loop), then
    overwritten in place by its last use: f32 x*x - mean(x*x), i32 |x| - sum(|x|)."""
    T, R = _t((r, c)).replace("f32", elem), _t((r, 1)).replace("f32", elem)
    first, red = ("prim.mul %x, %x : ({T}, {T})", "reduce_mean") if elem == "f32" else ("prim.abs %x : {T}", "reduce_sum")
    first = first.format(T=T)
    return f"""func.func @mr(%x: {T}) -> {T} {{
  %a = {first} -> {T}
  %m = prim.{red} %a {{axes = [1], keepdims}} : {T} -> {R}
  %y = prim.sub %a, %m : ({T}, {R}) -> {T}
  func.return %y : {T}
}}"""


def yielded_and_reduced(a: int, b: int, c: int) -> str:
    """The mapped row is a result itself (not overwritten), reduced over two axes without keepdims."""
    T, V = _t((a, b, c)), _t((a,))
    return f"""func.func @yr(%x: {T}) -> ({T}, {V}) {{
  %t = prim.tanh %x : {T} -> {T}
  %m = prim.reduce_max %t {{axes = [1, 2]}} : {T} -> {V}
  func.return %t, %m : {T}, {V}
}}"""


CASES = [
    ("map_reduce_inplace_f32", map_reduce_reused(5, 37), [(5, 37)], 64),
    ("map_reduce_inplace_i32", map_reduce_reused(4, 9, "i32"), [(4, 9)], 0),
    ("map_reduce_yielded_rank3", yielded_and_reduced(3, 4, 7), [(3, 4, 7)], 4),
    ("softmax_7x129", softmax(7, 129), [(7, 129)], 64),
    ("softmax_1row", softmax(1, 1000), [(1, 1000)], 64),
    ("softmax_1x1", softmax(1, 1), [(1, 1)], 0),
    ("softmax_0rows", softmax(0, 16), [(0, 16)], 0),
    ("layernorm_w_b_5x300", layernorm_affine(5, 300), [(5, 300), (300,), (300,)], 256),
    ("layernorm_odd_3x17", layernorm_affine(3, 17), [(3, 17), (17,), (17,)], 64),
    ("reduce_prologue_epilogue", reduce_epilogue(6, 33), [(6, 33)], 16),
    ("rank3_last_axis_keepdims", rank3(2, 3, 19, "2", True), [(2, 3, 19)], 0),
    ("rank3_last_axis", rank3(2, 3, 19, "2", False), [(2, 3, 19)], 0),
    ("rank3_two_axes_keepdims", rank3(4, 3, 5, "1, 2", True), [(4, 3, 5)], 0),
    ("rank3_two_axes", rank3(4, 3, 5, "1, 2", False), [(4, 3, 5)], 0),
]


def _compare(name: str, got: tuple[np.ndarray, ...], want: tuple[np.ndarray, ...], ulps: int) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, w.shape)
        if g.dtype.kind == "i":
            np.testing.assert_array_equal(g, w, err_msg=name)
            continue
        assert not np.isnan(g).any(), name
        close = np.isclose(g, w, rtol=0, atol=1e-6)
        diff = ulp_distance(g, w)
        assert (diff <= ulps)[~close].all(), f"{name}: max {diff.max(initial=0)} ulps > {ulps}"


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("name,text,shapes,ulps", CASES, ids=[c[0] for c in CASES])
def test_rowwise_matches_interpreter(name: str, text: str, shapes: list[tuple[int, ...]], ulps: int,
                                     dynamic: bool, object_cache: ObjectCache) -> None:
    kernel = compile_func(text, object_cache, dynamic=dynamic, name="rows")
    assert kernel.emitted.rowwise, f"{name}: expected the row-wise form"  # type: ignore[attr-defined]
    rng = np.random.default_rng(11)
    dtype = np.int32 if "i32" in name else np.float32
    args = [(rng.standard_normal(s) * (100 if dtype is np.int32 else 2)).astype(dtype) for s in shapes]
    want = reference(kernel.module, *args)  # type: ignore[attr-defined]
    got = kernel(*args, out_shapes=[w.shape for w in want])
    _compare(name, got, want, ulps)


def test_rowwise_equals_whole_tensor_form(object_cache: ObjectCache) -> None:
    """The two forms of one region agree (the row form only reorders the same row math)."""
    text = layernorm_affine(9, 70)
    module = parse_module(text)
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(9, 70), (70,), (70,)]]
    rows = compile_func(text, object_cache, name="rows")
    fm = default_fastmath()
    whole = emit_linalg(next(iter(module.ops)), "whole", fastmath=fm[0], fastmath_defs=fm[1], rowwise=False)
    assert not whole.rowwise and "scf.for" not in whole.text
    assert "scf.for" in rows.emitted.text  # type: ignore[attr-defined]
    from fusebind.lowering import build_object as build
    from fusebind.lowering import kernel_signature as sig
    from fusebind.runtime.dtypes import descriptor_for
    from fusebind.runtime.kernel import Kernel

    built = build(whole, cache=object_cache, key_parts={"test": "whole-form"})
    k = Kernel.from_object(built.object_code, built.symbol, signature=sig(whole.inputs, whole.outputs))
    out = np.empty((9, 70), np.float32)
    k(*(descriptor_for(a) for a in args), descriptor_for(out))
    (got,) = rows(*args)
    _compare("forms", (got,), (out,), 4)


def _plan(text: str) -> RowPlan | str:
    func = next(iter(parse_module(text).ops))
    return plan_rows(func.regions[0].blocks[0])


def test_plan_tags_and_refusals() -> None:
    plan = _plan(layernorm_affine(4, 8))
    assert isinstance(plan, RowPlan) and (plan.rank, plan.lead, plan.batch) == (2, 1, (4,))
    T, V = _t((4, 8)), _t((8,))
    elementwise = f"func.func @f(%x: {T}) -> {T} {{\n  %y = prim.exp %x : {T} -> {T}\n  func.return %y : {T}\n}}"
    assert _plan(elementwise) == "no reduction"
    leading = (f"func.func @f(%x: {T}) -> {V} {{\n  %y = prim.reduce_sum %x {{axes = [0]}} : {T} -> {V}\n"
               f"  func.return %y : {V}\n}}")
    assert _plan(leading) == "prim.reduce_sum does not reduce the trailing axes of a rank-2 value"
    everything = (f"func.func @f(%x: {T}) -> tensor<f32> {{\n  %y = prim.reduce_sum %x {{axes = [0, 1]}} : {T} -> tensor<f32>\n"
                  f"  func.return %y : tensor<f32>\n}}")
    assert "does not reduce the trailing axes" in str(_plan(everything))
    Q, W = _t((4, 4)), _t((4,))  # numpy aligns the per-row sums with the columns here
    mixed = (f"func.func @f(%x: {Q}) -> {Q} {{\n  %s = prim.reduce_sum %x {{axes = [1]}} : {Q} -> {W}\n"
             f"  %y = prim.add %x, %s : ({Q}, {W}) -> {Q}\n  func.return %y : {Q}\n}}")
    plan = _plan(mixed)
    assert plan == "prim.add mixes a per-row scalar with a row-shaped value"


def test_row_kernel_ir_is_vectorized_without_malloc() -> None:
    from fusebind.lowering.codegen import host_target, optimized_ir
    from fusebind.lowering.pipeline import run_upstream_pipeline, translate_to_llvm_ir

    fm = default_fastmath()
    func = next(iter(parse_module(softmax(64, 1024)).ops))
    emitted = emit_linalg(func, "sm", fastmath=fm[0], fastmath_defs=fm[1])
    ir = optimized_ir(translate_to_llvm_ir(run_upstream_pipeline(emitted.text)), emitted.entry)
    assert "@malloc" not in ir and "@free" not in ir  # row temporaries are on the stack
    assert ir.count("fdiv") <= 2  # one reciprocal per row, not one division per element
    if host_target().has_avx512:
        assert "<16 x float>" in ir
    else:
        pytest.skip("host has no AVX-512: the 512-bit check does not apply")


def _emitted(text: str, **kw: object) -> str:
    fm = default_fastmath()
    func = next(iter(parse_module(text).ops))
    return emit_linalg(func, "k", fastmath=fm[0], fastmath_defs=fm[1], **kw).text  # type: ignore[arg-type]


def _prefetch_ahead(text: str) -> list[str]:
    """The constant added to the row index before each prefetch (one per prefetched input)."""
    import re

    consts = dict(re.findall(r"(%idx\w+) = arith.constant (\d+) : index", text))
    return [consts[c] for c in re.findall(r"%pn\w+ = arith.addi %i\w+, (%idx\w+) : index", text)]


def test_row_loop_prefetches_the_next_rows_of_row_inputs_only() -> None:
    from fusebind.lowering.rowwise import PREFETCH_AHEAD_BYTES

    text = _emitted(softmax(64, 1024))  # 4 KiB rows
    assert text.count("memref.prefetch %in0[") == 1
    assert _prefetch_ahead(text) == [str(max(1, PREFETCH_AHEAD_BYTES // 4096))]
    assert "step %idx16 {" in text  # one prefetch per 64-byte line of f32
    short = _emitted(softmax(64, 16))  # 64-byte rows: several rows ahead
    assert _prefetch_ahead(short) == [str(-(-PREFETCH_AHEAD_BYTES // 64))]
    ln = _emitted(layernorm_affine(8, 256))  # %w and %b are the same in every row: not prefetched
    assert "memref.prefetch %in0[" in ln and "memref.prefetch %in1" not in ln and "memref.prefetch %in2" not in ln
    assert _prefetch_ahead(_emitted(softmax(8, 256), dynamic=True)) == ["1"]
    assert "memref.prefetch" not in _emitted(softmax(8, 256), strided_inputs=True)  # rows may not be contiguous
    assert "memref.prefetch" not in _emitted(softmax(1, 256))  # one row: nothing ahead


def test_row_kernel_keeps_the_prefetch_after_o3() -> None:
    from fusebind.lowering.codegen import optimized_ir
    from fusebind.lowering.pipeline import run_upstream_pipeline, translate_to_llvm_ir

    fm = default_fastmath()
    func = next(iter(parse_module(softmax(64, 1024)).ops))
    emitted = emit_linalg(func, "sm", fastmath=fm[0], fastmath_defs=fm[1])
    ir = optimized_ir(translate_to_llvm_ir(run_upstream_pipeline(emitted.text)), emitted.entry)
    assert "call void @llvm.prefetch" in ir


def test_softmax_exp_and_sum_share_one_pass_and_the_row_is_scaled_in_place() -> None:
    import re

    from fusebind.lowering.pipeline import run_upstream_pipeline

    text = _emitted(softmax(64, 1024))
    (two,) = re.findall(r"(%r\d+), %r\d+ = linalg.generic", text)  # exp block + its sum: one generic
    (loop,) = re.findall(r"(%l\d+):2 = scf.for", text)  # over the blocks of the row (accumulate.py)
    assert re.search(rf"tensor.insert_slice {two} into", text)  # each block is stored into the exp row
    assert f"outs({loop}#1 : tensor<1024xf32>)" in text  # the scale writes over the exp row
    lowered = str(run_upstream_pipeline(text))
    # No row-sized temporary: exp writes the output row, the scale rewrites it in place.
    assert "memref<1024xf32>" not in "".join(re.findall(r"memref.alloca\(\)[^\n]*", lowered))
    assert "memref.alloc(" not in lowered and "memref.alloc()" not in lowered


def test_a_reduced_row_used_only_by_its_reduction_is_not_stored() -> None:
    T, R = _t((8, 64)), _t((8, 1))
    text = _emitted(f"""func.func @f(%x: {T}) -> {R} {{
  %e = prim.exp %x : {T} -> {T}
  %s = prim.reduce_sum %e {{axes = [1], keepdims}} : {T} -> {R}
  func.return %s : {R}
}}""")
    import re

    assert not re.findall(r"%r\d+, %r\d+ = linalg.generic", text)  # nothing stored beside the sum
    assert "prim.exp" not in text and "call @__fb_exp_f32" in text  # exp is computed inside the sum
    assert not re.search(r"outs\([^)]*tensor<64xf32>", text)  # no generic writes a row


@pytest.mark.parametrize("elem", ["f32", "i32"])
def test_the_last_use_of_a_stored_row_overwrites_it(elem: str) -> None:
    import re

    text = _emitted(map_reduce_reused(4, 9, elem))
    (row,) = re.findall(r"(%r\d+), %r\d+ = linalg.generic", text)
    assert f"outs({row} : tensor<9x{elem}>)" in text
