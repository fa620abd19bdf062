"""Dtype promotion of the narrow floats: float16 as numpy, bfloat16 on JAX's lattice.

Owns: `BFLOAT16` (ml_dtypes' dtype, the one JAX uses for numpy bfloat16), `is_floating`
(numpy's `kind == "f"` test, which bfloat16 fails: ml_dtypes registers it with kind "V") and
`narrow_result`, the dtype the traced ufuncs compute in when a bfloat16 operand meets others.

Why a lattice of its own: numpy with ml_dtypes promotes bfloat16 as a foreign type. JAX (whose
promotion people who hold bfloat16 weights expect) keeps bfloat16 where numpy widens:
- `bf16 @ bf16` is bf16 (numpy + ml_dtypes: float32);
- `bf16 + <int16/uint16 array>` is bf16 (numpy: float32), `+ <int32/int64/uint32/uint64 array>` bf16
  (numpy: float64); int8/uint8/bool arrays and every Python scalar keep bf16 in numpy too;
- `bf16 + f16` is f32 (numpy + ml_dtypes agrees), `bf16 + f32` f32, `bf16 + f64` f64.
float16 follows numpy exactly (`f16 + i32` is float64), as the issue asks. docs/DTYPES.md lists
each deviation; `test/api/test_narrow_floats_jit.py` checks every case against JAX's table.

Must not: know about prim ops or build IR; it is consulted by the dtype resolver
(api/numpy_ufuncs.py `resolve`), nothing more.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fusebind.dialect.types import bfloat16_dtype, is_bfloat16


def __getattr__(name: str) -> Any:
    # `BFLOAT16` on first use: importing ml_dtypes costs ~1 s of CPU, which programs without
    # bfloat16 never pay (is_bfloat16 answers without it; docs/COMPILE_LATENCY.md)
    if name == "BFLOAT16":
        return bfloat16_dtype()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: the gufuncs whose loop numpy + ml_dtypes gives a float32 output for bfloat16 inputs
_WIDENING_GUFUNCS = frozenset({"matmul", "vecdot", "matvec", "vecmat"})


def is_floating(dt: Any) -> bool:
    """numpy's `dt.kind == "f"`, true for bfloat16 too (whose kind is "V")."""
    dt = np.dtype(dt)
    return dt.kind == "f" or is_bfloat16(dt)


def bf16_lattice(keys: Sequence[Any]) -> np.dtype | None:
    """JAX's result dtype for operands `keys` (dtypes, or the Python types `int` / `float` /
    `bool` of weak scalars) when one of them is bfloat16; None when none is. Integers, bools and
    weak scalars take bfloat16; a wider float wins, float16 meets bfloat16 at float32."""
    dts = [np.dtype(k) for k in keys if not isinstance(k, type)]
    if not any(is_bfloat16(d) for d in dts):
        return None
    floats = [d for d in dts if is_floating(d) and not is_bfloat16(d)]
    if not floats:
        return bfloat16_dtype()
    return np.result_type(np.float32, *floats)


def narrow_result(ufunc: np.ufunc, keys: Sequence[Any], ins: list[np.dtype],
                  outs: list[np.dtype]) -> tuple[list[np.dtype], list[np.dtype]] | None:
    """The loop dtypes (ins, outs) of `ufunc` on JAX's lattice where it differs from numpy's
    (`ins`, `outs`, numpy's resolution), or None to keep numpy's. Only loops whose inputs numpy
    promotes to one dtype are touched (not ldexp's int exponent, say)."""
    target = bf16_lattice(keys)
    if target is None or len(set(ins)) != 1:
        return None
    name = ufunc.__name__
    if ins[0] == target:
        if name in _WIDENING_GUFUNCS and is_bfloat16(target) and outs != [target]:
            return ins, [target] * len(outs)  # f32 BLAS inside, rounded once to bf16
        return None
    # numpy widened (bf16 with an int32 array: float64): recompute numpy's loop at the target
    loop = ufunc.resolve_dtypes(tuple(target if not isinstance(k, type) else k for k in keys)
                                + (None,) * ufunc.nout)
    new_ins, new_outs = list(loop[:ufunc.nin]), list(loop[ufunc.nin:])
    if name in _WIDENING_GUFUNCS and is_bfloat16(target):
        new_outs = [target] * len(new_outs)
    return new_ins, new_outs
