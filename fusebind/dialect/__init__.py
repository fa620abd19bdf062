"""fusebind's IR: the `prim` and `fused` dialects and their entry points.

Owns: the op definitions (prim.py, fused.py), element/tensor types
(types.py), the scalar semantics protocol (scalar.py), reading and printing IR
text (`parse_module`, `print_module`), and the numpy reference interpreter
(`interpret`). It imports nothing from the other fusebind packages.

Limits of the text door (source.py): a `dense<...>` attribute may hold at
most `MAX_DENSE_ELEMENTS` = 2**24 elements (splats included: xDSL stores
them expanded); string literals must close on their line with valid escapes.
Both are refused with a located `IRParseError` before xDSL does the work.
"""

from __future__ import annotations

import io
from typing import Any

from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.printer import Printer

from fusebind.dialect.errors import (
    FusebindAxisError, FusebindError, FusebindIRError, FusebindValueError, InterpretError, IRParseError,
    IRVerifyError, UnsupportedOperation,
)
from fusebind.dialect.fused import CostAttr, Fused, RegionOp, YieldOp
from fusebind.dialect.prim import PRIM_OPS, BinaryOp, Prim, UnaryOp
from fusebind.dialect.registry import (
    OpRegistrationError, UnknownOpError, op_class, op_fingerprint, register_op, registered_ops, user_dialects,
)
from fusebind.dialect.source import parse_with_locations, verify_with_locations

__all__ = [
    "CostAttr", "FusebindAxisError", "FusebindError", "FusebindIRError", "FusebindValueError", "Fused", "IRParseError", "IRVerifyError", "InterpretError", "PRIM_OPS",
    "Prim", "RegionOp", "YieldOp", "interpret", "make_context", "parse_module", "print_module",
    "UnsupportedOperation", "OpRegistrationError", "UnknownOpError", "op_class", "op_fingerprint", "register_op",
    "registered_ops", "UnaryOp", "BinaryOp",
]


def make_context() -> Context:
    """A fresh xDSL context with builtin, func, arith, prim, fused and every
    user dialect of the op registry (as it is now) loaded."""
    ctx = Context()
    for dialect in (Builtin, Func, Arith, Prim, Fused, *user_dialects()):
        ctx.load_dialect(dialect)
    return ctx


def parse_module(text: str, ctx: Context | None = None, name: str = "<input>") -> ModuleOp:
    """Parse and verify IR text.

    Raises `IRParseError` for bad syntax and `IRVerifyError` for the first op
    that fails verification, both with 1-based line/column where known.
    """
    module, source_map = parse_with_locations(ctx or make_context(), text, name)
    diags = verify_with_locations(module, source_map)
    if diags:
        first = diags[0]
        raise IRVerifyError(first.message, first.line, first.column)
    return module


def print_module(module: ModuleOp, generic: bool = False) -> str:
    """The module as text (custom syntax, or MLIR's generic form)."""
    out = io.StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    return out.getvalue() + "\n"


def interpret(module: ModuleOp, *arrays: Any, entry: str | None = None) -> Any:
    """Run a function of the module on numpy arrays with the ops' references.

    `entry` names the `func.func`; by default the only function, else `main`.
    Returns one array for one result, else a tuple.
    """
    from fusebind.dialect.interpreter import run_function

    return run_function(module, arrays, entry)
