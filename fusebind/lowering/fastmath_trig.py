"""Vectorizable fast math for numpy's other transcendentals (issue 14): sin cos tan
arcsin arccos arctan arctan2 sinh cosh arcsinh arccosh arctanh exp2 log2 log10 log1p cbrt hypot.

Owns: one `TrigApproximation` record per function (its f64 body over `fastmath_text.Body`,
its arity, its measured ULP bound per element type: test/lowering/test_fastmath_trig.py,
docs/FASTMATH.md) and `define(fn, elem)`, the ``func.func private @__fb_<fn>_<elem>``
text. `fastmath.definitions` dispatches the names of `TRIG_FUNCTIONS` here.
Must not: import `mlir`/`llvmlite`, call libm except where a record says so (f64 sin/cos/tan).

Design (why it is written this way):
* Every body is written once, in f64. An f32 function extends its operands to f64, runs the
  f64 body and rounds once (``arith.truncf``): the f64 error (a few f64 ULPs, 2**-50 relative)
  is 2**-26 of an f32 ULP, so the f32 result is within 0.5 ULP + 2**-26 (measured <= 1 ULP
  against numpy's float64 functions; no f32 overflow/underflow in the middle either).
* f32 sin/cos/tan: a branch-free Payne-Hanek reduction in f64: x (24 bits) times each of
  ten 24-bit chunks of 2/pi is exact in f64; each product is reduced mod 4 exactly
  (p - 4*roundeven(p/4)); the ten residues are summed with TwoSum (an exact error term).
  That is exact to 2**-100 for every f32, 3.4e38 included. Then a Taylor polynomial in f64
  on |r| <= pi/4 and the quadrant's sign / sin-cos swap.
* f64 sin/cos/tan call libm (``math.sin``): a vectorized f64 Payne-Hanek is not built
  (documented in docs/FASTMATH.md); values are libm's (numpy's f64 loop calls it too).
* atan: t = |x| or 1/|x| in [0, 1]; t > 2 - sqrt(3): atan(t) = pi/6 + atan((sqrt3 t - 1) /
  (t + sqrt3)); Taylor on |y| <= 0.268. atan2 / arcsin / arccos build on it with numpy's
  special cases (signed zeros, infinities).
* exp2: x = n + r exactly (roundeven), 2**r = exp(r*ln2) with r*ln2 split by an FMA.
* log2 / log10: log's own reduction (x = 2**e * (1 + f)), log1p(f) = f + t, then e plus
  (f + t) / ln2 with a two-part 1/ln2, so log2 of a power of two is exact.
* log1p(x): u = 1 + x, log(u) + (x - (u - 1)) / u (the rounding of u, corrected).
* sinh / cosh from expm1 / exp of |x| (no cancellation); beyond |x| > 20, exp(|x|/2)**2/2
  so the result does not overflow before numpy's does.
* cbrt: exp(log|x| / 3), then one Newton step; sign restored.
* arcsinh / arccosh / arctanh via log1p; hypot = hi * sqrt(1 + (lo/hi)**2) with numpy's
  inf-beats-NaN rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction
from math import factorial

from fusebind.lowering.fastmath_text import LN2, Body, Format

__all__ = ["TRIG_APPROXIMATIONS", "TRIG_FUNCTIONS", "TrigApproximation", "define"]


@dataclass(frozen=True)
class TrigApproximation:
    name: str
    body: Callable[..., str]  # f64 body over Body; operands as SSA names, returns the result's
    ulps: dict[str, float]  # measured max error in ULPs, per element type
    arity: int = 1


# ------------------------------------------------------------------ exact constants

def _pi() -> Fraction:
    """pi to ~330 bits (Machin's formula in integers)."""
    scale = 1 << 340

    def arctan_inv(n: int) -> int:
        total, term, k, sign = 0, scale // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k += 2
            sign = -sign
        return total

    return Fraction(16 * arctan_inv(5) - 4 * arctan_inv(239), scale)


PI = _pi()
_F64 = Format("f64")


def _r(q: Fraction) -> float:
    return _F64.round(q)


def _split(q: Fraction) -> tuple[float, float]:
    hi = _r(q)
    return hi, _r(q - Fraction(hi))


_PI_HI, _PI_LO = _split(PI)
_PIO2_HI, _PIO2_LO = _split(PI / 2)
_PIO6_HI, _PIO6_LO = _split(PI / 6)
_PIO2 = _r(PI / 2)
# 2/pi in ten 24-bit chunks: c_k = bits [24k, 24k+24) after the point
_TWO_OVER_PI_CHUNKS = tuple(
    float(Fraction(int(2 / PI * (1 << (24 * (k + 1)))) % (1 << 24), 1 << (24 * (k + 1)))) for k in range(10))
with localcontext() as _ctx:
    _ctx.prec = 60
    _SQRT3_Q = Fraction(Decimal(3).sqrt())
    _LN10 = Fraction(Decimal(10).ln())
_SQRT3 = _r(_SQRT3_Q)
_TAN_PI12 = _r(2 - _SQRT3_Q)
_LN2_HI, _LN2_LO = _split(LN2)
_INV_LN2_HI, _INV_LN2_LO = _split(1 / LN2)
_INV_LN10_HI, _INV_LN10_LO = _split(1 / _LN10)
# log10(2) with 20 trailing zero bits in hi, so e * hi is exact for |e| < 2**20
_LG2 = LN2 / _LN10
_LG2_HI = float(Fraction(int(_LG2 * (1 << 33)), 1 << 33))
_LG2_LO = _r(_LG2 - Fraction(_LG2_HI))


# ------------------------------------------------------------------ small helpers

def _and(b: Body, p: str, q: str) -> str:
    return b.new(f"arith.andi {p}, {q} : i1")


def _or(b: Body, p: str, q: str) -> str:
    return b.new(f"arith.ori {p}, {q} : i1")


def _sqrt(b: Body, a: str) -> str:
    return b.new(f"math.sqrt {a} : f64")  # one vsqrtpd, not a libm call


def _is_inf(b: Body, a: str) -> str:
    return b.cmp("oeq", b.abs(a), b.f(float("inf")))


def _any_nan(b: Body, x: str, y: str) -> str:
    return b.cmp("uno", x, y)


# ------------------------------------------------------------------ sin cos tan

def _sin_cos_reduce(b: Body, x: str) -> tuple[str, str, str, str]:
    """x (an f32 value in f64) -> (sin r, cos r, odd, neg) with x = n*pi/2 + r, quadrant n."""
    s, err = b.f(0.0), b.f(0.0)
    for c in _TWO_OVER_PI_CHUNKS:
        p = b.mul(x, b.f(c))  # exact: 24 x 24 bits
        q = b.fma(b.roundeven(b.mul(p, b.f(0.25))), b.f(-4.0), p)  # p mod 4 in [-2, 2], exact
        t = b.add(s, q)  # TwoSum: s + q = t + e exactly
        bb = b.sub(t, s)
        e = b.add(b.sub(s, b.sub(t, bb)), b.sub(q, bb))
        s, err = t, b.add(err, e)
    n = b.roundeven(s)
    y = b.add(b.sub(s, n), err)
    r = b.mul(y, b.f(_PIO2))
    n_ok = b.select(b.cmp("uno", n, n), b.f(0.0), n)  # fptosi of NaN would be poison
    ni = b.to_int(n_ok)
    odd = b.new(f"arith.trunci {ni} : i64 to i1")
    neg = b.new(f"arith.trunci {b.iop('shrsi', ni, b.i(1))} : i64 to i1")
    z = b.mul(r, r)
    sin_c = [_r(Fraction((-1) ** k, factorial(2 * k + 1))) for k in range(1, 9)]
    cos_c = [_r(Fraction((-1) ** k, factorial(2 * k))) for k in range(2, 10)]
    sin_r = b.fma(b.mul(r, z), b.horner(z, sin_c), r)
    cos_r = b.fma(b.mul(z, z), b.horner(z, cos_c), b.fma(z, b.f(-0.5), b.f(1.0)))
    return sin_r, cos_r, odd, neg


def _body_sin(b: Body, x: str) -> str:
    s, c, odd, neg = _sin_cos_reduce(b, x)
    v = b.select(odd, c, s)
    v = b.select(neg, b.neg(v), v)
    return b.select(b.cmp("oeq", x, b.f(0.0)), x, v)  # sin(-0) = -0


def _body_cos(b: Body, x: str) -> str:
    s, c, odd, neg = _sin_cos_reduce(b, x)
    v = b.select(odd, b.neg(s), c)  # cos(n*pi/2 + r): quadrant n + 1 of sin
    return b.select(neg, b.neg(v), v)


def _body_tan(b: Body, x: str) -> str:
    s, c, odd, _ = _sin_cos_reduce(b, x)
    v = b.select(odd, b.neg(b.div(c, s)), b.div(s, c))
    return b.select(b.cmp("oeq", x, b.f(0.0)), x, v)


def _libm(fn: str) -> Callable[[Body, str], str]:
    def body(b: Body, x: str) -> str:
        return b.new(f"math.{fn} {x} : f64")
    return body


# ------------------------------------------------------------------ atan family

_ATAN_C = [_r(Fraction((-1) ** k, 2 * k + 1)) for k in range(1, 16)]


def _atan_unit(b: Body, t: str) -> str:
    """atan(t) for t in [0, 1] (NaN propagates)."""
    big = b.cmp("ogt", t, b.f(_TAN_PI12))
    y = b.select(big, b.div(b.fma(t, b.f(_SQRT3), b.f(-1.0)), b.add(t, b.f(_SQRT3))), t)
    z = b.mul(y, y)
    p = b.fma(b.mul(y, z), b.horner(z, _ATAN_C), y)
    return b.select(big, b.add(b.f(_PIO6_HI), b.add(b.f(_PIO6_LO), p)), p)


def _from(b: Body, hi: float, lo: float, v: str) -> str:
    """(hi + lo) - v, with hi + lo a two-part constant."""
    return b.add(b.sub(b.f(hi), v), b.f(lo))


def _body_atan(b: Body, x: str) -> str:
    a = b.abs(x)
    inv = b.cmp("ogt", a, b.f(1.0))
    t = b.select(inv, b.div(b.f(1.0), a), a)
    v = _atan_unit(b, t)
    v = b.select(inv, _from(b, _PIO2_HI, _PIO2_LO, v), v)
    return b.nan_passthrough(x, b.copysign(v, x))


def _atan2(b: Body, y: str, x: str) -> str:
    ay, ax = b.abs(y), b.abs(x)
    swap = b.cmp("ogt", ay, ax)
    t = b.div(b.select(swap, ax, ay), b.select(swap, ay, ax))
    zero = b.f(0.0)
    t = b.select(_and(b, b.cmp("oeq", ax, zero), b.cmp("oeq", ay, zero)), zero, t)  # 0/0: angle 0 or pi
    t = b.select(_and(b, _is_inf(b, x), _is_inf(b, y)), b.f(1.0), t)  # inf/inf: pi/4 or 3pi/4
    v = _atan_unit(b, t)
    v = b.select(swap, _from(b, _PIO2_HI, _PIO2_LO, v), v)
    x_neg = b.new(f"arith.cmpi slt, {b.bits(x)}, {b.i(0)} : i64")  # -0.0 included, as numpy
    v = b.select(x_neg, _from(b, _PI_HI, _PI_LO, v), v)
    v = b.copysign(v, y)
    return b.select(_any_nan(b, x, y), b.add(x, y), v)


def _body_atan2(b: Body, y: str, x: str) -> str:
    return _atan2(b, y, x)


def _one_minus_sq(b: Body, x: str) -> str:
    one = b.f(1.0)
    return _sqrt(b, b.mul(b.sub(one, x), b.add(one, x)))  # (1-x)(1+x): no cancellation near |x| = 1


def _body_asin(b: Body, x: str) -> str:
    return _atan2(b, x, _one_minus_sq(b, x))


def _body_acos(b: Body, x: str) -> str:
    return _atan2(b, _one_minus_sq(b, x), x)


# ------------------------------------------------------------------ exp / log family

def _body_exp2(b: Body, x: str) -> str:
    xc = b.minnum(b.maxnum(x, b.f(-1080.0)), b.f(1025.0))  # NaN becomes a bound here; selected away below
    n_f = b.roundeven(xc)
    r = b.sub(xc, n_f)  # exact, |r| <= 1/2
    s = b.mul(r, b.f(_LN2_HI))
    s_lo = b.fma(r, b.f(_LN2_LO), b.fma(r, b.f(_LN2_HI), b.neg(s)))  # r*ln2 = s + s_lo
    u = b.fma(b.mul(s, s), b.horner(s, b.shared._taylor_expm1_tail(b.fmt)), s)  # expm1(s)
    y = b.add(b.add(u, b.fma(s_lo, u, s_lo)), b.f(1.0))  # exp(s)(1 + s_lo)
    return b.nan_passthrough(x, b.shared._scale(b, y, b.to_int(n_f)))


def _log_parts(b: Body, x: str) -> tuple[str, str, str]:
    """x > 0 finite -> (e, f, t) with x = 2**e * (1 + f), log1p(f) = f + t (fastmath's f64 log)."""
    fmt = b.fmt
    up = fmt.mant + 2
    is_sub = b.cmp("olt", x, b.f(2.0 ** (1 - fmt.bias)))
    xs = b.select(is_sub, b.mul(x, b.f(2.0**up)), x)
    e_adj = b.iselect(is_sub, b.i(-up), b.i(0))
    sqrt_half_bits = 0x3FE6A09E667F3BCD
    ix = b.iop("subi", b.bits(xs), b.i(sqrt_half_bits))
    e = b.iop("addi", b.iop("shrsi", ix, b.i(fmt.mant)), e_adj)
    m = b.from_bits(b.iop("addi", b.iop("andi", ix, b.i((1 << fmt.mant) - 1)), b.i(sqrt_half_bits)))
    f = b.sub(m, b.f(1.0))
    s = b.div(f, b.add(f, b.f(2.0)))
    z = b.mul(s, s)
    r = b.mul(z, b.horner(z, b.shared._log_series(fmt)))
    hfsq = b.mul(b.mul(f, f), b.f(0.5))
    t = b.fma(s, b.add(hfsq, r), b.neg(hfsq))
    return b.to_float(e), f, t


def _log_specials(b: Body, x: str, res: str) -> str:
    inf = float("inf")
    res = b.select(b.cmp("oeq", x, b.f(inf)), x, res)
    res = b.select(b.cmp("oeq", x, b.f(0.0)), b.f(-inf), res)
    res = b.select(b.cmp("olt", x, b.f(0.0)), b.f(float("nan")), res)
    return b.nan_passthrough(x, res)


def _log_value(b: Body, x: str) -> str:
    e, f, t = _log_parts(b, x)
    return _log_specials(b, x, b.fma(e, b.f(_LN2_HI), b.add(f, b.fma(e, b.f(_LN2_LO), t))))


def _body_log2(b: Body, x: str) -> str:
    e, f, t = _log_parts(b, x)
    # (f + t) / ln2 with 1/ln2 = hi + lo; exact 0 for f = 0, so log2(2**k) == k
    y = b.fma(f, b.f(_INV_LN2_HI), b.fma(f, b.f(_INV_LN2_LO), b.mul(t, b.f(_INV_LN2_HI))))
    return _log_specials(b, x, b.add(e, y))


def _body_log10(b: Body, x: str) -> str:
    e, f, t = _log_parts(b, x)
    y = b.fma(f, b.f(_INV_LN10_HI), b.fma(f, b.f(_INV_LN10_LO), b.fma(t, b.f(_INV_LN10_HI), b.mul(e, b.f(_LG2_LO)))))
    return _log_specials(b, x, b.fma(e, b.f(_LG2_HI), y))


def _log1p_value(b: Body, x: str) -> str:
    one = b.f(1.0)
    u = b.add(x, one)
    c = b.div(b.sub(x, b.sub(u, one)), u)  # the rounding error of 1 + x, divided by u
    ok = _and(b, b.cmp("ogt", u, b.f(0.0)), b.cmp("olt", u, b.f(float("inf"))))
    res = b.add(_log_value(b, u), b.select(ok, c, b.f(0.0)))
    res = b.select(b.cmp("oeq", x, b.f(0.0)), x, res)  # log1p(-0) = -0
    return b.nan_passthrough(x, res)


def _body_log1p(b: Body, x: str) -> str:
    return _log1p_value(b, x)


_HYP_SPLIT = 20.0  # above it exp(-2|x|) < 2**-57: sinh = cosh = exp(|x|)/2


def _exp_half_sq(b: Body, a: str) -> str:
    """exp(a)/2 as (exp(a/2)/2) * exp(a/2): finite wherever the result is."""
    eh = b.shared._exp_value(b, b.mul(a, b.f(0.5)))
    return b.mul(b.mul(eh, b.f(0.5)), eh)


def _body_sinh(b: Body, x: str) -> str:
    a = b.abs(x)
    u = b.shared._expm1_value(b, b.minnum(a, b.f(_HYP_SPLIT)))
    small = b.mul(b.add(u, b.div(u, b.add(u, b.f(1.0)))), b.f(0.5))
    v = b.select(b.cmp("ogt", a, b.f(_HYP_SPLIT)), _exp_half_sq(b, a), small)
    return b.nan_passthrough(x, b.copysign(v, x))


def _body_cosh(b: Body, x: str) -> str:
    a = b.abs(x)
    e = b.shared._exp_value(b, b.minnum(a, b.f(_HYP_SPLIT)))
    small = b.fma(e, b.f(0.5), b.div(b.f(0.5), e))
    v = b.select(b.cmp("ogt", a, b.f(_HYP_SPLIT)), _exp_half_sq(b, a), small)
    return b.nan_passthrough(x, v)


_BIG = 2.0**28  # above it sqrt(x*x + 1) == |x| in f64: asinh/acosh = log(2|x|)


def _log_2x(b: Body, a: str) -> str:
    return b.add(_log_value(b, a), b.f(_r(LN2)))


def _body_asinh(b: Body, x: str) -> str:
    a = b.abs(x)
    one = b.f(1.0)
    sq = b.mul(a, a)
    small = _log1p_value(b, b.add(a, b.div(sq, b.add(one, _sqrt(b, b.add(one, sq))))))
    v = b.select(b.cmp("ogt", a, b.f(_BIG)), _log_2x(b, a), small)
    return b.nan_passthrough(x, b.copysign(v, x))


def _body_acosh(b: Body, x: str) -> str:
    t = b.sub(x, b.f(1.0))  # exact on [1, 2]
    small = _log1p_value(b, b.add(t, _sqrt(b, b.fma(t, t, b.add(t, t)))))
    v = b.select(b.cmp("ogt", x, b.f(_BIG)), _log_2x(b, x), small)
    v = b.select(b.cmp("olt", x, b.f(1.0)), b.f(float("nan")), v)
    return b.nan_passthrough(x, v)


def _body_atanh(b: Body, x: str) -> str:
    a = b.abs(x)
    v = b.mul(_log1p_value(b, b.div(b.add(a, a), b.sub(b.f(1.0), a))), b.f(0.5))
    return b.nan_passthrough(x, b.copysign(v, x))


def _body_hypot(b: Body, x: str, y: str) -> str:
    ax, ay = b.abs(x), b.abs(y)
    hi, lo = b.maxnum(ax, ay), b.minnum(ax, ay)
    r = b.div(lo, hi)
    v = b.mul(hi, _sqrt(b, b.fma(r, r, b.f(1.0))))
    v = b.select(b.cmp("oeq", hi, b.f(0.0)), b.f(0.0), v)
    v = b.select(_any_nan(b, x, y), b.add(x, y), v)
    return b.select(_or(b, _is_inf(b, x), _is_inf(b, y)), b.f(float("inf")), v)  # numpy: inf beats NaN


def _body_cbrt(b: Body, x: str) -> str:
    a = b.abs(x)
    # exp(log(a)/3) is within ~2**-45 (log's rounding times |log a| <= 745); one Newton step
    # y + (a/y**2 - y)/3 squares that error away, leaving the step's own roundings.
    y = b.shared._exp_value(b, b.mul(_log_value(b, a), b.f(_r(Fraction(1, 3)))))
    y = b.add(y, b.mul(b.sub(b.div(a, b.mul(y, y)), y), b.f(_r(Fraction(1, 3)))))
    y = b.copysign(y, x)
    y = b.select(_or(b, b.cmp("oeq", a, b.f(0.0)), _is_inf(b, x)), x, y)  # ±0, ±inf are their own root
    return b.nan_passthrough(x, y)


TRIG_APPROXIMATIONS: dict[str, TrigApproximation] = {a.name: a for a in (
    TrigApproximation("sin", _body_sin, {"f32": 1.0, "f64": 1.0}),
    TrigApproximation("cos", _body_cos, {"f32": 1.0, "f64": 1.0}),
    TrigApproximation("tan", _body_tan, {"f32": 1.0, "f64": 1.0}),
    TrigApproximation("arcsin", _body_asin, {"f32": 1.0, "f64": 4.0}),
    TrigApproximation("arccos", _body_acos, {"f32": 1.0, "f64": 4.0}),
    TrigApproximation("arctan", _body_atan, {"f32": 1.0, "f64": 2.5}),
    TrigApproximation("arctan2", _body_atan2, {"f32": 1.0, "f64": 3.5}, arity=2),
    TrigApproximation("sinh", _body_sinh, {"f32": 1.0, "f64": 3.5}),
    TrigApproximation("cosh", _body_cosh, {"f32": 1.0, "f64": 3.5}),
    TrigApproximation("arcsinh", _body_asinh, {"f32": 1.0, "f64": 2.0}),
    TrigApproximation("arccosh", _body_acosh, {"f32": 1.0, "f64": 2.5}),
    TrigApproximation("arctanh", _body_atanh, {"f32": 1.0, "f64": 2.5}),
    TrigApproximation("exp2", _body_exp2, {"f32": 1.0, "f64": 1.5}),
    TrigApproximation("log2", _body_log2, {"f32": 1.0, "f64": 1.5}),
    TrigApproximation("log10", _body_log10, {"f32": 1.0, "f64": 1.5}),
    TrigApproximation("log1p", _body_log1p, {"f32": 1.0, "f64": 2.0}),
    TrigApproximation("cbrt", _body_cbrt, {"f32": 1.0, "f64": 1.0}),
    TrigApproximation("hypot", _body_hypot, {"f32": 1.0, "f64": 2.5}, arity=2),
)}
# f64 sin/cos/tan: libm (see the module docstring); f32 uses the Payne-Hanek bodies above
_F64_BODY = {"sin": _libm("sin"), "cos": _libm("cos"), "tan": _libm("tan")}
TRIG_FUNCTIONS: frozenset[str] = frozenset(TRIG_APPROXIMATIONS)


def define(fn: str, elem: str, symbol: str, shared: Any) -> str:
    """The ``func.func private`` text of ``fn`` on ``elem`` (f32: the f64 body, rounded once).

    ``shared``: the `fastmath` module, whose f64 exp / expm1 / log-series helpers the bodies
    reuse (`b.shared`); passed in, not imported, because fastmath imports this module."""
    rec = TRIG_APPROXIMATIONS[fn]
    b = Body(_F64)
    b.shared = shared  # type: ignore[attr-defined]
    params = [f"%x{i}" for i in range(rec.arity)]
    if elem == "f32":
        args = []
        for p in params:
            args.append(b.new(f"arith.extf {p} : f32 to f64"))
        body = rec.body
    else:
        args = params
        body = _F64_BODY.get(fn, rec.body)
    result = body(b, *args)
    if elem == "f32":
        result = b.new(f"arith.truncf {result} : f64 to f32")
    sig = ", ".join(f"{p}: {elem}" for p in params)
    lines = "\n".join(b.lines)
    return (
        f"func.func private @{symbol}({sig}) -> {elem} "
        f'attributes {{llvm.linkage = #llvm.linkage<internal>, passthrough = ["alwaysinline"]}} {{\n'
        f"{lines}\n    func.return {result} : {elem}\n}}\n"
    )
