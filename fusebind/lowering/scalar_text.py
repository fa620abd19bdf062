"""`ScalarBuilder` over MLIR text: the body of one `linalg.generic`.

Owns: `TextScalarBuilder`, which turns the scalar semantics an elementwise
prim op states (`scalar_body`) into upstream `arith` / `math` ops, with
numpy's semantics: NaN-propagating maximum/minimum that return the second
operand on ties (so signed zeros match numpy), wrapping integer add/mul,
floor division and remainder with x//0 == 0, x%0 == 0, MIN//-1 == MIN and
MIN%-1 == 0 (each guarded, since LLVM's sdiv/srem make them undefined),
numpy's float divmod op by op (`dialect/scalar.py`), np.fmod (C's remainder;
integer x fmod 0 == MIN fmod -1 == 0), integer pow by branch-free
square-and-multiply, bitwise ops and numpy's shifts (a count of the width or
more, or negative, gives 0, or -1 for `>>` of a negative value: shl/ashr are
poison there), and float -> int casts that give numpy's x86-64 INT_MIN for
NaN, inf and out-of-range values (fptosi is poison there, and LLVM folds a
constant's poison into a dropped store). Transcendentals call the `fastmath`
definitions when a provider is given, else `math.*` ops.
Values keep their element name (`ui8`); the text writes its signless MLIR type (`mt`: `i8`),
and unsigned elements take the unsigned ops: divui/remui (x // 0 == x % 0 == 0; unsigned floor
is truncation, so no sign fix-up), cmpi ult/ule/ugt/uge, shrui, extui, uitofp; abs is the
identity and negation wraps.

The methods beyond the `ScalarBuilder` protocol (fmod, bitwise_and/or/xor,
invert, left_shift, right_shift) are the ones prim_division.FmodOp and the
prim_bitwise ops call; they join the protocol (and `NumpyScalarBuilder`) when
dialect/scalar.py takes them.
Must not: know about tensors, shapes or linalg (that is `emit.py`).
"""

from __future__ import annotations

import math
import struct
from typing import Callable, Protocol

import numpy as np

from fusebind.dialect.errors import FusebindError
from fusebind.dialect.types import ELEMENTS

# From the element table: the float types narrowest first (`cast` widens or narrows by
# position), and the bit width of each integer type (i1 included).
FLOAT_ELEMS = tuple(sorted((n for n, e in ELEMENTS.items() if e.kind == "float"), key=lambda n: ELEMENTS[n].bits))
INT_WIDTH = {n: e.bits for n, e in ELEMENTS.items() if e.kind != "float"}
#: the unsigned integer types: computed in their signless MLIR type with the unsigned ops
UNSIGNED = frozenset(n for n, e in ELEMENTS.items() if e.kind == "uint")

_FLOAT_PRED = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
_INT_PRED = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
_BOOL_PRED = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}  # and unsigned


def mt(elem: str) -> str:
    """The MLIR type of an element name in scalar code: `ui8` -> `i8` (signless; the unsigned ops
    carry the signedness); names outside the element table (`index`) are themselves."""
    info = ELEMENTS.get(elem)
    return info.mlir if info is not None else elem


def is_unsigned(elem: str) -> bool:
    """i1 included: bool compares, widens and converts as an unsigned 0/1."""
    return elem in UNSIGNED or elem == "i1"


class NameSource(Protocol):
    def __call__(self, hint: str = "v") -> str: ...


class ScalarEmitError(FusebindError, ValueError):
    """A scalar operation that has no lowering for the given element type."""


def is_float(elem: str) -> bool:
    return elem in FLOAT_ELEMS


def float_literal(value: float, elem: str) -> str:
    """An exact MLIR float literal (hex bit pattern for non-finite values)."""
    if math.isfinite(value):
        return repr(float(value))
    if elem == "f64":
        return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]
    return "0x%08X" % struct.unpack("<I", struct.pack("<f", value))[0]


def int_literal(value: int | bool, elem: str) -> str:
    if elem == "i1":
        return "true" if value else "false"
    width = INT_WIDTH[elem]
    v = int(value) & ((1 << width) - 1)
    if v >= 1 << (width - 1):
        v -= 1 << width
    return str(v)


#: numpy ufunc -> the upstream `math` op that lowers it well without fast math (the others, such as
#: log1p as log(1 + x), are composed by their op from primitives instead)
_UPSTREAM_MATH: dict[str, str] = {
    "sin": "sin", "cos": "cos", "tan": "tan", "arcsin": "asin", "arccos": "acos", "arctan": "atan",
    "arctan2": "atan2", "sinh": "sinh", "cosh": "cosh", "exp2": "exp2", "log2": "log2", "log10": "log10"}


class TextScalarBuilder:
    """Appends scalar ops to `lines`; values are SSA names, their element type in `types`."""

    def __init__(self, fresh: NameSource, fastmath: Callable[[str, str], str | None] | None = None) -> None:
        self.lines: list[str] = []
        self.types: dict[str, str] = {}
        self._fresh = fresh
        # fastmath(fn, elem) -> symbol of a func.func to call, or None for math.*
        self._fastmath = fastmath
        self.called: set[tuple[str, str]] = set()
        self._bitcasts: dict[str, str] = {}  # a same-width integer cast -> its operand (same bits)

    # -- plumbing -------------------------------------------------------
    def bind(self, name: str, elem: str) -> str:
        self.types[name] = elem
        return name

    def elem(self, x: str) -> str:
        return self.types[x]

    def same_bits(self, x: str) -> str:
        """The value `x` is bit for bit (a cast between i8 and ui8 is its operand), else `x`."""
        while x in self._bitcasts:
            x = self._bitcasts[x]
        return x

    def _op(self, text: str, elem: str, hint: str = "s") -> str:
        name = self._fresh(hint)
        self.lines.append(f"{name} = {text}")
        return self.bind(name, elem)

    def _binary(self, fop: str, iop: str, a: str, b: str) -> str:
        e = self.elem(a)
        op = fop if is_float(e) else iop
        if op is None:
            raise ScalarEmitError(f"scalar {fop}/{iop}: no lowering for element type {e}")
        return self._op(f"arith.{op} {a}, {b} : {mt(e)}", e)

    # -- ScalarBuilder protocol ----------------------------------------
    def constant(self, value: float | int | bool, elem: str) -> str:
        lit = float_literal(float(value), elem) if is_float(elem) else int_literal(value, elem)
        if elem == "i1":  # `true` / `false` are typed already: `arith.constant true : i1` does not parse
            return self._op(f"arith.constant {lit}", elem, "c")
        return self._op(f"arith.constant {lit} : {mt(elem)}", elem, "c")

    def add(self, a: str, b: str) -> str:
        return self._binary("addf", "ori" if self.elem(a) == "i1" else "addi", a, b)

    def sub(self, a: str, b: str) -> str:
        return self._binary("subf", "xori" if self.elem(a) == "i1" else "subi", a, b)

    def mul(self, a: str, b: str) -> str:
        return self._binary("mulf", "andi" if self.elem(a) == "i1" else "muli", a, b)

    def div(self, a: str, b: str) -> str:
        e = self.elem(a)
        if is_float(e):
            return self._op(f"arith.divf {a}, {b} : {mt(e)}", e)
        if e == "i1":
            raise ScalarEmitError("scalar div: integer division of i1 (bool) is not supported; cast to i32 first")
        # numpy: x // 0 == 0, MIN // -1 == MIN (wraps); both are UB for LLVM's sdiv, so guard.
        is_zero, is_m1, safe = self._int_divisor("div", b)
        zero = self.constant(0, e)
        if e in UNSIGNED:  # unsigned floor is truncation; only x // 0 is guarded (UB for divui)
            q = self._op(f"arith.divui {a}, {safe} : {mt(e)}", e)
            return self._op(f"arith.select {is_zero}, {zero}, {q} : {mt(e)}", e)
        q = self._op(f"arith.floordivsi {a}, {safe} : {mt(e)}", e)
        neg = self._op(f"arith.subi {zero}, {a} : {mt(e)}", e)
        q = self._op(f"arith.select {is_m1}, {neg}, {q} : {mt(e)}", e)
        return self._op(f"arith.select {is_zero}, {zero}, {q} : {mt(e)}", e)

    def _int_divisor(self, fn: str, b: str) -> tuple[str, str, str]:
        """(is b == 0, is b == -1, a divisor safe for sdiv/srem: 1 in those two cases). Unsigned:
        (is b == 0, None, b or 1): there is no -1, and divui/remui only trap on 0."""
        e = self.elem(b)
        if is_float(e) or e == "i1":
            raise ScalarEmitError(f"scalar {fn}: no integer lowering for element type {e}")
        zero, one = self.constant(0, e), self.constant(1, e)
        is_zero = self._op(f"arith.cmpi eq, {b}, {zero} : {mt(e)}", "i1")
        if e in UNSIGNED:
            return is_zero, None, self._op(f"arith.select {is_zero}, {one}, {b} : {mt(e)}", e)
        minus_one = self.constant(-1, e)
        is_m1 = self._op(f"arith.cmpi eq, {b}, {minus_one} : {mt(e)}", "i1")
        special = self._op(f"arith.ori {is_zero}, {is_m1} : i1", "i1")
        return is_zero, is_m1, self._op(f"arith.select {special}, {one}, {b} : {mt(e)}", e)

    def _float_divmod(self, a: str, b: str) -> tuple[str, str]:
        """numpy's npy_divmod, op by op (see dialect/scalar.py): (floor quotient, remainder)."""
        e = self.elem(a)
        zero, one, half = self.constant(0.0, e), self.constant(1.0, e), self.constant(0.5, e)
        mod = self._op(f"arith.remf {a}, {b} : {mt(e)}", e)  # C fmod: exact
        quot = self._op(f"arith.divf {a}, {b} : {mt(e)}", e)  # a / b: the b == 0 answer, and the sign of 0
        div = self._op(f"arith.divf {self._op(f'arith.subf {a}, {mod} : {mt(e)}', e)}, {b} : {mt(e)}", e)
        mod_nz = self._op(f"arith.cmpf une, {mod}, {zero} : {mt(e)}", "i1")  # C's `if (mod)`: NaN is true
        b_neg = self._op(f"arith.cmpf olt, {b}, {zero} : {mt(e)}", "i1")
        mod_neg = self._op(f"arith.cmpf olt, {mod}, {zero} : {mt(e)}", "i1")
        fix = self._op(f"arith.andi {mod_nz}, {self._op(f'arith.xori {b_neg}, {mod_neg} : i1', 'i1')} : i1", "i1")
        mod = self._op(f"arith.select {fix}, {self._op(f'arith.addf {mod}, {b} : {mt(e)}', e)}, {mod} : {mt(e)}", e)
        div = self._op(f"arith.select {fix}, {self._op(f'arith.subf {div}, {one} : {mt(e)}', e)}, {div} : {mt(e)}", e)
        mod = self._op(f"arith.select {mod_nz}, {mod}, {self._op(f'math.copysign {zero}, {b} : {mt(e)}', e)} : {mt(e)}", e)
        fl = self._op(f"math.floor {div} : {mt(e)}", e)
        up = self._op(f"arith.cmpf ogt, {self._op(f'arith.subf {div}, {fl} : {mt(e)}', e)}, {half} : {mt(e)}", "i1")
        fl = self._op(f"arith.select {up}, {self._op(f'arith.addf {fl}, {one} : {mt(e)}', e)}, {fl} : {mt(e)}", e)
        div_nz = self._op(f"arith.cmpf une, {div}, {zero} : {mt(e)}", "i1")
        q = self._op(f"arith.select {div_nz}, {fl}, {self._op(f'math.copysign {zero}, {quot} : {mt(e)}', e)} : {mt(e)}", e)
        b_zero = self._op(f"arith.cmpf oeq, {b}, {zero} : {mt(e)}", "i1")
        return (self._op(f"arith.select {b_zero}, {quot}, {q} : {mt(e)}", e),
                self._op(f"arith.select {b_zero}, {self._op(f'arith.remf {a}, {b} : {mt(e)}', e)}, {mod} : {mt(e)}", e))

    def floordiv(self, a: str, b: str) -> str:
        e = self.elem(a)
        if is_float(e):
            return self._float_divmod(a, b)[0]
        if e == "i1":
            raise ScalarEmitError("scalar floordiv: no lowering for i1 (numpy computes bool // bool in int8)")
        return self.div(a, b)

    def rem(self, a: str, b: str) -> str:
        e = self.elem(a)
        if is_float(e):
            return self._float_divmod(a, b)[1]
        _, _, safe = self._int_divisor("rem", b)
        # b == 0 and b == -1 both give 0 (numpy); the safe divisor 1 gives exactly that.
        zero = self.constant(0, e)
        if e in UNSIGNED:  # x % 0 == 0 (the safe divisor 1); no sign to fix
            return self._op(f"arith.remui {a}, {safe} : {mt(e)}", e)
        r = self._op(f"arith.remsi {a}, {safe} : {mt(e)}", e)  # truncated: the sign of a
        r_neg = self._op(f"arith.cmpi slt, {r}, {zero} : {mt(e)}", "i1")
        b_neg = self._op(f"arith.cmpi slt, {b}, {zero} : {mt(e)}", "i1")
        r_nz = self._op(f"arith.cmpi ne, {r}, {zero} : {mt(e)}", "i1")
        fix = self._op(f"arith.andi {r_nz}, {self._op(f'arith.xori {r_neg}, {b_neg} : i1', 'i1')} : i1", "i1")
        return self._op(f"arith.select {fix}, {self._op(f'arith.addi {r}, {b} : {mt(e)}', e)}, {r} : {mt(e)}", e)

    def fmod(self, a: str, b: str) -> str:
        """np.fmod: C's remainder, the sign of the dividend. Floats: `arith.remf` is C fmod exactly
        (fmod(x, 0) and fmod(inf, y) are NaN, fmod(x, inf) is x). Integers: truncated `remsi`,
        with numpy's x fmod 0 == 0 and MIN fmod -1 == 0 (the safe divisor 1 gives both)."""
        e = self.elem(a)
        if is_float(e):
            return self._op(f"arith.remf {a}, {b} : {mt(e)}", e)
        if e == "i1":
            raise ScalarEmitError("scalar fmod: no lowering for i1 (numpy computes fmod of bools in int8)")
        _, _, safe = self._int_divisor("fmod", b)
        return self._op(f"arith.{'remui' if e in UNSIGNED else 'remsi'} {a}, {safe} : {mt(e)}", e)

    # -- bitwise (numpy's integer and bool semantics) -------------------
    def _bits(self, fn: str, x: str) -> str:
        e = self.elem(x)
        if is_float(e):
            raise ScalarEmitError(f"scalar {fn}: needs an integer or bool operand, got {e}")
        return e

    def bitwise_and(self, a: str, b: str) -> str:
        return self._op(f"arith.andi {a}, {b} : {mt(self._bits('bitwise_and', a))}", self.elem(a))

    def bitwise_or(self, a: str, b: str) -> str:
        return self._op(f"arith.ori {a}, {b} : {mt(self._bits('bitwise_or', a))}", self.elem(a))

    def bitwise_xor(self, a: str, b: str) -> str:
        return self._op(f"arith.xori {a}, {b} : {mt(self._bits('bitwise_xor', a))}", self.elem(a))

    def invert(self, x: str) -> str:
        e = self._bits("invert", x)
        return self._op(f"arith.xori {x}, {self.constant(True if e == 'i1' else -1, e)} : {mt(e)}", e)

    def _shift_count(self, fn: str, a: str, s: str) -> tuple[str, str]:
        """(element type, `s` unsigned-below-the-width: numpy's `(size_t)s < width`, so a negative
        count counts as too large)."""
        e = self._bits(fn, a)
        if e == "i1":
            raise ScalarEmitError(f"scalar {fn}: no lowering for i1 (numpy shifts bools in int8)")
        width = self.constant(INT_WIDTH[e], e)
        return e, self._op(f"arith.cmpi ult, {s}, {width} : {mt(e)}", "i1")

    def left_shift(self, a: str, s: str) -> str:
        """numpy's npy_lshift: a << s wrapping, 0 for a count >= the width or negative (LLVM's shl
        gives poison there; the select keeps it out of the result)."""
        e, ok = self._shift_count("left_shift", a, s)
        shifted = self._op(f"arith.shli {a}, {s} : {mt(e)}", e)
        return self._op(f"arith.select {ok}, {shifted}, {self.constant(0, e)} : {mt(e)}", e)

    def right_shift(self, a: str, s: str) -> str:
        """numpy's npy_rshift: arithmetic a >> s; a count >= the width or negative gives 0, or -1
        for a negative a, which is a >> (width - 1): the count is clamped there (unsigned min)."""
        e, ok = self._shift_count("right_shift", a, s)
        if e in UNSIGNED:  # logical: a count >= the width gives 0 (shrui is poison there: selected out)
            shifted = self._op(f"arith.shrui {a}, {s} : {mt(e)}", e)
            return self._op(f"arith.select {ok}, {shifted}, {self.constant(0, e)} : {mt(e)}", e)
        top = self.constant(INT_WIDTH[e] - 1, e)
        count = self._op(f"arith.minui {s}, {top} : {mt(e)}", e)
        return self._op(f"arith.shrsi {a}, {count} : {mt(e)}", e)

    def _int_pow(self, a: str, n: str, max_exponent: int | None) -> str:
        """a ** n modulo 2^width for 0 <= n <= max_exponent: square-and-multiply over the bits of
        n, branch-free (so the loop around it vectorizes). n >= 0 is the caller's contract
        (prim.pow lowers only with a constant non-negative exponent, whose maximum it passes)."""
        e = self.elem(a)
        if e == "i1":
            raise ScalarEmitError("scalar pow: no lowering for i1 (numpy computes bool ** bool in int8)")
        zero, one = self.constant(0, e), self.constant(1, e)
        result, base, bits = one, a, n
        # every bit of an exponent that may be any value: w - 1 signed (n >= 0), w unsigned
        bits_of_n = INT_WIDTH[e] if e in UNSIGNED else INT_WIDTH[e] - 1
        steps = bits_of_n if max_exponent is None else max(1, int(max_exponent).bit_length())
        for step in range(steps):
            low = self._op(f"arith.andi {bits}, {one} : {mt(e)}", e)
            odd = self._op(f"arith.cmpi ne, {low}, {zero} : {mt(e)}", "i1")
            result = self._op(f"arith.select {odd}, {self._op(f'arith.muli {result}, {base} : {mt(e)}', e)}, {result} : {mt(e)}", e)
            if step < steps - 1:
                base = self._op(f"arith.muli {base}, {base} : {mt(e)}", e)
                bits = self._op(f"arith.shrui {bits}, {one} : {mt(e)}", e)
        return result

    def neg(self, x: str) -> str:
        e = self.elem(x)
        if is_float(e):
            return self._op(f"arith.negf {x} : {mt(e)}", e)
        return self.sub(self.constant(0, e), x)

    def abs(self, x: str) -> str:
        e = self.elem(x)
        if e == "i1" or e in UNSIGNED:  # np.abs of unsigned is the identity
            return x
        return self._op(f"math.{'absf' if is_float(e) else 'absi'} {x} : {mt(e)}", e)

    def _select_first(self, pred: str, a: str, b: str) -> str:
        """numpy's max/min: (a PRED b or isnan(a)) ? a : b; ties return b."""
        e = self.elem(a)
        if is_float(e):
            c = self._op(f"arith.cmpf {_FLOAT_PRED[pred]}, {a}, {b} : {mt(e)}", "i1")
            n = self._op(f"arith.cmpf uno, {a}, {a} : {mt(e)}", "i1")
            c = self._op(f"arith.ori {c}, {n} : i1", "i1")
        else:
            table = _BOOL_PRED if is_unsigned(e) else _INT_PRED
            c = self._op(f"arith.cmpi {table[pred]}, {a}, {b} : {mt(e)}", "i1")
        return self._op(f"arith.select {c}, {a}, {b} : {mt(e)}", e)

    def maximum(self, a: str, b: str) -> str:
        return self._select_first("gt", a, b)

    def minimum(self, a: str, b: str) -> str:
        return self._select_first("lt", a, b)

    def combine_reassoc(self, kind: str, acc: str, x: str) -> str:
        """A reduction step LLVM may reorder (so the loop vectorizes): float sum/prod with
        `reassoc`, max/min as `arith.maximumf`/`minimumf` (NaN-propagating; only the sign of a
        zero result can differ from numpy when both zeros occur). Integers: the exact ops."""
        e = self.elem(acc)
        if not is_float(e):
            return {"sum": self.add, "prod": self.mul, "max": self.maximum, "min": self.minimum}[kind](acc, x)
        op = {"sum": "addf", "prod": "mulf", "max": "maximumf", "min": "minimumf"}[kind]
        flags = " fastmath<reassoc>" if kind in ("sum", "prod") else ""
        return self._op(f"arith.{op} {acc}, {x}{flags} : {mt(e)}", e)

    def _math(self, fn: str, *args: str) -> str:
        e = self.elem(args[0])
        if not is_float(e):
            raise ScalarEmitError(f"scalar {fn}: needs a float operand, got {e}; cast it to f32 or f64 first")
        symbol = self._fastmath(fn, e) if self._fastmath else None
        if symbol:
            self.called.add((fn, e))
            types = ", ".join([mt(e)] * len(args))
            return self._op(f"func.call @{symbol}({', '.join(args)}) : ({types}) -> {mt(e)}", e)
        op = {"pow": "powf"}.get(fn, fn)
        return self._op(f"math.{op} {', '.join(args)} : {mt(e)}", e)

    def math(self, fn: str, *args: str) -> str | None:
        """numpy's ufunc `fn` (sin, arctan2, ...): a call of its fast-math definition when the
        emitter has one, else the upstream `math` op that lowers well, else None (the op composes
        it from this builder's primitives: `dialect/prim_math.py`)."""
        e = self._float(args[0], fn)
        if self._fastmath and self._fastmath(fn, e):
            return self._math(fn, *args)
        upstream = _UPSTREAM_MATH.get(fn)
        return None if upstream is None else self._op(f"math.{upstream} {', '.join(args)} : {mt(e)}", e)

    def exp(self, x: str) -> str:
        return self._math("exp", x)

    def log(self, x: str) -> str:
        return self._math("log", x)

    def sqrt(self, x: str) -> str:
        return self._op(f"math.sqrt {x} : {mt(self._float(x, 'sqrt'))}", self.elem(x))

    def rsqrt(self, x: str) -> str:
        e = self._float(x, "rsqrt")
        return self._op(f"arith.divf {self.constant(1.0, e)}, {self.sqrt(x)} : {mt(e)}", e)

    def tanh(self, x: str) -> str:
        return self._math("tanh", x)

    def erf(self, x: str) -> str:
        return self._math("erf", x)

    def pow(self, a: str, b: str, max_exponent: int | None = None) -> str:
        if not is_float(self.elem(a)):
            return self._int_pow(a, b, max_exponent)
        return self._math("pow", a, b)

    def _float(self, x: str, fn: str) -> str:
        e = self.elem(x)
        if not is_float(e):
            raise ScalarEmitError(f"scalar {fn}: needs a float operand, got {e}; cast it to f32 or f64 first")
        return e

    def compare(self, pred: str, a: str, b: str) -> str:
        e = self.elem(a)
        if pred not in _FLOAT_PRED:
            raise ScalarEmitError(f"scalar compare: unknown predicate {pred!r}; expected one of eq ne lt le gt ge")
        if is_float(e):
            return self._op(f"arith.cmpf {_FLOAT_PRED[pred]}, {a}, {b} : {mt(e)}", "i1")
        table = _BOOL_PRED if is_unsigned(e) else _INT_PRED
        return self._op(f"arith.cmpi {table[pred]}, {a}, {b} : {mt(e)}", "i1")

    def select(self, c: str, a: str, b: str) -> str:
        return self._op(f"arith.select {c}, {a}, {b} : {mt(self.elem(a))}", self.elem(a))

    def is_nan(self, x: str) -> str:
        e = self.elem(x)
        if not is_float(e):
            return self.constant(False, "i1")
        return self._op(f"arith.cmpf uno, {x}, {x} : {mt(e)}", "i1")

    def cast(self, x: str, to: str) -> str:
        src = self.elem(x)
        if src == to:
            return x
        if is_float(src) and is_float(to):
            wider = FLOAT_ELEMS.index(to) > FLOAT_ELEMS.index(src)
            return self._op(f"arith.{'extf' if wider else 'truncf'} {x} : {mt(src)} to {mt(to)}", to)
        if to == "i1":  # numpy astype(bool) is x != 0
            return self.compare("ne", x, self.constant(0, src))
        if is_float(to):
            op = "uitofp" if is_unsigned(src) else "sitofp"
            return self._op(f"arith.{op} {x} : {mt(src)} to {mt(to)}", to)
        if is_float(src):
            return self._float_to_int(x, src, to)
        if INT_WIDTH[to] > INT_WIDTH[src]:  # numpy: the source's sign decides, int8 -1 -> uint16 65535
            op = "extui" if is_unsigned(src) else "extsi"
            return self._op(f"arith.{op} {x} : {mt(src)} to {mt(to)}", to)
        if INT_WIDTH[to] == INT_WIDTH[src]:  # i8 <-> ui8: the same bits, read with the other sign
            out = self._op(f"arith.bitcast {x} : {mt(src)} to {mt(to)}", to)
            self._bitcasts[out] = x
            return out
        return self._op(f"arith.trunci {x} : {mt(src)} to {mt(to)}", to)

    def _float_to_int(self, x: str, src: str, to: str) -> str:
        """numpy's x86-64 astype, measured on numpy 2.4 (test/api/test_int_widths_jit.py pins it):
        - i32, i64: truncation toward zero; NaN, inf and values outside the range give INT_MIN
          (cvttss2si/cvttsd2si's "integer indefinite");
        - i8, i16, ui8, ui16: the i32 conversion (INT_MIN included) truncated to the width, as C's
          `(npy_ubyte)f` compiles: 300.0 -> uint8 44, -1.0 -> 255, NaN and 1e10 -> 0;
        - ui32, ui64: x >= 2^(w-1) ? conv(x - 2^(w-1)) ^ 2^(w-1) : conv(x), conv the signed w-bit
          conversion: -1.0 -> 2^w - 1, inf -> 0, NaN and -inf -> 2^(w-1). This is numpy's vector
          loop; its scalar tail (the last n % 4 elements of a float -> uint32 cast, and arrays of
          fewer than 4) goes through int64 instead, so out of range numpy's own answer depends on
          the position; in range every position agrees."""
        width = INT_WIDTH[to]
        if width < 32:
            wide = self._fptosi_x86(x, src, "i32")
            return self._op(f"arith.trunci {wide} : i32 to {mt(to)}", to)
        signed = f"i{width}"
        low = self._fptosi_x86(x, src, signed)
        if to not in UNSIGNED:
            return low
        half = float(2 ** (width - 1))
        if half > float(np.finfo(ELEMENTS[src].numpy).max):  # f16 never reaches 2^31
            return self._op(f"arith.bitcast {low} : {signed} to {mt(to)}", to)
        big = self._op(f"arith.cmpf oge, {x}, {self.constant(half, src)} : {mt(src)}", "i1")
        shifted = self._op(f"arith.subf {x}, {self.constant(half, src)} : {mt(src)}", src)
        high = self._op(f"arith.xori {self._fptosi_x86(shifted, src, signed)}, "
                        f"{self.constant(-(2 ** (width - 1)), signed)} : {signed}", signed)
        return self._op(f"arith.select {big}, {high}, {low} : {mt(to)}", to)

    def _fptosi_x86(self, x: str, src: str, to: str) -> str:
        """cvttss2si/cvttsd2si into the signed `to` (i32 or i64): truncation toward zero, INT_MIN
        for NaN, inf and out of range. LLVM's fptosi is poison there, so the range is checked
        (ordered compares: NaN fails) and INT_MIN selected (LLVM folds a constant's poison into a
        dropped store). The bounds -2^(w-1) and 2^(w-1) are powers of two, exact in a float type
        that reaches them; one that does not (f16 -> i32) is out of range only at +-inf and NaN."""
        width = INT_WIDTH[to]
        bound = float(2 ** (width - 1))
        finite_max = float(np.finfo(ELEMENTS[src].numpy).max)
        if bound > finite_max:
            ok = self._op(f"arith.cmpf ole, {self.abs(x)}, {self.constant(finite_max, src)} : {mt(src)}", "i1")
        else:
            above = self._op(f"arith.cmpf oge, {x}, {self.constant(-bound, src)} : {mt(src)}", "i1")
            below = self._op(f"arith.cmpf olt, {x}, {self.constant(bound, src)} : {mt(src)}", "i1")
            ok = self._op(f"arith.andi {above}, {below} : i1", "i1")
        t = self._op(f"arith.fptosi {x} : {mt(src)} to {mt(to)}", to)
        return self._op(f"arith.select {ok}, {t}, {self.constant(-(2 ** (width - 1)), to)} : {mt(to)}", to)
