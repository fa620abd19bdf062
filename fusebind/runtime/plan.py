"""Plans: one function of prim ops and fused regions, resolved against one
table snapshot for one input signature, as a list of steps.

Owns `Plan` (the steps, their slots, and running them: `Plan.run`) and
`build_plan` (one block's ops through `StepBuilder`, builder.py, then which
results are copied, where a caller's `out=` array is written, and the
`FastPath`). The rooms it draws on:

- builder.py: `PlanOptions`, primitive and region steps, buffers (one per
  plan for temporaries; fresh, recycled or the caller's for returned values)
  and in-place epilogues;
- steps.py: how each step kind calls its kernel (thunk, chunks on the split
  pool, descriptors, Python callbacks), the alignment copy (`contig`), and
  the `FastPath` the executor calls directly;
- arms.py: `ArmStats`, `RegionDecision` (what `explain` shows),
  `describe_decisions`, and verify mode (`FusedArmMismatch`, warn mode);
- compiler/inplace.py: which in-place markers hold (`matmul_inplace_regions`,
  `argument_inplace_pairs`).

Arm choice (summary; builder.py does it): arm 0 is a region's primitives,
always present; the fused arm is its kernel under `RuntimeFused(id)`, the
row `resolve.choose_row` picks for every table generation, used when priced
and cheaper than arm 0 (an unpriced arm, UNKNOWN_COST, is skipped, never
treated as free). Costs are priced with `PlanOptions.machine` (None: the
process's model), which the plan records (`Plan.machine`, for `explain`).

Running: a plan runs under its own lock (its buffers are shared). Returned
values are fresh arrays per call, or the caller's (`Plan.run(arrays, outs)`:
a kernel writes a returned value straight into the caller's array, anything
else is copied there at the end); an unaligned `out=` array is written by
copy-back, as numpy buffers unaligned operands.

Aliasing: `Plan.inplace_args` names the (argument, result) pairs whose
region is marked in-place-safe (`fused.inplace`, operand k is the function
argument, read by nothing else): only those may be passed as the same array
(executor.py checks `out=` against it).

Must not: compile fused kernels (jit.py), or validate user input
(executor.py).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from fusebind.compiler.cost import MachineModel
from fusebind.compiler.inplace import argument_inplace_pairs, matmul_buffer_of, matmul_inplace_regions
from fusebind.dialect.errors import UnsupportedOperation
from fusebind.runtime.arms import ArmStats, RegionDecision
from fusebind.runtime.bindings import BindingTable
from fusebind.runtime.builder import PlanOptions, StepBuilder
from fusebind.runtime.call import OutputRecycler
from fusebind.runtime.steps import Env, FastPath, Step, np_dtype, static_shape

__all__ = ["Plan", "build_plan"]


@dataclass
class Plan:
    """Steps of one function for one input signature against one table."""

    generation: int
    steps: list[Step]
    n_slots: int
    arg_slots: list[int]
    result_slots: list[int]
    copy_results: list[bool]
    decisions: list[RegionDecision]
    notes: list[str]
    work_order: list[Any]
    fast: FastPath | None = None
    machine: MachineModel | None = None  # the model its arms were priced with
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: per returned position, the env slot a kernel reads the caller's out= array from (-1: copied at the end)
    out_slots: list[int] = field(default_factory=list)
    #: per returned position, its (shape, dtype)
    result_types: list[tuple[tuple[int, ...] | None, np.dtype]] = field(default_factory=list)
    #: (argument index, result index) pairs that may be passed as the same array (in-place-safe region)
    inplace_args: frozenset[tuple[int, int]] = frozenset()
    #: the recyclers of returned outputs (call.py), for tests and `clear_recycled`
    recyclers: list[OutputRecycler] = field(default_factory=list)
    #: names of regions the optimizer left unfused until their kernel is compiled (gated, in its
    #: work order): their ops run as primitives, and each call counts as one arm-0 call of each
    pending: list[str] = field(default_factory=list)

    def run(self, arrays: list[np.ndarray], outs: list[np.ndarray | None] | None = None) -> list[np.ndarray]:
        """Run the steps on `arrays` (validated by the executor). `outs`: per
        result, the caller's array to write it into, or None (validated too:
        dtype, shape, C-contiguous, writeable, no overlap with an input).
        An unaligned `outs` array is not handed to a kernel (kernels assume
        aligned elements): its result is computed into an aligned array and
        copied into it at the end, as numpy buffers an unaligned `out=`."""
        with self.lock:
            env: Env = [None] * self.n_slots
            for s, a in zip(self.arg_slots, arrays):
                env[s] = a
            if outs is not None:
                # the thunk takes exact ndarrays: a subclass (np.memmap ...) is written through a view
                dests = [None if o is None or not o.flags.aligned else o if type(o) is np.ndarray
                         else o.view(np.ndarray) for o in outs]
                for s, d in zip(self.out_slots, dests):
                    if s >= 0:
                        env[s] = d
            for step in self.steps:
                step(env)
            results = [env[s] for s in self.result_slots]
            # copies happen under the lock: a copied value may live in a buffer of this plan
            if outs is None:
                return [np.array(o, copy=True) if c else o if type(o) is np.ndarray else np.asarray(o)
                        for o, c in zip(results, self.copy_results)]
            final = []
            for r, c, o, d in zip(results, self.copy_results, outs, dests):
                if o is None:
                    final.append(np.array(r, copy=True) if c else np.asarray(r))
                    continue
                if r is not d:  # not written in place by its kernel: copy
                    np.copyto(o, r, casting="unsafe")
                final.append(o)
            return final

    def clear_recycled(self) -> None:
        """Drop the spare outputs this plan keeps for reuse."""
        for r in self.recyclers:
            r.clear()



def build_plan(func: Any, table: BindingTable, options: PlanOptions, stats: ArmStats,
               fused_ids: Callable[[Any], tuple[int, str]]) -> Plan:
    """Resolve every node of `func` (a func.func) against `table`."""
    from xdsl.dialects import func as func_d

    from fusebind.dialect.fused import RegionOp

    b = StepBuilder(table, options, stats, fused_ids)
    block = func.body.blocks[0]
    arg_slots = [b.slot(a) for a in block.args]
    b.stable.update(arg_slots)
    ret = block.last_op
    if not isinstance(ret, func_d.ReturnOp):
        raise UnsupportedOperation(f"fusebind: @{func.sym_name.data} does not end in func.return")
    b.returned = set(ret.operands)
    b.inplace_regions = {} if options.verify else matmul_inplace_regions(block)
    for region, (k, r) in b.inplace_regions.items():
        source = matmul_buffer_of(region.operands[k])  # the matmul result itself, or the one its reshape views
        b.inplace_into[source] = region.results[r]
        b.inplace_source[region] = source
        if source is not region.operands[k]:
            b.inplace_views.add(source)
    steps: list[Step] = []
    for op in block.ops:
        if op is ret:
            break
        steps.append(b.region_step(op) if isinstance(op, RegionOp) else b.prim_step(op))
    result_slots = [b.slot(v) for v in ret.operands]
    seen: set[int] = set()
    copy_results = []
    for s in result_slots:
        copy_results.append(s in b.stable or s in seen)
        seen.add(s)
    out_slots = []
    first: set[Any] = set()
    for v in ret.operands:
        dest = b.destinations.get(v)
        out_slots.append(dest[0] if dest is not None and v not in first else -1)
        first.add(v)
    fast = None
    if b.fast_region is not None and len(steps) == 1 and len(result_slots) == 1:
        region, thunk = b.fast_region
        operands = [b.slot(v) for v in region.operands]
        if operands == arg_slots and result_slots == [b.slot(region.results[0])] and not copy_results[0]:
            value = region.results[0]
            dest = b.destinations.get(value)
            fast = FastPath(table.generation, thunk, static_shape(value), np_dtype(value),  # type: ignore[arg-type]
                            dest[1] if dest is not None else None, profile=options.profile,
                            session=options.session)
    return Plan(table.generation, steps, len(b.slots), arg_slots, result_slots, copy_results, b.decisions,
                b.notes, b.work_order, fast, b.machine, out_slots=out_slots,
                result_types=[(static_shape(v), np_dtype(v)) for v in ret.operands],
                inplace_args=argument_inplace_pairs(block, list(ret.operands)),
                recyclers=[d[2] for d in b.destinations.values() if d[2] is not None])

