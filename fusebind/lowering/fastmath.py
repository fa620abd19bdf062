"""Vectorizable fast math: MLIR definitions of exp, expm1, log, tanh and erf
built from arith ops (plus math.fma / absf / copysign / roundeven,
which lower to LLVM intrinsics, never to libm calls; and, when asked with
``definitions(..., ldexp=True)``, one ``llvm.intr.ldexp`` in f32 exp, which is
one ``vscalefps`` on AVX-512 hosts and a libm call per lane elsewhere).

This module owns the approximations and their constants, one `Approximation`
record each in `APPROXIMATIONS` (body, measured error bound per element type), from
which `FASTMATH_FUNCTIONS` and `ULP_BOUNDS` derive; the SSA text builder and the
IEEE formats are `fastmath_text.py`'s. It emits MLIR text only: it imports neither ``mlir`` nor ``llvmlite``, and it does not decide
where the functions are called (the lowering does that, with
``func.call @__fb_exp_f32(%v) : (f32) -> f32`` inside ``linalg.generic``
bodies). The definitions are ``func.func private`` and carry the LLVM
``alwaysinline`` attribute, so LLVM's O3 inliner puts them into the kernel
loop before the loop vectorizer runs.

Error bounds (measured, see docs/FASTMATH.md and test/lowering/test_fastmath.py)
are stated in each record's ``ulps`` (``ULP_BOUNDS``). prim.sigmoid is not
here: its scalar body is 1 / (1 + exp(-x)), so it calls the fast exp. Every function propagates NaN and gets the IEEE
edge cases right (±0, ±inf, denormals, overflow, underflow).

How the approximations work (constants are derived below from exact
rationals, except the f32 minimax and erf Chebyshev coefficients, computed
offline by the documented procedures and listed literally):

* exp / expm1: ``x = n*ln2 + r`` (Cody-Waite with a two-part ln2, FMA),
  f32 exp and expm1: ``exp(r) = 1 + r + r*r*P(r)`` with a degree-4 minimax P
  (fitted offline, see ``_EXP_P_F32``; expm1(r) is ``r + r*r*P(r)``); f64: the
  Taylor series on ``|r| <= ln2/2``; then scaling by ``2**n`` (ldexp, or two steps so results
  in the denormal range round once).
* log f32: ``x = 2**e * m`` with ``m`` in ``[sqrt(1/2), sqrt(2))``, ``f = m - 1``,
  ``log1p(f) = f + f*f*Q(f)`` with a degree-8 minimax Q, no division.
  log f64: ``s = f/(2+f)``, ``log1p(f) = f - (f*f/2 - s*(f*f/2 + R(s*s)))``
  with the ``atanh`` series for ``R``. Denormal inputs are rescaled first.
* tanh: ``t = -expm1(-2|x|) / (expm1(-2|x|) + 2)``, sign restored by copysign
  (no cancellation anywhere, saturates to ±1 exactly).
* erf: Taylor series ``x*P(x*x)`` for ``|x| < ERF_SPLIT``; above it
  ``1 - exp(-x*x) * Q(|x|)`` with ``Q = erfc*exp(x*x)`` as a Chebyshev series
  (Clenshaw); ``x*x`` is split with an FMA so ``exp(-x*x)`` stays accurate.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from math import factorial

from fusebind.dialect.errors import FusebindError
from fusebind.lowering import fastmath_trig as _trig
from fusebind.lowering.fastmath_text import LN2, TWO_OVER_SQRT_PI, Body, Format, split_ln2

__all__ = [
    "APPROXIMATIONS",
    "Approximation",
    "FASTMATH_FUNCTIONS",
    "ELEMENT_TYPES",
    "ULP_BOUNDS",
    "FastMathError",
    "function_name",
    "definitions",
]

ELEMENT_TYPES: tuple[str, ...] = ("f32", "f64")


@dataclass(frozen=True)
class Approximation:
    """One fast-math function: how its body is built, and its measured error bound."""

    name: str
    body: Callable[[Body, str], str]  # writes the body on `%x` into a Body; returns the result
    # Max error in ULPs (of the correctly rounded result) per element type, over the sweep
    # of test/lowering/test_fastmath.py; see docs/FASTMATH.md for the references.
    ulps: dict[str, float]


class FastMathError(FusebindError, ValueError):
    """An unknown function or element type was asked of fastmath."""


def function_name(fn: str, elem: str) -> str:
    """Symbol of the fast-math definition of ``fn`` on ``elem``, e.g. ``__fb_exp_f32``."""
    _check(fn, elem)
    return f"__fb_{fn}_{elem}"


def definitions(needed: Iterable[tuple[str, str]], *, ldexp: bool = False) -> str:
    """MLIR text of the ``func.func private`` definitions for each (fn, elem).

    Duplicates are emitted once, in a stable (sorted) order, so the text is a
    deterministic function of the set asked for (it feeds the object cache key).
    ``ldexp=True``: f32 exp (and erf, which uses it) scale by ``2**n`` with
    ``llvm.intr.ldexp``, one ``vscalefps`` on AVX-512 hosts instead of eight integer
    and multiply ops; without AVX-512 LLVM makes it a libm call per lane, so the
    lowering asks for it only on AVX-512 hosts (``build.default_fastmath``).
    """
    wanted = sorted(set(needed))
    for fn, elem in wanted:
        if fn not in _trig.TRIG_FUNCTIONS or elem not in ELEMENT_TYPES:
            _check(fn, elem)
    return "".join(_trig.define(fn, elem, f"__fb_{fn}_{elem}", sys.modules[__name__]) if fn in _trig.TRIG_FUNCTIONS
                   else _define(fn, elem, ldexp) for fn, elem in wanted)


def has_function(fn: str, elem: str) -> bool:
    """Is there a fast-math definition of `fn` on `elem` (this module's or fastmath_trig's)?"""
    return (fn in FASTMATH_FUNCTIONS or fn in _trig.TRIG_FUNCTIONS) and elem in ELEMENT_TYPES


def _check(fn: str, elem: str) -> None:
    if fn not in FASTMATH_FUNCTIONS and fn not in _trig.TRIG_FUNCTIONS:
        raise FastMathError(
            f"fastmath: no approximation for {fn!r}; "
            f"available: {', '.join(sorted({*FASTMATH_FUNCTIONS, *_trig.TRIG_FUNCTIONS}))}"
        )
    if elem not in ELEMENT_TYPES:
        raise FastMathError(
            f"fastmath: {fn!r} has no definition for element type {elem!r}; "
            f"use one of {', '.join(ELEMENT_TYPES)} (cast integers first)"
        )


# --------------------------------------------------------------------------
# The approximations.


def _taylor_expm1_tail(fmt: Format) -> list[float]:
    """Coefficients of P in expm1(r) = r + r*r*P(r), Taylor, |r| <= ln2/2 (f64; f32 uses
    `_EXP_P_F32`, three FMAs fewer, the sweep's maxima unchanged)."""
    degree = 8 if fmt.elem == "f32" else 13  # truncation < 0.15 ULP
    return [fmt.round(Fraction(1, factorial(k))) for k in range(2, degree + 1)]


def _exp_reduce(b: Body, x: str) -> tuple[str, str]:
    """x (finite, clamped) -> (n as int, expm1(r)) with x = n*ln2 + r."""
    fmt = b.fmt
    hi, lo = split_ln2(fmt, 12)
    n_f = b.roundeven(b.mul(x, b.f(fmt.round(1 / LN2))))
    neg_n = b.neg(n_f)
    r = b.fma(neg_n, b.f(hi), x)
    r = b.fma(neg_n, b.f(lo), r)
    rr = b.mul(r, r)
    tail = list(_EXP_P_F32) if fmt.elem == "f32" else _taylor_expm1_tail(fmt)
    u = b.fma(rr, b.horner(r, tail), r)
    return b.to_int(n_f), u


def _scale(b: Body, y: str, n: str) -> str:
    """y * 2**n in two exact-or-once-rounded steps (n may exceed the normal range)."""
    n1 = b.iop("shrsi", n, b.i(1))
    n2 = b.iop("subi", n, n1)
    return b.mul(b.mul(y, b.pow2(n1)), b.pow2(n2))


# Clamp limits: beyond them the result is inf / 0 / -1 after rounding anyway.
_EXP_LIMITS = {"f32": (-105.0, 89.0), "f64": (-746.0, 710.0)}
_EXPM1_LOW = {"f32": -18.0, "f64": -38.0}


# f32 exp(r) = 1 + r + r*r*P(r) on |r| <= ln2/2 (+0.05%): P of degree 4, fitted
# offline like _LOG1P_Q_F32 (Lawson, 20000 Chebyshev nodes, relative error of
# exp(r) weighted in long double, coefficients rounded to f32): max relative
# error 3.6e-9 (0.06 of 2**-24). Two FMAs fewer than the degree-8 Taylor series.
_EXP_P_F32: tuple[float, ...] = (
    0.4999999403953552, 0.1666652113199234, 0.04166838899254799,
    0.00836874544620514, 0.0013814539415761828,
)
# Round-to-integer by adding 1.5 * 2**mant: the integer lands in the low bits.
_SHIFTER_BITS = {"f32": 0x4B400000, "f64": 0x4338000000000000}


def _clamp_keep_nan(b: Body, x: str, lo: float, hi: float) -> str:
    """min(max(x, lo), hi) that lets NaN through (select on ordered compares:
    one vmaxps / vminps each on x86, no NaN fix-up)."""
    xl = b.select(b.cmp("olt", x, b.f(lo)), b.f(lo), x)
    return b.select(b.cmp("ogt", xl, b.f(hi)), b.f(hi), xl)


def _exp_value(b: Body, x: str) -> str:
    """exp(x) for any x. f32: NaN propagates through the arithmetic (no select);
    f64: NaN gives garbage, callers select it away."""
    fmt = b.fmt
    lo, hi = _EXP_LIMITS[fmt.elem]
    if fmt.elem != "f32":
        xc = b.minnum(b.maxnum(x, b.f(lo)), b.f(hi))
        n, u = _exp_reduce(b, xc)
        return _scale(b, b.add(u, b.f(1.0)), n)
    xc = _clamp_keep_nan(b, x, lo, hi)
    shifter = struct.unpack("<f", struct.pack("<I", _SHIFTER_BITS["f32"]))[0]
    t = b.fma(xc, b.f(fmt.round(1 / LN2)), b.f(shifter))
    n_f = b.sub(t, b.f(shifter))  # round-to-nearest-even of x/ln2, exact
    # bitcast, not fptosi: a NaN gives garbage bits here, never poison
    n = b.iop("subi", b.bits(t), b.i(_SHIFTER_BITS["f32"]))
    neg_n = b.neg(n_f)
    hi_ln2, lo_ln2 = split_ln2(fmt, 12)
    r = b.fma(neg_n, b.f(hi_ln2), xc)
    r = b.fma(neg_n, b.f(lo_ln2), r)
    u = b.fma(b.mul(r, r), b.horner(r, list(_EXP_P_F32)), r)
    y = b.add(u, b.f(1.0))
    if b.ldexp:  # one vscalefps on AVX-512 (rounds a denormal result once, overflows to inf)
        return b.new(f"llvm.intr.ldexp({y}, {n}) : (f32, i32) -> f32")
    return _scale(b, y, n)


def _expm1_value(b: Body, x: str, nonpositive: bool = False) -> str:
    """expm1(x) for any non-NaN x, except that x == -0.0 may give +0.0.

    ``nonpositive``: the caller guarantees x <= 0 (tanh's -2|x|), so n <= 0 and
    the large-n path (ten ops) is not emitted.
    """
    fmt = b.fmt
    _, hi = _EXP_LIMITS[fmt.elem]
    lo = b.maxnum(x, b.f(_EXPM1_LOW[fmt.elem]))
    xc = lo if nonpositive else b.minnum(lo, b.f(hi))
    n, u = _exp_reduce(b, xc)
    # Moderate n: 2**n * (u + (1 - 2**-n)); 1 - 2**-n is exact for |n| <= mant+1.
    limit = fmt.mant + 1
    nc = n if nonpositive else b.new(f"arith.minsi {n}, {b.i(limit)} : {fmt.int_t}")
    neg_nc = b.iop("subi", b.i(0), nc)
    mid = b.add(u, b.sub(b.f(1.0), b.pow2(neg_nc)))
    mid = b.mul(mid, b.pow2(nc))
    if nonpositive:
        return mid
    # Large n: expm1 = exp - 1, the -1 is below or at one rounding of exp.
    big = _scale(b, b.add(u, b.f(1.0)), n)
    big = b.sub(big, b.f(1.0))
    is_big = b.new(f"arith.cmpi sgt, {n}, {b.i(limit)} : {fmt.int_t}")
    return b.select(is_big, big, mid)


def _body_exp(b: Body, x: str) -> str:
    if b.fmt.elem == "f32":
        return _exp_value(b, x)  # NaN propagates (same payload, sign may flip)
    return b.nan_passthrough(x, _exp_value(b, x))


def _body_expm1(b: Body, x: str) -> str:
    res = _expm1_value(b, x)
    res = b.select(b.cmp("oeq", x, b.f(0.0)), x, res)  # keeps -0.0
    return b.nan_passthrough(x, res)


def _log_series(fmt: Format) -> list[float]:
    """R(z)/z where R(z) = sum_k 2 z**k / (2k+1): log1p(f) = 2s + s*R(s*s)."""
    terms = 4 if fmt.elem == "f32" else 10  # truncation < 0.01 ULP
    return [fmt.round(Fraction(2, 2 * k + 1)) for k in range(1, terms + 1)]


# f32 log1p(f) = f + f*f*Q(f) on f in [sqrt(1/2)-1, sqrt(2)-1): Q a degree-8
# polynomial, no division. Fitted offline (docs/FASTMATH.md): Lawson's iteratively
# reweighted least squares (60 rounds) on 20000 Chebyshev nodes, minimising
# |f*f*(P(f) - Q(f))| / |log1p(f)| with Q = (log1p(f) - f)/f**2 in long double,
# coefficients then rounded to f32. Max relative error of the rounded polynomial
# 4.7e-9 (0.08 of 2**-24).
_LOG1P_Q_F32: tuple[float, ...] = (
    -0.49999988079071045, 0.33333325386047363, -0.25001585483551025,
    0.20001985132694244, -0.16609056293964386, 0.14181634783744812,
    -0.1324298083782196, 0.12905502319335938, -0.07623060792684555,
)


def _body_log(b: Body, x: str) -> str:
    fmt = b.fmt
    elem = fmt.elem
    tiny = 2.0 ** (1 - fmt.bias)
    up = fmt.mant + 2
    is_sub = b.cmp("olt", x, b.f(tiny))
    xs = b.select(is_sub, b.mul(x, b.f(2.0**up)), x)
    e_adj = b.iselect(is_sub, b.i(-up), b.i(0))
    sqrt_half_bits = (
        0x3F3504F3 if elem == "f32" else 0x3FE6A09E667F3BCD
    )  # bits of a value just below sqrt(1/2)
    ix = b.iop("subi", b.bits(xs), b.i(sqrt_half_bits))
    e = b.iop("addi", b.iop("shrsi", ix, b.i(fmt.mant)), e_adj)
    mbits = b.iop("addi", b.iop("andi", ix, b.i((1 << fmt.mant) - 1)), b.i(sqrt_half_bits))
    m = b.from_bits(mbits)
    f = b.sub(m, b.f(1.0))
    ef = b.to_float(e)
    hi, lo = split_ln2(fmt, 12)
    if elem == "f32":
        # division-free: log = e*hi + (f + e*lo + f*f*Q(f)); e*hi is exact
        q = b.horner(f, list(_LOG1P_Q_F32))
        y = b.fma(b.mul(f, f), q, b.fma(ef, b.f(lo), f))
        res = b.fma(ef, b.f(hi), y)
        # x outside (0, inf): fma(x, inf, inf) is inf for +inf, NaN for x < 0 and
        # NaN (payload kept); only ±0 needs its own select (-inf). 6 ops, not 8.
        inf = float("inf")
        special = b.select(b.cmp("oeq", x, b.f(0.0)), b.f(-inf), b.fma(x, b.f(inf), b.f(inf)))
        # 0 < x < inf (denormals included) as one unsigned compare: bits(x) - 1 < bits(max finite)
        below = b.iop("subi", b.bits(x), b.i(1))
        inside = b.new(f"arith.cmpi ult, {below}, {b.i(0x7F7FFFFF)} : i32")
        return b.select(inside, res, special)
    else:
        s = b.div(f, b.add(f, b.f(2.0)))
        z = b.mul(s, s)
        r = b.mul(z, b.horner(z, _log_series(fmt)))
        hfsq = b.mul(b.mul(f, f), b.f(0.5))
        tail = b.fma(s, b.add(hfsq, r), b.mul(ef, b.f(lo)))
        res = b.fma(ef, b.f(hi), b.sub(f, b.sub(hfsq, tail)))
    inf = float("inf")
    res = b.select(b.cmp("oeq", x, b.f(inf)), x, res)
    res = b.select(b.cmp("oeq", x, b.f(0.0)), b.f(-inf), res)
    res = b.select(b.cmp("olt", x, b.f(0.0)), b.f(float("nan")), res)
    return b.nan_passthrough(x, res)


def _body_tanh(b: Body, x: str) -> str:
    a = b.abs(x)
    em = _expm1_value(b, b.mul(a, b.f(-2.0)), nonpositive=True)
    t = b.div(b.neg(em), b.add(em, b.f(2.0)))
    return b.nan_passthrough(x, b.copysign(t, x))


# erfc(a) * exp(a*a) as a Chebyshev series in t = (a - mid) / half on
# [ERF_SPLIT, top]: interpolation at 15/35 Chebyshev nodes of values computed
# with 110-digit decimals (Taylor series of erf), truncated where the terms
# fall below 1e-9 (f32) / 2e-18 (f64). docs/FASTMATH.md shows the script.
ERF_SPLIT = 0.75
_ERF_TOP = {"f32": 4.0, "f64": 6.0}  # erf rounds to 1 above these
_ERFC_SCALED_CHEB_F32: tuple[float, ...] = (
    0.26740844800075747, -0.16971071336447066, 0.050487960316475886,
    -0.014216046008287722, 0.0038152183981291737, -0.0009811501997028411,
    0.00024281032071808202, -5.8024007986548196e-05, 1.3427480854971084e-05,
    -3.016270422651363e-06, 6.590618291740974e-07, -1.4032439688268222e-07,
    2.915846412950569e-08, -5.92102715505832e-09,
)
_ERFC_SCALED_CHEB_F64: tuple[float, ...] = (
    0.22114369487885507, -0.17832043500011177, 0.06857176475181533,
    -0.025297454744767484, 0.008993894551303934, -0.0030924816455298386,
    0.0010313713168876555, -0.0003344397765879925, 0.0001056572480164663,
    -3.2577350920383054e-05, 9.818000162189365e-06, -2.895977660483624e-06,
    8.370269635675742e-07, -2.373052215209941e-07, 6.605467052636325e-08,
    -1.8067300121238915e-08, 4.8596790992616e-09, -1.286317867546038e-09,
    3.3526764490714285e-10, -8.609769748857844e-11, 2.1796273137625508e-11,
    -5.442276522648043e-12, 1.3408741686091989e-12, -3.2613094173341645e-13,
    7.833728857308456e-14, -1.8590044138437552e-14, 4.360311181138384e-15,
    -1.0113894099376362e-15, 2.3253957356208594e-16, -5.317874484546679e-17,
    1.2544862000157293e-17, -3.2623734931853603e-18,
)


def _erf_big_chebyshev(elem: str) -> tuple[float, float, tuple[float, ...]]:
    """(split, top, Chebyshev coefficients) of erfc(a)*exp(a*a) for ``elem``."""
    coeffs = _ERFC_SCALED_CHEB_F32 if elem == "f32" else _ERFC_SCALED_CHEB_F64
    return ERF_SPLIT, _ERF_TOP[elem], coeffs


def _erf_small(fmt: Format) -> list[float]:
    """erf(x) = x * P(x*x), Taylor, for |x| < ERF_SPLIT."""
    terms = 10 if fmt.elem == "f32" else 17
    return [
        fmt.round(TWO_OVER_SQRT_PI * Fraction((-1) ** k, factorial(k) * (2 * k + 1)))
        for k in range(terms)
    ]


def _body_erf(b: Body, x: str) -> str:
    fmt = b.fmt
    a = b.abs(x)
    split, top, coeffs = _erf_big_chebyshev(fmt.elem)
    # small |x|: odd Taylor polynomial
    small = b.mul(x, b.horner(b.mul(x, x), _erf_small(fmt)))
    # large |x|: 1 - exp(-a*a) * Q(a), Q by Clenshaw on t in [-1, 1]
    ac = b.minnum(b.maxnum(a, b.f(split)), b.f(top))
    mid, half = (split + top) / 2, (top - split) / 2
    t = b.mul(b.sub(ac, b.f(mid)), b.f(fmt.round(1 / half)))
    t2 = b.add(t, t)
    bk1, bk2 = b.f(0.0), b.f(0.0)
    for c in reversed(coeffs[1:]):
        bk1, bk2 = b.add(b.fma(t2, bk1, b.f(fmt.round(c))), b.neg(bk2)), bk1
    q = b.add(b.fma(t, bk1, b.f(fmt.round(coeffs[0]))), b.neg(bk2))
    sq = b.mul(ac, ac)
    sq_lo = b.fma(ac, ac, b.neg(sq))  # ac*ac = sq + sq_lo exactly
    g = _exp_value(b, b.neg(sq))
    g = b.fma(g, b.neg(sq_lo), g)  # exp(-sq - sq_lo) ~ exp(-sq) * (1 - sq_lo)
    big = b.sub(b.f(1.0), b.mul(g, q))
    big = b.copysign(big, x)
    res = b.select(b.cmp("olt", a, b.f(split)), small, big)
    return b.nan_passthrough(x, res)


APPROXIMATIONS: dict[str, Approximation] = {a.name: a for a in (
    Approximation("exp", _body_exp, {"f32": 1.0, "f64": 1.0}),
    Approximation("expm1", _body_expm1, {"f32": 2.0, "f64": 2.0}),
    Approximation("log", _body_log, {"f32": 1.0, "f64": 1.0}),
    Approximation("tanh", _body_tanh, {"f32": 3.0, "f64": 3.0}),
    Approximation("erf", _body_erf, {"f32": 3.0, "f64": 4.0}),
)}
FASTMATH_FUNCTIONS: frozenset[str] = frozenset(APPROXIMATIONS)
ULP_BOUNDS: dict[tuple[str, str], float] = {(a.name, elem): u for a in APPROXIMATIONS.values()
                                             for elem, u in a.ulps.items()}


def _define(fn: str, elem: str, ldexp: bool = False) -> str:
    b = Body(Format(elem), ldexp)
    result = APPROXIMATIONS[fn].body(b, "%x")
    body = "\n".join(b.lines)
    return (
        f"func.func private @{function_name(fn, elem)}(%x: {elem}) -> {elem} "
        f'attributes {{llvm.linkage = #llvm.linkage<internal>, passthrough = ["alwaysinline"]}} {{\n'
        f"{body}\n    func.return {result} : {elem}\n}}\n"
    )


# numpy's other transcendentals (sin ... hypot, issue 14) are fastmath_trig's; it builds on the
# f64 helpers above, which `definitions` hands it (this module). Their names are not in FASTMATH_FUNCTIONS (the
# table of the functions `prim` ops reach through the ScalarBuilder's own methods): the math
# ops (dialect/prim_math.py) call them by their `__fb_<fn>_<elem>` symbol, and `definitions`
# serves both tables.
