"""The text side of the fast-math definitions: IEEE formats, exact constants and an SSA body builder.

Owns: `Format` (the bit layout of f32 / f64, from the element table, and exact rounding of
rationals into it: `round`, `hex`), the exact constants the approximations share (`LN2`,
`TWO_OVER_SQRT_PI`, `split_ln2`), and `Body`, which accumulates the SSA lines of one scalar
function (constants deduplicated; float, integer and bit ops; `horner`; `pow2`;
`nan_passthrough`). `fastmath.py` writes the approximations with it.
Must not: know any approximation or its constants (that is `fastmath.py`), import `mlir`.
"""

from __future__ import annotations

import struct
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from fusebind.dialect.types import ELEMENTS


class Format:
    """Bit layout of one IEEE binary format (f32 or f64), from the element table."""

    def __init__(self, elem: str) -> None:
        info = ELEMENTS[elem]
        finfo = np.finfo(info.numpy)
        self.elem = elem
        self.bits = info.bits
        self.int_t = f"i{info.bits}"  # the integer type of the same width (bitcasts)
        self.mant = int(finfo.nmant)  # 23, 52
        self.bias = int(finfo.maxexp) - 1  # 127, 1023

    def round(self, value: Fraction | float) -> float:
        """Round an exact value to this format (nearest even)."""
        v = float(value)  # exact rational -> f64, correctly rounded
        if self.elem == "f32":
            if isinstance(value, Fraction):
                v = fraction_to_f32(value)
            else:
                v = struct.unpack("<f", struct.pack("<f", v))[0]
        return v

    def hex(self, value: float) -> str:
        """MLIR hexadecimal literal holding exactly ``value`` in this format."""
        if self.elem == "f32":
            return "0x%08X" % struct.unpack("<I", struct.pack("<f", value))[0]
        return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]


def fraction_to_f32(q: Fraction) -> float:
    """Correctly rounded f32 of an exact rational (avoids f64 double rounding)."""
    if q == 0:
        return 0.0
    d = float(q)
    f = struct.unpack("<f", struct.pack("<f", d))[0]
    # Nudge to the nearest f32 neighbour if double rounding went wrong.
    best = f
    for cand in (_f32_next(f, -1), _f32_next(f, 1)):
        if abs(Fraction(cand) - q) < abs(Fraction(best) - q):
            best = cand
    return best


def _f32_next(f: float, direction: int) -> float:
    (u,) = struct.unpack("<i", struct.pack("<f", f))
    step = direction if f >= 0 else -direction
    return struct.unpack("<f", struct.pack("<i", u + step))[0]


def _ln2() -> Fraction:
    with localcontext() as ctx:
        ctx.prec = 60
        return Fraction(Decimal(2).ln())


LN2 = _ln2()
TWO_OVER_SQRT_PI = Fraction("1.12837916709551257389615890312154517168810125865799771368817")


def split_ln2(fmt: Format, zero_bits: int) -> tuple[float, float]:
    """ln2 = hi + lo, hi with ``zero_bits`` trailing zero bits so n*hi is exact."""
    keep = fmt.mant + 1 - zero_bits
    scale = 2 ** (keep - 1)  # ln2 in [0.5, 1): keep bits below 2**-1
    hi = Fraction(int(LN2 * scale * 2), scale * 2)
    lo = fmt.round(LN2 - hi)
    return float(hi), lo


class Body:
    """Accumulates the SSA lines of one scalar function body."""

    def __init__(self, fmt: Format, ldexp: bool = False) -> None:
        self.fmt = fmt
        self.ldexp = ldexp  # scale by 2**n with llvm.intr.ldexp (see `fastmath.definitions`)
        self.lines: list[str] = []
        self._n = 0
        self._consts: dict[tuple[str, str], str] = {}

    def new(self, text: str) -> str:
        """A fresh SSA name bound to `text` (an op the typed helpers below do not cover)."""
        name = f"%v{self._n}"
        self._n += 1
        self.lines.append(f"    {name} = {text}")
        return name

    # constants
    def f(self, value: float) -> str:
        lit = self.fmt.hex(value)
        key = (lit, self.fmt.elem)
        if key not in self._consts:
            self._consts[key] = self.new(f"arith.constant {lit} : {self.fmt.elem}")
        return self._consts[key]

    def i(self, value: int) -> str:
        key = (str(value), self.fmt.int_t)
        if key not in self._consts:
            self._consts[key] = self.new(f"arith.constant {value} : {self.fmt.int_t}")
        return self._consts[key]

    # float ops
    def _bin(self, op: str, a: str, b: str) -> str:
        return self.new(f"arith.{op} {a}, {b} : {self.fmt.elem}")

    def add(self, a: str, b: str) -> str:
        return self._bin("addf", a, b)

    def sub(self, a: str, b: str) -> str:
        return self._bin("subf", a, b)

    def mul(self, a: str, b: str) -> str:
        return self._bin("mulf", a, b)

    def div(self, a: str, b: str) -> str:
        return self._bin("divf", a, b)

    def maxnum(self, a: str, b: str) -> str:
        return self._bin("maxnumf", a, b)

    def minnum(self, a: str, b: str) -> str:
        return self._bin("minnumf", a, b)

    def neg(self, a: str) -> str:
        return self.new(f"arith.negf {a} : {self.fmt.elem}")

    def fma(self, a: str, b: str, c: str) -> str:
        """a*b + c with one rounding."""
        return self.new(f"math.fma {a}, {b}, {c} : {self.fmt.elem}")

    def abs(self, a: str) -> str:
        return self.new(f"math.absf {a} : {self.fmt.elem}")

    def copysign(self, a: str, b: str) -> str:
        return self.new(f"math.copysign {a}, {b} : {self.fmt.elem}")

    def roundeven(self, a: str) -> str:
        return self.new(f"math.roundeven {a} : {self.fmt.elem}")

    def cmp(self, pred: str, a: str, b: str) -> str:
        return self.new(f"arith.cmpf {pred}, {a}, {b} : {self.fmt.elem}")

    def select(self, c: str, a: str, b: str) -> str:
        return self.new(f"arith.select {c}, {a}, {b} : {self.fmt.elem}")

    def horner(self, x: str, coeffs: list[float]) -> str:
        """c0 + x*(c1 + x*(c2 + ...)) with FMAs."""
        acc = self.f(coeffs[-1])
        for c in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.f(c))
        return acc

    # integer ops
    def to_int(self, a: str) -> str:
        return self.new(f"arith.fptosi {a} : {self.fmt.elem} to {self.fmt.int_t}")

    def to_float(self, a: str) -> str:
        return self.new(f"arith.sitofp {a} : {self.fmt.int_t} to {self.fmt.elem}")

    def bits(self, a: str) -> str:
        return self.new(f"arith.bitcast {a} : {self.fmt.elem} to {self.fmt.int_t}")

    def from_bits(self, a: str) -> str:
        return self.new(f"arith.bitcast {a} : {self.fmt.int_t} to {self.fmt.elem}")

    def iop(self, op: str, a: str, b: str) -> str:
        return self.new(f"arith.{op} {a}, {b} : {self.fmt.int_t}")

    def iselect(self, c: str, a: str, b: str) -> str:
        return self.new(f"arith.select {c}, {a}, {b} : {self.fmt.int_t}")

    def pow2(self, n: str) -> str:
        """2**n for an integer n in the normal exponent range."""
        biased = self.iop("addi", n, self.i(self.fmt.bias))
        return self.from_bits(self.iop("shli", biased, self.i(self.fmt.mant)))

    def nan_passthrough(self, x: str, result: str) -> str:
        """NaN inputs come back unchanged (payload and all)."""
        return self.select(self.cmp("uno", x, x), x, result)
