"""Strength reduction of prim.pow by constants (compiler/strength.py), and integer pow
end to end: what is rewritten, the documented ULP bounds (docs/FASTMATH.md "pow") on a
dense sweep through the fused kernels, the specials exactly, integers exactly, and
numpy's error for a negative integer exponent, constant or traced, never a silent value."""

from __future__ import annotations

import os

import numpy as np
import pytest
from xdsl.dialects import func

import fusebind as fb
from fusebind.compiler.strength import MAX_INT_MULTIPLIES, square_and_multiply, strength_reduce
from fusebind.dialect import parse_module, prim
from fusebind.dialect.fused import RegionOp

LONG = os.environ.get("FUSEBIND_LONG", "").strip() in ("1", "true", "yes", "on")
NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}


def module_text(elem: str, n: int, exponents: list[tuple[str, str]]) -> str:
    """@f(%x: n x elem) returning x ** c for each (c literal, c tensor shape suffix). The
    pows read `max(x, x)` (== x, -0 and NaN included) so they form one region: one compile."""
    t = f"tensor<{n}x{elem}>"
    lines = [f"func.func @f(%x: {t}) -> ({', '.join([t] * len(exponents))}) {{",
             f"  %y = prim.max %x, %x : ({t}, {t}) -> {t}"]
    for k, (lit, shape) in enumerate(exponents):
        ct = f"tensor<{shape}{elem}>"
        lines.append(f"  %c{k} = prim.constant dense<{lit}> : {ct}")
        lines.append(f"  %p{k} = prim.pow %y, %c{k} : ({t}, {ct}) -> {t}")
    lines.append(f"  func.return {', '.join(f'%p{k}' for k in range(len(exponents)))} : "
                 f"{', '.join([t] * len(exponents))}")
    return "\n".join(lines + ["}"]) + "\n"


def kinds_after(text: str) -> list[str]:
    module = parse_module(text)
    strength_reduce(module)
    return [op.name for op in module.walk() if isinstance(op, prim.PrimOp)]


def test_what_is_rewritten() -> None:
    f32 = kinds_after(module_text("f32", 4, [("3.0", ""), ("4.0", ""), ("2.0", ""), ("-1.0", ""), ("1.0", ""),
                                             ("0.5", ""), ("0.5", "4x"), ("2.5", ""), ("0.0", "")]))
    assert f32 == ["prim.max",
                   "prim.cast", "prim.mul", "prim.mul", "prim.cast",  # x**3 in f64
                   "prim.cast", "prim.mul", "prim.mul", "prim.cast",  # x**4 in f64
                   "prim.mul",  # x**2
                   "prim.constant", "prim.div",  # 1/x
                   "prim.sqrt",  # a one-element 0.5: numpy's own fast path
                   "prim.constant", "prim.pow",  # a full-shaped 0.5: numpy's pow path, kept
                   "prim.constant", "prim.pow",  # 2.5
                   "prim.constant", "prim.broadcast_to"]  # ones
    f64 = kinds_after(module_text("f64", 4, [("3.0", ""), ("4.0", "1x")]))
    assert f64 == ["prim.max", "prim.mul", "prim.mul", "prim.mul", "prim.mul"]
    i32 = kinds_after(module_text("i32", 4, [("5", ""), ("1000", ""), ("2147483647", ""), ("0", "")]))
    assert i32 == ["prim.max"] + ["prim.mul"] * 3 + ["prim.mul"] * 14 + ["prim.constant", "prim.pow"] + \
        ["prim.constant", "prim.broadcast_to"]


def test_square_and_multiply_programs_compute_the_power() -> None:
    for n in range(1, 300):
        steps, result = square_and_multiply(n)  # type: ignore[misc]
        exps = [1]
        for i, j in steps:
            exps.append(exps[i] + exps[j])
        assert exps[result] == n and len(steps) <= MAX_INT_MULTIPLIES
    assert square_and_multiply(2**31 - 1) is None


def ulp_error(got: np.ndarray, ref: np.ndarray, mantissa: int) -> np.ndarray:
    """|got - ref| in ULPs of the binade of the (higher-precision) reference."""
    _, e = np.frexp(ref)
    return np.abs(got.astype(ref.dtype) - ref) / np.ldexp(np.ones_like(ref), e - mantissa)


SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, -3.0, 1e-15, -1e-15, 1e-40, -1e-40, 1e20, -1e20,
            3e38, 1.7e308, 1e-310, 1e-160, -2e-103]
# (literal, shape of the exponent constant, value); max ULP from the correctly rounded value
FLOAT_CASES = [("3.0", "", 3.0), ("4.0", "", 4.0), ("2.0", "", 2.0), ("-1.0", "", -1.0), ("0.5", "", 0.5),
               ("1.0", "", 1.0), ("0.0", "", 0.0), ("3.0", "1x", 3.0)]
BOUND = {("f32", 3.0): 0.5, ("f32", 4.0): 0.5, ("f64", 3.0): 1.5, ("f64", 4.0): 2.0}


def sweep(elem: str) -> np.ndarray:
    """Dense over the mantissas of one binade (every normal result scales from it exactly),
    log-uniform over the whole range of both signs, and the specials."""
    dt = NP[elem]
    rng = np.random.default_rng(7)
    if elem == "f32":
        step = 1 if LONG else 8
        binade = (np.arange(0, 1 << 23, step, dtype=np.uint32) | np.uint32(0x3F800000)).view(np.float32)
    else:
        bits = rng.integers(0, 1 << 52, size=(1 << 22) if LONG else (1 << 18), dtype=np.uint64)
        binade = (bits | np.uint64(0x3FF0000000000000)).view(np.float64)
    lo, hi = np.log(np.finfo(dt).smallest_subnormal), np.log(np.finfo(dt).max)
    wide = (np.exp(rng.uniform(lo, hi, 1 << 16)) * rng.choice([-1.0, 1.0], 1 << 16)).astype(dt)
    with np.errstate(over="ignore", under="ignore"):
        specials = np.array(SPECIALS).astype(dt)
    return np.concatenate([binade, wide, specials]).astype(dt)


@pytest.mark.parametrize("elem", ["f32", "f64"])
def test_float_powers_meet_the_documented_bounds_through_fused_kernels(elem: str) -> None:
    x = sweep(elem)
    compiled = fb.compile(module_text(elem, x.size, [(lit, shape) for lit, shape, _ in FLOAT_CASES]))
    with np.errstate(all="ignore"):
        outs = compiled(x)
        assert compiled.stats.arms.fused_calls == 1, compiled.explain(x)
        ref_t = np.float64 if elem == "f32" else np.longdouble
        mantissa = 24 if elem == "f32" else 53
        for (lit, shape, c), got in zip(FLOAT_CASES, outs):
            want = np.power(x, np.full((1,) if shape else (), c, NP[elem]))  # numpy, exponent as written
            assert got.dtype == want.dtype and got.shape == want.shape
            special = ~np.isfinite(want) | (want == 0)
            # NaN, ±inf and signed zeros exactly where numpy has them (overflow, underflow included)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"x ** {lit}")
            np.testing.assert_array_equal(got[special & ~np.isnan(want)], want[special & ~np.isnan(want)])
            np.testing.assert_array_equal(np.signbit(got[special]), np.signbit(want[special]), err_msg=lit)
            if (elem, c) not in BOUND:  # 0, 1, 2, -1, 0.5: numpy's own fast path, bit-identical
                np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=f"x ** {lit}")
                continue
            exact = np.power(x.astype(ref_t), ref_t(c))
            fin = ~special & np.isfinite(exact) & (np.abs(exact) >= np.finfo(NP[elem]).tiny)
            err = ulp_error(got[fin], exact[fin], mantissa)
            assert float(err.max()) <= BOUND[(elem, c)] + 1e-6, (lit, float(err.max()))


@pytest.mark.parametrize("elem", ["i32", "i64"])
def test_integer_powers_are_exact_and_wrap(elem: str) -> None:
    dt = NP[elem]
    info = np.iinfo(dt)
    x = np.concatenate([np.arange(-20, 21), [info.min, info.max, info.min + 1, 12345, -9999, 46341]]).astype(dt)
    lits = [("0", ""), ("1", ""), ("2", ""), ("3", ""), ("5", ""), ("31", ""), ("63", ""), ("1000", ""),
            (str(info.max), ""), ("7", "1x")]
    # a non-splat constant exponent stays pow: the kernel's branch-free square-and-multiply
    dense = np.arange(x.size, dtype=np.int64) % 70
    text = module_text(elem, x.size, lits + [(f"[{', '.join(map(str, dense))}]", f"{x.size}x")])
    compiled = fb.compile(text)
    outs = compiled(x)
    assert compiled.stats.arms.fused_calls == 1, compiled.explain(x)
    for (lit, _), got in zip(lits, outs[:-1]):
        want = np.power(x, dt(int(lit)))
        assert got.dtype == dt
        np.testing.assert_array_equal(got, want, err_msg=f"x ** {lit}")
    np.testing.assert_array_equal(outs[-1], np.power(x, dense.astype(dt)))


def test_negative_constant_integer_exponent_raises_numpys_error_at_the_call() -> None:
    x = np.arange(1, 5, dtype=np.int32)
    f = fb.jit(lambda v: (v + 1) ** -2)
    with pytest.raises(prim.IntegerPowerError, match=r"^Integers to negative integer powers are not allowed\. "
                                                     r"\(prim\.pow on int32 with a negative exponent"):
        f(x)
    with pytest.raises(ValueError):  # numpy's class, for existing except clauses
        f(x)


def _pows_outside_regions(optimized_text: str) -> tuple[int, int]:
    module = parse_module(optimized_text)
    outside = inside = 0
    for op in module.walk():
        if isinstance(op, prim.PowOp):
            if isinstance(op.parent_op(), func.FuncOp):
                outside += 1
            elif isinstance(op.parent_op(), RegionOp):
                inside += 1
    return outside, inside


def test_traced_integer_exponent_is_checked_and_stays_out_of_kernels() -> None:
    """`x ** y` on integers with y traced: the pow runs numpy after a check of y; everything
    around it still fuses. A negative y is numpy's error on every call, never a value."""
    f = fb.jit(lambda x, y: ((x + 1) * 2) ** y + 3)
    x = np.arange(-4, 8, dtype=np.int32).reshape(3, 4)
    y = np.arange(12, dtype=np.int64).reshape(3, 4) % 5
    np.testing.assert_array_equal(f(x, y), ((x + 1) * 2) ** y + 3)
    assert f(x, y).dtype == np.int64
    assert _pows_outside_regions(f.optimized(x, y)) == (1, 0)
    bad = y.copy()
    bad[2, 3] = -1
    for _ in range(3):  # first call (plan build) and the cached fast path
        with pytest.raises(prim.IntegerPowerError, match="^Integers to negative integer powers are not allowed"):
            f(x, bad)
    np.testing.assert_array_equal(f(x, y), ((x + 1) * 2) ** y + 3)


def test_a_hand_written_region_with_a_traced_integer_exponent_runs_arm_0_and_checks() -> None:
    """A fused.region someone wrote holding `pow` of a block argument: its fused arm cannot be
    compiled (no kernel form), so arm 0 runs, whose pow is the checking reference."""
    text = """func.func @f(%a: tensor<4xi64>, %b: tensor<4xi64>) -> tensor<4xi64> {
  %r = fused.region @mul_pow (%a, %b) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64> {
  ^bb0(%x: tensor<4xi64>, %y: tensor<4xi64>):
    %m = prim.mul %x, %x : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
    %p = prim.pow %m, %y : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
    fused.yield %p : tensor<4xi64>
  }
  func.return %r : tensor<4xi64>
}"""
    compiled = fb.compile(text)
    a = np.array([2, 3, -5, 7], np.int64)
    np.testing.assert_array_equal(compiled(a, np.array([0, 1, 2, 40], np.int64)),
                                  np.power(a * a, np.array([0, 1, 2, 40], np.int64)))
    assert compiled.stats.arms.fused_calls == 0
    with pytest.raises(prim.IntegerPowerError):
        compiled(a, np.array([0, 1, -2, 3], np.int64))


def test_issue_11_integer_pow_and_bool_max_no_longer_crash_once_fused() -> None:
    """Each raised MalformedRecipeError (fused.region does not verify) before."""
    x32 = np.arange(-3, 9, dtype=np.int32).reshape(3, 4)
    x64 = np.arange(12, dtype=np.int64).reshape(3, 4) % 4
    cases = [(lambda x: (x + 1) ** 2, (x32,)), (lambda x, y: x ** y, (x32, x64)),
             (lambda x: (x > 0).max(axis=-1), (x32,)), (lambda x: np.power(x > 0, 2) + 1, (x32,))]
    for fn, args in cases:
        got, want = fb.jit(fn)(*args), fn(*args)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype and got.shape == want.shape
    # `bool_array ** 2` is np.square in numpy (ndarray.__pow__'s fast path): int8, computed in int8
    # (issue 14's integer widths; it was refused by name before they were on)
    got, want = fb.jit(lambda x: ((x > 0) ** 2) + 1)(x32), ((x32 > 0) ** 2) + 1
    assert got.dtype == want.dtype == np.int8
    np.testing.assert_array_equal(got, want)