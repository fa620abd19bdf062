"""The kernel error channel's emission (kernel ABI v2, docs/KERNEL-ABI.md): a checked index.

Owns the status operand's name and type and `emit_index_check`, which `Emitter.checked_index`
(the one entry point the op emitters call) delegates to: normalize a negative index, clamp a bad
one to 0 (the read stays in the array), and record it in the status memref while that is clear
(the first bad index in loop order). The check's `what` and the kernel inputs its index comes
from are recorded on the emitter (`checks`, `check_sources`), so the runtime can word the error.
Must not: import `emitter` (it imports this module).
"""

from __future__ import annotations

from typing import Any

from fusebind.lowering.linalg_types import Dim
from fusebind.lowering.scalar_text import ScalarEmitError, TextScalarBuilder

#: the status operand of a kernel that checks indices (kernel ABI v2, docs/KERNEL-ABI.md):
#: [check code (0: no error; k: the k-th of the kernel's checks), the bad index, the axis size, 0]
STATUS = "%status"
STATUS_TYPE = "memref<4xi64>"


def emit_index_check(em: Any, b: TextScalarBuilder, raw: str, size: Dim, what: str) -> str:
    """`Emitter.checked_index` (its docstring is the contract): the `index` value to read at."""
    if b.elem(raw) != "i64":
        raise ScalarEmitError(f"{what}: checked_index takes an i64 index, got {b.elem(raw)}")
    site = [k for k, c in enumerate(zip(em.checks, em.check_sources)) if c == (what, em.sources)]
    if not site:
        em.checks.append(what)
        em.check_sources.append(em.sources)
    code = (site[0] if site else len(em.checks) - 1) + 1
    n = b.constant(size, "i64") if isinstance(size, int) else b._op(f"arith.index_cast {size} : index to i64",
                                                                     "i64")
    zero = b.constant(0, "i64")
    neg = b._op(f"arith.cmpi slt, {raw}, {zero} : i64", "i1")
    idx = b._op(f"arith.select {neg}, {b._op(f'arith.addi {raw}, {n} : i64', 'i64')}, {raw} : i64", "i64")
    low, high = b._op(f"arith.cmpi slt, {idx}, {zero} : i64", "i1"), b._op(f"arith.cmpi sge, {idx}, {n} : i64", "i1")
    bad = b._op(f"arith.ori {low}, {high} : i1", "i1")
    safe = b._op(f"arith.select {bad}, {zero}, {idx} : i64", "i64")
    c, first, unset, k = em.fresh("sc"), em.fresh("st"), em.fresh("st"), em.fresh("st")
    stores = [f"    {c}_{j} = arith.constant {j} : index\n    memref.store {v}, {STATUS}[{c}_{j}] : {STATUS_TYPE}"
              for j, v in ((1, raw), (2, n))]
    b.lines += [f"scf.if {bad} {{", f"  {c} = arith.constant 0 : index",
                f"  {first} = memref.load {STATUS}[{c}] : {STATUS_TYPE}",
                f"  {unset} = arith.cmpi eq, {first}, {zero} : i64", f"  scf.if {unset} {{",
                f"    {k} = arith.constant {code} : i64", f"    memref.store {k}, {STATUS}[{c}] : {STATUS_TYPE}",
                *stores, "  }", "}"]
    return b._op(f"arith.index_cast {safe} : i64 to index", "index")
