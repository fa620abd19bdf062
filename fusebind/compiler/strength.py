"""Strength reduction of `prim.pow` by a constant exponent: a canonicalization
that `optimize_graph` runs before fusion (and `fusebind-opt -p strength-reduce`).

`x ** 3` lowered as `pow` calls libm's `powf` per element (~20x the memory
bound for f32); as `(x * x) * x` it is a vector loop at the memory bound, and
the catalog's GELU-tanh rule then also matches `x ** 3`.

What is rewritten, for `prim.pow(x, c)` with `c` a `prim.constant` whose
values are all equal (a splat), when the result has x's shape (or a static
shape x is broadcast to):
- floats, any exponent shape: 1 -> x, 2 -> x*x, 3 -> (x*x)*x,
  4 -> (x*x)*(x*x), -1 -> 1/x, 0 -> ones (static shapes only). f32 cubes
  and fourth powers are computed in f64 and rounded once to f32 (x*x is
  exact there), so they are correctly rounded but for double rounding
  (max 0.5 ULP measured, exhaustively over a binade); f64 ones round two or
  three times (1.29 / 1.91 ULP measured), docs/FASTMATH.md "pow".
  0.5 -> sqrt(x) only for a one-element exponent: that is numpy's own fast
  path (`pow` loops take sqrt, 1/x, x*x, x and 1 for a scalar exponent, so
  those five are bit-exact there); for a full-shaped exponent numpy calls
  `pow`, whose `pow(-0, 0.5) = +0` and `pow(-inf, 0.5) = +inf` sqrt does not
  give, so it is left alone.
- integers: any exponent >= 0, by square-and-multiply (exact modulo 2^width,
  as numpy wraps), when it needs at most `MAX_INT_MULTIPLIES` multiplies;
  0 -> ones. A negative constant integer exponent raises numpy's error
  (`IntegerPowerError`) here, at optimize time, when the result is known not
  to be empty.
Pows inside an existing `fused.region` are left alone: a region is a recipe,
and rewriting it would change its identity (and an adopted kernel's match).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from fusebind.compiler.passes import register_pass
from fusebind.dialect.prim import BroadcastToOp, CastOp, ConstantOp, DivOp, MulOp, PowOp, SqrtOp
from fusebind.dialect.types import FLOAT_TYPES, is_static, numpy_dtype, shape_of

#: Integer powers by a constant are unrolled into at most this many multiplies (x ** 1000 is 15).
MAX_INT_MULTIPLIES = 16

#: Float exponents rewritten for any exponent shape; 0.5 needs a one-element exponent (see above).
FLOAT_EXPONENTS = (0.0, 1.0, 2.0, 3.0, 4.0, -1.0)


def splat_exponent(op: PowOp) -> float | int | None:
    """The exponent's single value when it is a constant holding one value, else None."""
    values = op.constant_exponent()
    if values is None or values.size == 0:
        return None
    first = values.reshape(-1)[0]
    if not (values == first).all():
        return None
    return int(first) if values.dtype.kind in "iu" else float(first)


def square_and_multiply(n: int) -> tuple[list[tuple[int, int]], int] | None:
    """A multiply program for x ** n, n >= 1: (steps, result). Values start as [x]; each step
    (i, j) appends values[i] * values[j]; values[result] is x ** n. None past MAX_INT_MULTIPLIES."""
    steps: list[tuple[int, int]] = []
    square, acc, count = 0, None, 1  # square: x ** (2 ** k); acc: the product of the bits so far
    while n:
        if n & 1:
            if acc is None:
                acc = square
            else:
                steps.append((acc, square))
                acc, count = count, count + 1
        n >>= 1
        if n:
            steps.append((square, square))
            square, count = count, count + 1
    if acc is None or len(steps) > MAX_INT_MULTIPLIES:
        return None
    return steps, acc


class PowByConstant(RewritePattern):
    """`prim.pow(x, splat c)` -> multiplies, sqrt, reciprocal or ones (see the module docstring)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: PowOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op.parent_op(), func.FuncOp):
            return
        c = splat_exponent(op)
        if c is None:
            return
        x = op.lhs
        out_shape = shape_of(op.results[0].type)
        new_ops: list[Operation] = []
        if shape_of(x.type) != out_shape:
            if not is_static(out_shape):
                return
            bcast = BroadcastToOp(x, out_shape)
            new_ops.append(bcast)
            x = bcast.results[0]
        result = self._rewrite(op, x, c, new_ops)
        if result is None:
            return
        exponent = op.rhs.owner
        rewriter.replace(op, new_ops, [result])
        if isinstance(exponent, ConstantOp) and not exponent.results[0].uses:
            rewriter.erase(exponent)

    def _rewrite(self, op: PowOp, x: SSAValue, c: float | int, new_ops: list[Operation]) -> SSAValue | None:
        elem = op.result_elem()

        def add(new: Operation) -> SSAValue:
            new_ops.append(new)
            return new.results[0]

        if c == 0:
            shape = shape_of(op.results[0].type)
            if not is_static(shape):
                return None
            one = add(ConstantOp.from_array(np.ones((), numpy_dtype(elem))))
            return add(BroadcastToOp(one, shape))
        if elem in FLOAT_TYPES:
            if c == 0.5 and op.constant_exponent().size == 1:  # type: ignore[union-attr]
                return add(SqrtOp(x))
            if c not in FLOAT_EXPONENTS:
                return None
            if c == -1.0:
                return add(DivOp(add(ConstantOp.from_array(np.ones((), numpy_dtype(elem)))), x))
            if c == 1.0:
                return x
            if c == 2.0:
                return add(MulOp(x, x))  # correctly rounded, as numpy's own square
            wide = x
            if elem == "f32":  # in f64 x*x is exact and one more multiply rounds once: ~0.5 ULP
                wide = add(CastOp(x, "f64"))
            sq = add(MulOp(wide, wide))
            power = add(MulOp(sq, wide) if c == 3.0 else MulOp(sq, sq))
            return add(CastOp(power, "f32")) if elem == "f32" else power
        if c < 0:
            return None  # a dynamic, possibly empty result: the reference raises at run time
        program = square_and_multiply(int(c))
        if program is None:
            return None
        steps, result = program
        values = [x]
        for i, j in steps:
            values.append(add(MulOp(values[i], values[j])))
        return values[result]


def check_constant_exponents(module: ModuleOp) -> None:
    """Raise numpy's `IntegerPowerError` for any integer pow by a constant negative exponent
    whose result is known not to be empty. Done before the rewrite walk, which would attach
    the whole module's IR to the user's error."""
    for op in module.walk():
        if isinstance(op, PowOp):
            op.check_constant_exponent()


def strength_reduce(module: ModuleOp) -> None:
    """Check constant integer exponents, then apply `PowByConstant` to every function, in place."""
    check_constant_exponents(module)
    PatternRewriteWalker(PowByConstant(), apply_recursively=False).rewrite_module(module)


@register_pass
@dataclass(frozen=True)
class StrengthReducePass(ModulePass):
    """`prim.pow` by a small constant -> multiplies (see `fusebind.compiler.strength`)."""

    name = "strength-reduce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        strength_reduce(op)
