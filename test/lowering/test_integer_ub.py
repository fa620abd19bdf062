"""The lowering's guards where LLVM has undefined behaviour and numpy does not (issue 14):
integer division and remainder by 0 and of MIN by -1 (sdiv/srem trap on x86), shifts by the
width or more or by a negative count (shl/ashr are poison), float -> int casts of NaN, inf and
out-of-range values (fptosi is poison). Each kernel holds the edge values both as a traced
operand and as constants, since LLVM folds constants by its own rules (poison in, anything out):
a guard that only works at run time would still give a third answer there. Bit for bit against
numpy's x86-64 results."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fusebind.lowering import ObjectCache

from lowering_helpers import compile_func

NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}


def _t(n: int, elem: str) -> str:
    return f"tensor<{n}x{elem}>"


def _dense(values: np.ndarray, elem: str) -> str:
    if elem[0] == "f":  # hex bit patterns: exact, and MLIR's spelling of NaN and inf
        width = 16 if elem == "f64" else 8
        bits = values.view(np.uint64 if elem == "f64" else np.uint32)
        return "dense<[" + ", ".join(f"0x{int(v):0{width}X}" for v in bits) + "]>"
    return "dense<[" + ", ".join(str(int(v)) for v in values) + "]>"


def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    bad = got != want
    assert not bad.any(), f"{what}: at {np.nonzero(bad)[0][:8]} got {got[bad][:8]} want {want[bad][:8]}"


def _pairs(elem: str) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(NP[elem])
    edges = np.array([info.min, info.min + 1, info.max, -7, -2, -1, 0, 1, 2, 7], NP[elem])
    a, b = (v.reshape(-1) for v in np.meshgrid(edges, edges))
    return a, b


@pytest.mark.parametrize("elem", ["i32", "i64"])
def test_division_family_by_zero_and_min_by_minus_one_traced_and_constant(elem: str,
                                                                          object_cache: ObjectCache) -> None:
    """floordiv, rem and fmod: x // 0 == x % 0 == fmod(x, 0) == 0, MIN // -1 == MIN, MIN % -1 ==
    fmod(MIN, -1) == 0, as traced operands and as constants the kernel folds."""
    a, b = _pairs(elem)
    T = _t(a.size, elem)
    ops = ("floordiv", "rem", "fmod")
    lines = [f"  %ca = prim.constant {_dense(a, elem)} : {T}", f"  %cb = prim.constant {_dense(b, elem)} : {T}"]
    outs = []
    for src in ("", "c"):
        for op in ops:
            lines.append(f"  %{src}{op} = prim.{op} %{src}a, %{src}b : ({T}, {T}) -> {T}")
            outs.append(f"%{src}{op}")
    types = ", ".join([T] * len(outs))
    text = (f"func.func @f(%a: {T}, %b: {T}) -> ({types}) {{\n" + "\n".join(lines)
            + f"\n  func.return {', '.join(outs)} : {types}\n}}")
    got = compile_func(text, object_cache)(a, b)
    with np.errstate(all="ignore"):
        want = [np.floor_divide(a, b), np.remainder(a, b), np.fmod(a, b)]
    for k, g in enumerate(got):
        _same(g, want[k % 3], f"{elem} {outs[k]}")


@pytest.mark.parametrize("elem", ["i32", "i64"])
def test_shifts_by_the_width_or_more_and_negative_counts_traced_and_constant(elem: str,
                                                                               object_cache: ObjectCache) -> None:
    """<< by >= the width or a negative count is 0; >> is 0 or -1 (the sign), as numpy's npy_lshift /
    npy_rshift; counts 0..70 and -3..-1 of values 0, +-1, +-5, MIN, MAX, traced and constant."""
    info = np.iinfo(NP[elem])
    xs = np.array([0, 1, -1, 5, -5, info.min, info.max], NP[elem])
    x, s = (v.reshape(-1) for v in np.meshgrid(xs, np.arange(-3, 71, dtype=NP[elem])))
    T = _t(x.size, elem)
    text = (f"func.func @f(%x: {T}, %s: {T}) -> ({T}, {T}, {T}, {T}) {{\n"
            f"  %cx = prim.constant {_dense(x, elem)} : {T}\n  %cs = prim.constant {_dense(s, elem)} : {T}\n"
            f"  %l = prim.left_shift %x, %s : ({T}, {T}) -> {T}\n  %r = prim.right_shift %x, %s : ({T}, {T}) -> {T}\n"
            f"  %cl = prim.left_shift %cx, %cs : ({T}, {T}) -> {T}\n"
            f"  %cr = prim.right_shift %cx, %cs : ({T}, {T}) -> {T}\n"
            f"  func.return %l, %r, %cl, %cr : {T}, {T}, {T}, {T}\n}}")
    got = compile_func(text, object_cache)(x, s)
    want = [np.left_shift(x, s), np.right_shift(x, s)]
    for k, name in enumerate(("<<", ">>", "constant <<", "constant >>")):
        _same(got[k], want[k % 2], f"{elem} {name}")


CAST_EDGES = [np.nan, -np.nan, np.inf, -np.inf, 3e9, -3e9, 1e19, -1e19, 1e30, -1e30, 2147483648.0, 2147483647.0,
              -2147483648.0, -2147483904.0, 9.2e18, 9.3e18, -9.3e18, 2.75, -2.75, 0.0, -0.0, -0.5]


@pytest.mark.parametrize("src", ["f32", "f64"])
def test_float_to_int_casts_of_nan_inf_and_out_of_range_are_numpy_s(src: str, object_cache: ObjectCache) -> None:
    """astype(int32/int64) of NaN, +-inf and values outside the range is INT_MIN (x86-64 cvtt*2si,
    numpy's answer on this machine), in range it truncates; traced, constant, and through a round
    trip back to float (which LLVM may otherwise fold into a trunc)."""
    c = np.array(CAST_EDGES, NP[src])
    F, I32, I64 = _t(c.size, src), _t(c.size, "i32"), _t(c.size, "i64")
    text = (f"func.func @f(%x: {F}) -> ({I32}, {I64}, {I32}, {I64}, {F}, {F}) {{\n"
            f"  %c = prim.constant {_dense(c, src)} : {F}\n"
            f"  %a = prim.cast %x : {F} -> {I32}\n  %b = prim.cast %x : {F} -> {I64}\n"
            f"  %ca = prim.cast %c : {F} -> {I32}\n  %cb = prim.cast %c : {F} -> {I64}\n"
            f"  %ra = prim.cast %a : {I32} -> {F}\n  %rb = prim.cast %b : {I64} -> {F}\n"
            f"  func.return %a, %b, %ca, %cb, %ra, %rb : {I32}, {I64}, {I32}, {I64}, {F}, {F}\n}}")
    got = compile_func(text, object_cache)(c)
    with np.errstate(invalid="ignore"):
        i32, i64 = c.astype(np.int32), c.astype(np.int64)
    want: list[Any] = [i32, i64, i32, i64, i32.astype(c.dtype), i64.astype(c.dtype)]
    assert i32[0] == np.iinfo(np.int32).min and i64[2] == np.iinfo(np.int64).min  # the machine's answer, pinned
    for k, (g, w) in enumerate(zip(got, want)):
        _same(g, w, f"{src} cast #{k}")


@pytest.mark.parametrize("to", ["i32", "i64"])
def test_float_to_int_cast_of_a_splat_constant_is_folded_to_numpy_s_answer(to: str,
                                                                           object_cache: ObjectCache) -> None:
    """A splat constant is a scalar in the kernel, which LLVM folds: fptosi of NaN / inf / 3e9 folds
    to poison and the store was dropped (the output kept its fill bytes) before the range guard."""
    lits = {"nan": "0x7FC00000", "-inf": "0xFF800000", "3e9": "3.0e9", "-2.5": "-2.5"}
    O = _t(4, to)
    body = "".join(f"  %c{k} = prim.constant dense<{lit}> : tensor<4xf32>\n"
                   f"  %r{k} = prim.cast %c{k} : tensor<4xf32> -> {O}\n" for k, lit in enumerate(lits.values()))
    types = ", ".join([O] * len(lits))
    text = (f"func.func @f(%x: tensor<4xf32>) -> ({types}) {{\n{body}"
            f"  func.return {', '.join(f'%r{k}' for k in range(len(lits)))} : {types}\n}}")
    got = compile_func(text, object_cache)(np.zeros(4, np.float32))
    for g, value in zip(got, lits):
        with np.errstate(invalid="ignore"):
            want = np.full(4, float(value), np.float32).astype(NP[to])
        _same(g, want, f"cast of a splat {value} to {to}")
