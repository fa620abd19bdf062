"""`ScalarBuilder` over MLIR text: the body of one `linalg.generic`.

Owns: `TextScalarBuilder`, which turns the scalar semantics an elementwise
prim op states (`scalar_body`) into upstream `arith` / `math` ops, with
numpy's semantics: NaN-propagating maximum/minimum that return the second
operand on ties (so signed zeros match numpy), wrapping integer add/mul,
floor division with x//0 == 0 and MIN//-1 == MIN. Transcendentals call the
`fastmath` definitions when a provider is given, else `math.*` ops.
Must not: know about tensors, shapes or linalg (that is `emit.py`).
"""

from __future__ import annotations

import math
import struct
from typing import Callable, Protocol
from fusebind.dialect.errors import FusebindError

FLOAT_ELEMS = ("f16", "f32", "f64")
INT_WIDTH = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}

_FLOAT_PRED = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
_INT_PRED = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
_BOOL_PRED = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}


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


class TextScalarBuilder:
    """Appends scalar ops to `lines`; values are SSA names, their element type in `types`."""

    def __init__(self, fresh: NameSource, fastmath: Callable[[str, str], str | None] | None = None) -> None:
        self.lines: list[str] = []
        self.types: dict[str, str] = {}
        self._fresh = fresh
        # fastmath(fn, elem) -> symbol of a func.func to call, or None for math.*
        self._fastmath = fastmath
        self.called: set[tuple[str, str]] = set()

    # -- plumbing -------------------------------------------------------
    def bind(self, name: str, elem: str) -> str:
        self.types[name] = elem
        return name

    def elem(self, x: str) -> str:
        return self.types[x]

    def _op(self, text: str, elem: str, hint: str = "s") -> str:
        name = self._fresh(hint)
        self.lines.append(f"{name} = {text}")
        return self.bind(name, elem)

    def _binary(self, fop: str, iop: str, a: str, b: str) -> str:
        e = self.elem(a)
        op = fop if is_float(e) else iop
        if op is None:
            raise ScalarEmitError(f"scalar {fop}/{iop}: no lowering for element type {e}")
        return self._op(f"arith.{op} {a}, {b} : {e}", e)

    # -- ScalarBuilder protocol ----------------------------------------
    def constant(self, value: float | int | bool, elem: str) -> str:
        lit = float_literal(float(value), elem) if is_float(elem) else int_literal(value, elem)
        return self._op(f"arith.constant {lit} : {elem}", elem, "c")

    def add(self, a: str, b: str) -> str:
        return self._binary("addf", "ori" if self.elem(a) == "i1" else "addi", a, b)

    def sub(self, a: str, b: str) -> str:
        return self._binary("subf", "xori" if self.elem(a) == "i1" else "subi", a, b)

    def mul(self, a: str, b: str) -> str:
        return self._binary("mulf", "andi" if self.elem(a) == "i1" else "muli", a, b)

    def div(self, a: str, b: str) -> str:
        e = self.elem(a)
        if is_float(e):
            return self._op(f"arith.divf {a}, {b} : {e}", e)
        if e == "i1":
            raise ScalarEmitError("scalar div: integer division of i1 (bool) is not supported; cast to i32 first")
        # numpy: x // 0 == 0, MIN // -1 == MIN (wraps); both are UB for LLVM's sdiv, so guard.
        zero, one, minus_one = self.constant(0, e), self.constant(1, e), self.constant(-1, e)
        is_zero = self._op(f"arith.cmpi eq, {b}, {zero} : {e}", "i1")
        is_m1 = self._op(f"arith.cmpi eq, {b}, {minus_one} : {e}", "i1")
        special = self._op(f"arith.ori {is_zero}, {is_m1} : i1", "i1")
        safe = self._op(f"arith.select {special}, {one}, {b} : {e}", e)
        q = self._op(f"arith.floordivsi {a}, {safe} : {e}", e)
        neg = self._op(f"arith.subi {zero}, {a} : {e}", e)
        q = self._op(f"arith.select {is_m1}, {neg}, {q} : {e}", e)
        return self._op(f"arith.select {is_zero}, {zero}, {q} : {e}", e)

    def neg(self, x: str) -> str:
        e = self.elem(x)
        if is_float(e):
            return self._op(f"arith.negf {x} : {e}", e)
        return self.sub(self.constant(0, e), x)

    def abs(self, x: str) -> str:
        e = self.elem(x)
        if e == "i1":
            return x
        return self._op(f"math.{'absf' if is_float(e) else 'absi'} {x} : {e}", e)

    def _select_first(self, pred: str, a: str, b: str) -> str:
        """numpy's max/min: (a PRED b or isnan(a)) ? a : b; ties return b."""
        e = self.elem(a)
        if is_float(e):
            c = self._op(f"arith.cmpf {_FLOAT_PRED[pred]}, {a}, {b} : {e}", "i1")
            n = self._op(f"arith.cmpf uno, {a}, {a} : {e}", "i1")
            c = self._op(f"arith.ori {c}, {n} : i1", "i1")
        else:
            table = _BOOL_PRED if e == "i1" else _INT_PRED
            c = self._op(f"arith.cmpi {table[pred]}, {a}, {b} : {e}", "i1")
        return self._op(f"arith.select {c}, {a}, {b} : {e}", e)

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
        return self._op(f"arith.{op} {acc}, {x}{flags} : {e}", e)

    def _math(self, fn: str, *args: str) -> str:
        e = self.elem(args[0])
        if not is_float(e):
            raise ScalarEmitError(f"scalar {fn}: needs a float operand, got {e}; cast it to f32 or f64 first")
        symbol = self._fastmath(fn, e) if self._fastmath else None
        if symbol:
            self.called.add((fn, e))
            types = ", ".join([e] * len(args))
            return self._op(f"func.call @{symbol}({', '.join(args)}) : ({types}) -> {e}", e)
        op = {"pow": "powf"}.get(fn, fn)
        return self._op(f"math.{op} {', '.join(args)} : {e}", e)

    def exp(self, x: str) -> str:
        return self._math("exp", x)

    def log(self, x: str) -> str:
        return self._math("log", x)

    def sqrt(self, x: str) -> str:
        return self._op(f"math.sqrt {x} : {self._float(x, 'sqrt')}", self.elem(x))

    def rsqrt(self, x: str) -> str:
        e = self._float(x, "rsqrt")
        return self._op(f"arith.divf {self.constant(1.0, e)}, {self.sqrt(x)} : {e}", e)

    def tanh(self, x: str) -> str:
        return self._math("tanh", x)

    def erf(self, x: str) -> str:
        return self._math("erf", x)

    def sigmoid(self, x: str) -> str:
        return self._math("sigmoid", x) if self._fastmath and self._fastmath("sigmoid", self.elem(x)) else \
            self.div(self.constant(1.0, self.elem(x)), self.add(self.constant(1.0, self.elem(x)), self.exp(self.neg(x))))

    def pow(self, a: str, b: str) -> str:
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
            return self._op(f"arith.cmpf {_FLOAT_PRED[pred]}, {a}, {b} : {e}", "i1")
        table = _BOOL_PRED if e == "i1" else _INT_PRED
        return self._op(f"arith.cmpi {table[pred]}, {a}, {b} : {e}", "i1")

    def select(self, c: str, a: str, b: str) -> str:
        return self._op(f"arith.select {c}, {a}, {b} : {self.elem(a)}", self.elem(a))

    def is_nan(self, x: str) -> str:
        e = self.elem(x)
        if not is_float(e):
            return self.constant(False, "i1")
        return self._op(f"arith.cmpf uno, {x}, {x} : {e}", "i1")

    def cast(self, x: str, to: str) -> str:
        src = self.elem(x)
        if src == to:
            return x
        if is_float(src) and is_float(to):
            wider = FLOAT_ELEMS.index(to) > FLOAT_ELEMS.index(src)
            return self._op(f"arith.{'extf' if wider else 'truncf'} {x} : {src} to {to}", to)
        if to == "i1":  # numpy astype(bool) is x != 0
            return self.compare("ne", x, self.constant(0, src))
        if is_float(to):
            op = "uitofp" if src == "i1" else "sitofp"
            return self._op(f"arith.{op} {x} : {src} to {to}", to)
        if is_float(src):
            return self._op(f"arith.fptosi {x} : {src} to {to}", to)
        if INT_WIDTH[to] > INT_WIDTH[src]:
            op = "extui" if src == "i1" else "extsi"
            return self._op(f"arith.{op} {x} : {src} to {to}", to)
        return self._op(f"arith.trunci {x} : {src} to {to}", to)
