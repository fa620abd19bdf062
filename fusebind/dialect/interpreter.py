"""The numpy reference interpreter: the oracle of every other path.

Runs a `func.func` of `prim` ops (and `fused.region`s, whose bodies it runs,
and `func.call`s) on numpy arrays, using each op's `reference`. It checks the
arguments against the signature, and each op's result against its declared
type, so a wrong shape is reported where it happens. An op's own `fb.*` error
(numpy's refusal, e.g. `IntegerPowerError`) passes through unchanged, so the
interpreter raises what the executor raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block, SSAValue

from fusebind.dialect.errors import FusebindError, InterpretError
from fusebind.dialect.fused import RegionOp, YieldOp
from fusebind.dialect.prim_base import PrimOp
from fusebind.dialect.types import elem_of, format_shape, numpy_dtype, shape_of


def _functions(module: ModuleOp) -> dict[str, func.FuncOp]:
    return {op.sym_name.data: op for op in module.ops if isinstance(op, func.FuncOp)}


def _pick_entry(funcs: dict[str, func.FuncOp], entry: str | None) -> func.FuncOp:
    if entry is not None:
        if entry not in funcs:
            raise InterpretError(f"no function @{entry} in the module; it has {', '.join('@' + n for n in funcs) or 'none'}")
        return funcs[entry]
    defined = {n: f for n, f in funcs.items() if f.body.blocks}
    if len(defined) == 1:
        return next(iter(defined.values()))
    if "main" in defined:
        return defined["main"]
    raise InterpretError(
        f"cannot choose an entry among {', '.join('@' + n for n in defined) or 'no functions'}; pass entry='<name>'"
    )


def _check_value(what: str, value: np.ndarray, t: Any) -> None:
    if not isinstance(t, TensorType):
        raise InterpretError(f"{what}: only tensor types are supported, found {t}")
    want_dtype = numpy_dtype(elem_of(t))
    if value.dtype != want_dtype:
        raise InterpretError(f"{what}: expected dtype {want_dtype} ({elem_of(t)}), found {value.dtype}")
    shape = shape_of(t)
    if value.ndim != len(shape) or any(d is not None and d != s for d, s in zip(shape, value.shape)):
        raise InterpretError(f"{what}: expected shape {format_shape(shape)} ({t}), found {value.shape}")


class _Interpreter:
    def __init__(self, module: ModuleOp):
        self.funcs = _functions(module)

    def call(self, fn: func.FuncOp, args: Sequence[Any]) -> list[np.ndarray]:
        name = fn.sym_name.data
        inputs = fn.function_type.inputs.data
        if len(args) != len(inputs):
            raise InterpretError(f"@{name} takes {len(inputs)} arguments, {len(args)} given")
        if not fn.body.blocks:
            raise InterpretError(f"@{name} is a declaration without a body; cannot interpret it")
        arrays = []
        for i, (a, t) in enumerate(zip(args, inputs)):
            arr = np.asarray(a)
            _check_value(f"@{name} argument #{i}", arr, t)
            arrays.append(arr)
        return self.run_block(fn.body.blocks[0], arrays)

    def run_block(self, block: Block, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        env: dict[SSAValue, np.ndarray] = dict(zip(block.args, args))
        for op in block.ops:
            ins = [env[v] for v in op.operands]
            if isinstance(op, (func.ReturnOp, YieldOp)):
                return ins
            if isinstance(op, PrimOp):
                try:
                    outs = [op.reference(*ins)]
                except FusebindError:
                    raise  # numpy's own refusal (a negative integer power...): the same error as every arm
                except (ValueError, TypeError, IndexError) as err:
                    shapes = ", ".join(str(tuple(np.shape(a))) for a in ins)
                    raise InterpretError(f"{op.name} failed on operand shapes {shapes}: {err}") from None
            elif isinstance(op, RegionOp):
                outs = self.run_block(op.body.blocks[0], ins)
            elif isinstance(op, func.CallOp):
                callee = op.callee.root_reference.data
                if callee not in self.funcs:
                    raise InterpretError(f"func.call: no function @{callee}")
                outs = self.call(self.funcs[callee], ins)
            else:
                raise InterpretError(f"the interpreter does not support '{op.name}'")
            for i, (res, val) in enumerate(zip(op.results, outs)):
                _check_value(f"{op.name} result #{i}", np.asarray(val), res.type)
                env[res] = val
        raise InterpretError("block has no terminator")


def run_function(module: ModuleOp, arrays: Sequence[Any], entry: str | None) -> Any:
    """Interpret `entry` (see `fusebind.dialect.interpret`)."""
    interp = _Interpreter(module)
    outs = interp.call(_pick_entry(interp.funcs, entry), arrays)
    return outs[0] if len(outs) == 1 else tuple(outs)
