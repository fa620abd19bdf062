"""Plans: one function of prim ops and fused regions, resolved against one
table snapshot for one input signature, as a list of steps.

Owns `Plan`, `build_plan`, `RegionDecision` (what `explain` shows) and
`FusedArmMismatch`. A region step has arms: arm 0 is its primitives (always
present; resolved lazily, the first time it must run), the fused arm is its
kernel under `RuntimeFused(id)`, used when priced and cheaper than arm 0.
An unpriced arm (UNKNOWN_COST) is skipped, never treated as free. Which row
of the slot is the fused arm is `resolve.choose_row`'s rule (cheapest priced
row that fits; a tie goes to the more trusted, then the newest), made again
for every table generation; the `RegionDecision` keeps the `ResolvedKernel`,
so `explain` names the kernel that runs and why the other rows lost.

A fused arm's kernel caps come from its resolved row (`CAP_SPLIT_AXIS0`: it
may run in chunks; `CAP_SHAPE_DYNAMIC`: it takes any shape, so its Layer-1
cost is composed again for this region's shapes).

Costs are priced with `PlanOptions.machine` (None: the process's model,
calibrate.py, resolved when the plan is built) and the plan records it
(`Plan.machine`, for `explain`).

Primitive steps resolve through `compile_one` (`Static(KIND)`); a miss asks
static_kernels.py to build the kernel, and ops without a generated kernel
(reshape, broadcast_to, constant: views and constants), or with a signature
it refuses, run as their numpy reference (recorded in the plan's notes).

A fused arm is called through its thunk (thunk.py: one native call that
reads the ndarrays itself); large splittable calls run in chunks (views
along axis 0) on a small thread pool, each chunk through the thunk's
GIL-releasing entry. A plan that is one fused kernel on the function's
arguments also offers a `FastPath` the executor calls directly.

Verify mode (`PlanOptions.verify`): arm 0 runs beside every fused arm and
the results are compared. A mismatch raises `FusedArmMismatch`; with
`verify_action="warn"` it warns (`FusedArmMismatchWarning`), the call returns
arm 0's values, and that kernel is never chosen again by plans built with the
same `PlanOptions` (one executor: `PlanOptions.failed_fused_arms`); the
region's `RegionDecision` says so, for `explain`. Another kernel adopted for
the region later is tried (under verify again), whatever its price: the
failed row is passed over while any other row fits.

Stats: every region run is counted per arm (`ArmStats`); it is timed only
under `PlanOptions.profile` (and then so is the `FastPath`), so an
unprofiled call reads no clock.

Alignment: kernels get C-contiguous, aligned arrays. An unaligned input
(`np.frombuffer(buf, offset=1)`) is declined by the thunk and copied by the
step (`_contig`), and an unaligned `out=` array is written by copy-back
(`Plan.run`), as numpy buffers unaligned operands.

Buffers: outputs of kernel steps that the function does not return are
allocated once per plan and reused; returned values are fresh arrays per
call, or the caller's (`Plan.run(arrays, outs)`: a kernel writes a returned
value straight into the caller's array, anything else is copied there at
the end). Large returned outputs come from an `OutputRecycler` (call.py): a
result the caller has dropped is the next call's output. A plan runs under
its own lock (its buffers are shared).

Aliasing: `Plan.inplace_args` names the (argument, result) pairs whose
region is marked in-place-safe (`fused.inplace`, operand k is the function
argument, read by nothing else): only those may be passed as the same array
(executor.py checks `out=` against it).

In-place epilogues: a region marked `fused.inplace = array<i64: k, r>`
(compiler/inplace.py) whose fused arm runs gets operand k's buffer as its
output r, when that operand is the output buffer of the `prim.matmul` kernel
step right before it (BLAS writes it; nothing else reads it; same type).
That buffer follows the policy of result r: reused per plan, or fresh per
call when the function returns it (the caller owns what it gets back). Not
in verify mode (arm 0 must read the matmul's values after the fused arm).

Must not: compile fused kernels (jit.py), or validate user input
(executor.py).
"""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from fusebind.dialect.errors import FusebindError, FusebindInternalError, UnsupportedOperation
from fusebind.compiler.cost import (
    UNKNOWN_COST,
    Cost,
    MachineModel,
    cheaper,
    compose_primitives_cost,
    compose_region_cost,
)
from fusebind.runtime.bindings import BindingTable
from fusebind.runtime.call import (
    RECYCLE_MIN_BYTES,
    SPLIT_THRESHOLD,
    KernelCall,
    OutputRecycler,
    output_allocator,
    split_pool,
)
from fusebind.runtime.dtypes import descriptor_for
from fusebind.runtime.fused_kernels import CAP_SHAPE_DYNAMIC, CAP_SPLIT_AXIS0
from fusebind.runtime.thunk import ANY_DIM, ThunkCall, ThunkUnavailable
from fusebind.runtime.resolve import KernelMiss, ResolvedKernel, compile_one, fmt_cost, static_attrs

Env = list[Any]
Step = Callable[[Env], None]
Alloc = Callable[[Env], np.ndarray]


class FusedArmMismatch(FusebindError, ArithmeticError):
    """Verify mode: a region's fused arm disagrees with its arm 0."""

    def __init__(self, message: str, region: str, fused_id: int) -> None:
        super().__init__(message)
        self.region = region
        self.fused_id = fused_id


class FusedArmMismatchWarning(UserWarning):
    """Verify mode with `verify_action="warn"`: the same finding as a warning."""


@dataclass
class PlanOptions:
    backend: str = "cpu"
    verify: bool = False
    verify_action: str = "raise"  # or "warn"
    threads: int = 1
    static_kernels: Any = None  # a StaticKernels, or None for the process default
    #: the Layer-1 machine model; None: the process's (`calibrate.machine_model()`:
    #: FUSEBIND_MACHINE, else measured), resolved when a plan is built, not before.
    machine: MachineModel | None = None
    #: (binding key, kernel address) of fused arms verify mode ("warn") found
    #: wrong: the plans of these options never choose them again
    failed_fused_arms: set[tuple[Any, int]] = field(default_factory=set)
    #: time every region step and fast-path call (`ArmStats` seconds); off, nothing is timed
    profile: bool = False

    def machine_model(self) -> MachineModel:
        """The model these options price with (resolving None as above)."""
        if self.machine is not None:
            return self.machine
        from fusebind.runtime.calibrate import machine_model

        return machine_model()


@dataclass
class ArmStats:
    """Calls and seconds per arm, summed over every plan of an executor
    (seconds only under `PlanOptions.profile`; they stay 0 otherwise)."""

    arm0_calls: int = 0
    fused_calls: int = 0
    arm0_seconds: float | None = 0.0  # None in a report of calls that were not timed
    fused_seconds: float | None = 0.0


class FastPath:
    """The whole plan as one native call: `function(*args, out)` returns `out`
    when the kernel ran, None when an argument did not fit (take the slow
    path). Valid while the table generation equals `generation`.

    `alloc()` gives the output of one call (recycled when large: call.py);
    large calls use the thunk's GIL-releasing entry, so other Python threads
    run meanwhile. Callers count each call that ran (`calls += 1`); with
    `profile`, `function` also adds the kernel call's time to `seconds`
    (without it, `function` is the bare thunk: nothing is timed)."""

    __slots__ = ("generation", "function", "shape", "dtype", "alloc", "calls", "seconds", "thunk")

    def __init__(self, generation: int, thunk: ThunkCall, shape: tuple[int, ...], dtype: np.dtype,
                 alloc: Callable[[], np.ndarray] | None = None, profile: bool = False) -> None:
        self.generation = generation
        self.thunk = thunk  # keeps the kernel alive
        large = int(np.prod(shape)) * np.dtype(dtype).itemsize >= RECYCLE_MIN_BYTES
        raw = thunk.released if large else thunk.function
        self.function = self._timed(raw) if profile else raw
        self.shape = shape
        self.dtype = dtype
        self.alloc = alloc if alloc is not None else output_allocator(shape, dtype)[0]
        self.calls = 0
        self.seconds = 0.0

    def _timed(self, raw: Callable[..., Any]) -> Callable[..., Any]:
        clock = time.perf_counter

        def timed(*args: Any) -> Any:
            t = clock()
            result = raw(*args)
            if result is not None:  # a declined call ran nothing: the slow path times it
                self.seconds += clock() - t
            return result
        return timed


@dataclass
class RegionDecision:
    """Why a region runs the arm it runs (for `explain`)."""

    name: str
    fused_id: int
    ops: list[str]
    arm0_cost: Cost
    fused_cost: Cost
    arm: str  # "fused" or "arm 0"
    reason: str
    splits: int = 1
    inplace: tuple[int, int] | None = None  # (operand, result) when the fused arm writes in place
    #: the row the fused arm resolved to (key, dtypes, backend, row, why it won); None on a miss
    kernel: ResolvedKernel | None = None


_fmt_cost = fmt_cost


def _shape(value: Any) -> tuple[int, ...] | None:
    from fusebind.dialect.types import is_static, shape_of

    s = shape_of(value.type)
    return tuple(int(d) for d in s) if is_static(s) else None  # type: ignore[arg-type]


def _np_dtype(value: Any) -> np.dtype:
    from fusebind.dialect.types import elem_of, numpy_dtype

    return numpy_dtype(elem_of(value.type))


def _contig(a: Any) -> np.ndarray:
    """`a` as a C-contiguous, aligned array: a copy when it is not both (an
    unaligned view, e.g. `np.frombuffer(buf, offset=1)`, runs through an
    aligned copy, as numpy's own loops do; kernels assume aligned elements)."""
    flags = a.flags
    if flags.c_contiguous and flags.aligned:
        return a
    return np.array(a, order="C", copy=True)


class _Builder:
    """Turns one block's ops into steps over a shared environment of slots."""

    def __init__(self, table: BindingTable, options: PlanOptions, stats: ArmStats,
                 fused_ids: Callable[[Any], tuple[int, str]]) -> None:
        self.table = table
        self.options = options
        self.stats = stats
        self.fused_ids = fused_ids
        self.slots: dict[Any, int] = {}
        self.owned: set[int] = set()  # slots holding an output buffer a kernel step allocated
        self.inplace_regions: dict[Any, tuple[int, int]] = {}  # region -> (operand k, result r)
        self.inplace_into: dict[Any, Any] = {}  # matmul result -> the region result that will reuse its buffer
        self.stable: set[int] = set()  # slots whose array outlives a call (args, constants, buffers, their views)
        self.returned: set[Any] = set()
        #: returned value -> (env slot of the caller's out= array for it, allocator, recycler)
        self.destinations: dict[Any, tuple[int, Callable[[], np.ndarray], OutputRecycler | None]] = {}
        self.notes: list[str] = []
        self.decisions: list[RegionDecision] = []
        self.work_order: list[Any] = []  # compiler WorkItems
        self.fast_region: tuple[Any, Any] | None = None  # (region, thunk) of a fused arm the executor may call
        self.machine = options.machine_model()

    def slot(self, value: Any) -> int:
        s = self.slots.get(value)
        if s is None:
            s = self.slots[value] = len(self.slots)
        return s

    # ------------------------------------------------------------ outputs
    def _out_array(self, value: Any) -> Alloc:
        """The allocation of `value`'s buffer: `alloc(env)`. A returned value
        is written into the caller's out= array when one is in its
        destination slot, else into a fresh or recycled array; any other
        value into one buffer per plan."""
        shape, dtype = _shape(value), _np_dtype(value)
        target = value if value in self.returned else self.inplace_into.get(value)
        if target in self.returned:
            dest = self.destinations.get(target)
            if dest is None:
                fresh, recycler = output_allocator(shape, dtype)  # type: ignore[arg-type]
                dest = self.destinations[target] = (self.slot(("out", target)), fresh, recycler)
            dest_slot, fresh = dest[0], dest[1]

            def alloc_returned(env: Env) -> np.ndarray:
                o = env[dest_slot]
                return fresh() if o is None else o
            return alloc_returned
        buf = np.empty(shape, dtype)  # type: ignore[arg-type]
        self.stable.add(self.slot(value))
        return lambda env: buf

    # ------------------------------------------------------------ primitives
    def prim_steps(self, ops: list[Any]) -> list[Step]:
        return [self.prim_step(op) for op in ops]

    def prim_step(self, op: Any) -> Step:
        from fusebind.dialect.prim import ConstantOp, ElementwiseOp, MatmulOp, PrimOp, ShapeOp

        if not isinstance(op, PrimOp):
            raise UnsupportedOperation(
                f"fusebind: the executor cannot run '{op.name}'; a function may hold prim ops, fused.region "
                "and func.return")
        out = self.slot(op.results[0])
        ins = [self.slot(v) for v in op.operands]
        if isinstance(op, ConstantOp):
            value = op.reference()
            value.flags.writeable = False
            self.stable.add(out)

            def const(env: Env) -> None:
                env[out] = value
            return const
        shapes = [_shape(v) for v in (*op.operands, *op.results)]
        kernel_ok = all(s is not None for s in shapes) and (not isinstance(op, ShapeOp) or op.KIND == "transpose")
        if isinstance(op, MatmulOp) and any(len(s or ()) != 2 for s in shapes):
            kernel_ok = False  # the static matmul kernel is 2-d only
        if kernel_ok:
            resolved = self._resolve_static(op)
            if resolved is not None:
                return self._kernel_step(op, resolved, ins, out, elementwise=isinstance(op, ElementwiseOp))
        return self._reference_step(op, ins, out)

    def _resolve_static(self, op: Any) -> Any:
        try:
            return compile_one(op, self.table, self.options.backend)
        except KernelMiss:
            pass
        try:
            from fusebind.runtime.static_kernels import default_static_kernels, ensure_static_kernel
            from fusebind.runtime.bindings import global_bindings

            rank, attrs = static_attrs(op)
            dtypes = [d.value for d in compile_dtypes(op)]
            ensure_static_kernel(op.KIND, dtypes, rank,
                                 kernels=self.options.static_kernels or default_static_kernels(), **attrs)
            return compile_one(op, global_bindings(), self.options.backend)
        except Exception as exc:  # no static kernel: the numpy reference runs the op
            self.notes.append(f"{op.name}: no static kernel ({type(exc).__name__}: {exc}); runs its numpy reference")
            return None

    def _kernel_step(self, op: Any, resolved: Any, ins: list[int], out: int, elementwise: bool) -> Step:
        in_shapes = [_shape(v) for v in op.operands]
        out_shape = _shape(op.results[0])
        alloc = self._out_array(op.results[0])
        self.owned.add(out)
        if getattr(resolved.kernel, "python_callback", False):
            guarded = _GuardedStep(resolved.kernel, out_shape if elementwise else None)

            def run_guarded(env: Env) -> None:
                o = alloc(env)
                guarded([env[i] for i in ins], [o])
                env[out] = o
            return run_guarded
        large = elementwise and self.options.threads > 1 and int(np.prod(out_shape)) >= SPLIT_THRESHOLD  # type: ignore[arg-type]
        if not large and (not elementwise or all(s == out_shape for s in in_shapes)):
            # Operands described by their own shapes: the thunk makes it one native call.
            try:
                fn = ThunkCall(resolved.kernel, [*in_shapes, out_shape]).function  # type: ignore[list-item]
            except ThunkUnavailable:
                fn = None
            if fn is not None:
                def run_thunk(env: Env) -> None:
                    o = alloc(env)
                    if fn(*[env[i] for i in ins], o) is None:  # e.g. a non-contiguous view: convert
                        if fn(*[_contig(np.asarray(env[i])) for i in ins], o) is None:
                            raise FusebindInternalError(f"fusebind internal error: the call thunk refused the operands of "
                                               f"{op.name}")
                    env[out] = o
                return run_thunk
        call = KernelCall(resolved.kernel, in_shapes, [out_shape],  # type: ignore[list-item]
                          broadcast_inputs_to=out_shape if elementwise else None,
                          splittable=elementwise and bool(out_shape), threads=self.options.threads)

        def run(env: Env) -> None:
            o = alloc(env)
            call([*(_contig(env[i]) for i in ins), o])
            env[out] = o
        return run

    def _reference_step(self, op: Any, ins: list[int], out: int) -> Step:
        from fusebind.dialect.prim import BroadcastToOp, ReshapeOp

        ref = op.reference
        if isinstance(op, (ReshapeOp, BroadcastToOp)):
            self.notes.append(f"{op.name}: shape-only op, runs its numpy reference (reshape: a view; no kernel)")
            if any(i in self.stable for i in ins):
                self.stable.add(out)  # a view of something that outlives the call

        def run(env: Env) -> None:
            env[out] = ref(*(env[i] for i in ins))
        return run

    # ------------------------------------------------------------ regions
    def region_step(self, region: Any) -> Step:

        fused_id, canonical = self.fused_ids(region)
        body = list(region.body.blocks[0].ops)
        yield_op, body_ops = body[-1], body[:-1]
        name = region.region_name
        arm0_cost = compose_primitives_cost(body_ops, self.machine)
        fused_cost: Cost = UNKNOWN_COST
        decision = RegionDecision(name, fused_id, [op.name for op in body_ops], arm0_cost, fused_cost, "arm 0", "")
        self.decisions.append(decision)
        operand_slots = [self.slot(v) for v in region.operands]
        arg_slots = [self.slot(a) for a in region.body.blocks[0].args]
        result_slots = [self.slot(v) for v in region.results]
        yield_slots = [self.slot(v) for v in yield_op.operands]
        arm0_box: list[list[Step]] = []

        def arm0_steps() -> list[Step]:
            if not arm0_box:
                arm0_box.append(self.prim_steps(body_ops))
            return arm0_box[0]

        def run_arm0(env: Env) -> list[Any]:
            for a, o in zip(arg_slots, operand_slots):
                env[a] = env[o]
            for step in arm0_steps():
                step(env)
            return [env[y] for y in yield_slots]

        call = None
        shapes_static = all(_shape(v) is not None for v in (*region.operands, *region.results))
        try:
            resolved = compile_one(region, self.table, self.options.backend, fused_id=fused_id,
                                   exclude=self.options.failed_fused_arms)
        except KernelMiss as miss:
            resolved = None
            if not shapes_static:
                decision.reason = "fused arm needs static shapes; runs arm 0"
            elif canonical == "!failed":
                decision.reason = "fused arm failed to compile (see notes); runs arm 0"
            else:
                decision.reason = f"fused arm not bound yet ({miss.key!r}); queued for compilation, runs arm 0"
                from fusebind.compiler.optimize import WorkItem
                from fusebind.runtime.resolve import node_dtypes

                self.work_order.append(WorkItem(fused_id or 0, name, region.clone(),
                                                tuple(d.value for d in node_dtypes(region))))
        if resolved is not None:
            decision.fused_id = resolved.key.fused_id or fused_id
            decision.kernel = resolved
            fused_cost = resolved.cost
            if CAP_SHAPE_DYNAMIC in resolved.row.caps and shapes_static and fused_cost.is_known \
                    and fused_cost.trust == "composed":
                # compiled for any shape, priced at the shape it was compiled for: price this one
                fused_cost = compose_region_cost(region, self.machine)
            decision.fused_cost = fused_cost
            if (resolved.key, resolved.kernel.address) in self.options.failed_fused_arms:
                decision.reason = _verify_failed_reason(decision.fused_id)
            elif not fused_cost.is_known:
                decision.reason = "fused arm is unpriced (UNKNOWN_COST): skipped, never treated as free"
            elif not cheaper(fused_cost, arm0_cost):
                decision.reason = "fused arm is not cheaper than its primitives"
            else:
                decision.arm = "fused"
                decision.reason = "fused arm is priced and cheaper than its primitives"
                call = self._fused_call(region, resolved.kernel, CAP_SPLIT_AXIS0 in resolved.row.caps)
                decision.splits = call.chunks
                failed_arm = (resolved.key, resolved.kernel.address)
        stats = self.stats
        profile = self.options.profile
        clock = time.perf_counter
        if call is None:
            if not decision.reason:
                decision.reason = "runs arm 0"
            arm0_steps()  # resolve now: arm 0 is the arm that runs

            def run0(env: Env) -> None:
                t = clock() if profile else 0.0
                outs = run_arm0(env)
                for r, v in zip(result_slots, outs):
                    env[r] = v
                if profile:
                    stats.arm0_seconds += clock() - t  # type: ignore[operator]
                stats.arm0_calls += 1
            for r, y in zip(result_slots, yield_slots):
                if y in self.stable or (y in arg_slots):
                    self.stable.add(r)
            return run0
        inplace = self.inplace_regions.get(region)
        if inplace is not None and operand_slots[inplace[0]] not in self.owned:
            inplace = None  # the matmul ran as its numpy reference: its array is not a buffer of this plan
        allocs: list[Alloc | None] = []
        for i, v in enumerate(region.results):
            if inplace is not None and i == inplace[1]:
                allocs.append(None)
                if operand_slots[inplace[0]] in self.stable:
                    self.stable.add(result_slots[i])
            else:
                allocs.append(self._out_array(v))
        if inplace is not None:
            decision.inplace = inplace
            decision.reason += f"; in place: result {inplace[1]} written into operand {inplace[0]}'s buffer"
        src = operand_slots[inplace[0]] if inplace is not None else -1
        kcall = call
        verify = self.options.verify
        if verify:
            arm0_steps()
        failed: list[bool] = []  # verify (warn) found the fused arm wrong: arm 0 for the rest of this plan

        def run_arm0_into_outputs(env: Env) -> None:
            # After a verify mismatch (warn): arm 0 runs, its values are copied into this arm's
            # outputs, which follow the fused arm's buffer policy (fresh when returned), since
            # arm 0's own values may live in buffers this plan reuses.
            t = clock() if profile else 0.0
            outs = [a(env) for a in allocs]  # type: ignore[misc]  # no in-place output in verify mode
            for o, r in zip(outs, run_arm0(env)):
                np.copyto(o, np.asarray(r), casting="unsafe")
            for r, v in zip(result_slots, outs):
                env[r] = v
            if profile:
                stats.arm0_seconds += clock() - t  # type: ignore[operator]
            stats.arm0_calls += 1

        def run_fused(env: Env) -> None:
            if failed:
                run_arm0_into_outputs(env)
                return
            t = clock() if profile else 0.0
            outs = [env[src] if a is None else a(env) for a in allocs]
            kcall([env[i] for i in operand_slots], outs)
            for r, v in zip(result_slots, outs):
                env[r] = v
            if profile:
                stats.fused_seconds += clock() - t  # type: ignore[operator]
            stats.fused_calls += 1
            if verify:
                ref = run_arm0(env)
                if not self._verify(region, decision, outs, ref):
                    # warn mode: arm 0's values are the answer (copied into the fresh or
                    # plan-owned outputs, so nothing aliases arm 0's buffers)
                    for o, r in zip(outs, ref):
                        np.copyto(o, np.asarray(r), casting="unsafe")
                    failed.append(True)
                    self.options.failed_fused_arms.add(failed_arm)
                    decision.arm = "arm 0"
                    decision.reason = _verify_failed_reason(decision.fused_id)
        if isinstance(kcall, _ThunkStep) and kcall.chunks == 1 and not verify:
            self.fast_region = (region, kcall.thunk)
        return run_fused

    def _fused_call(self, region: Any, kernel: Any, splittable: bool) -> Any:
        """The call of a fused arm: through its thunk, else ctypes descriptors.
        `splittable`: the row has CAP_SPLIT_AXIS0."""
        in_shapes = [_shape(v) for v in region.operands]
        out_shapes = [_shape(v) for v in region.results]
        if getattr(kernel, "python_callback", False):
            return _GuardedStep(kernel, None)
        try:
            return _ThunkStep(kernel, in_shapes, out_shapes, splittable, self.options.threads)  # type: ignore[arg-type]
        except ThunkUnavailable as exc:
            self.notes.append(f"call thunk unavailable ({exc}); fused arms are called through ctypes descriptors")
            return _DescriptorStep(KernelCall(kernel, in_shapes, out_shapes,  # type: ignore[arg-type]
                                              splittable=splittable, threads=self.options.threads))

    def _verify(self, region: Any, decision: RegionDecision, fused: list[np.ndarray], ref: list[Any]) -> bool:
        """True when the fused arm's results agree with arm 0's. A mismatch
        raises `FusedArmMismatch`, or with verify_action="warn" warns and
        returns False (the caller then returns arm 0's values)."""
        agree = True
        for i, (f, r) in enumerate(zip(fused, ref)):
            r = np.asarray(r)
            if f.dtype.kind == "f":
                rtol, atol = (1e-4, 1e-5) if f.dtype == np.float32 else (1e-9, 1e-12)
                ok = np.allclose(f, r, rtol=rtol, atol=atol, equal_nan=True)
            else:
                ok = np.array_equal(f, r)
            if ok:
                continue
            diff = np.abs(f.astype(np.float64) - r.astype(np.float64))
            worst = float(np.nanmax(diff)) if diff.size else 0.0
            bad = int(np.count_nonzero(~np.isclose(f, r, equal_nan=True))) if f.dtype.kind == "f" else int(
                np.count_nonzero(f != r))
            msg = (f"fusebind verify: region @{decision.name} (FusedOpId {decision.fused_id}) result #{i}: the fused "
                   f"arm differs from arm 0 in {bad} of {f.size} elements (max abs difference {worst:.6g}); "
                   "the fused kernel bound for this region is wrong: rebuild or unbind it")
            if self.options.verify_action != "warn":
                raise FusedArmMismatch(msg, decision.name, decision.fused_id)
            warnings.warn(msg + "; arm 0's values are returned and this kernel is not run again for this "
                          "function", FusedArmMismatchWarning, stacklevel=4)
            agree = False
        return agree


def _verify_failed_reason(fused_id: int) -> str:
    return (f"fused arm (FusedOpId {fused_id}) differed from arm 0 under verify (warned): arm 0's values are "
            "returned, and this kernel does not run again for this function")


class _ThunkStep:
    """A fused-arm call through the thunk; large splittable calls in chunks."""

    def __init__(self, kernel: Any, in_shapes: list[tuple[int, ...]], out_shapes: list[tuple[int, ...]],
                 splittable: bool, threads: int) -> None:
        self.thunk = ThunkCall(kernel, [*in_shapes, *out_shapes])
        out_numel = int(np.prod(out_shapes[0])) if out_shapes else 0
        lead = out_shapes[0][0] if out_shapes and out_shapes[0] else 0
        self.chunks = threads if (splittable and threads > 1 and out_numel >= SPLIT_THRESHOLD
                                  and lead >= threads) else 1
        self.bounds = [lead * c // self.chunks for c in range(self.chunks + 1)]
        if self.chunks > 1:  # chunks: any leading size
            self.chunk_thunk = ThunkCall(kernel, [(ANY_DIM, *s[1:]) for s in (*in_shapes, *out_shapes)])

    def __call__(self, ins: list[Any], outs: list[np.ndarray]) -> None:
        if self.chunks == 1:
            if self.thunk.function(*ins, *outs) is None:  # e.g. a non-contiguous input
                if self.thunk.function(*(_contig(np.asarray(a)) for a in ins), *outs) is None:
                    raise FusebindInternalError(f"fusebind internal error: the call thunk refused validated operands "
                                       f"{[(np.asarray(a).dtype, np.shape(a)) for a in ins]}")
            return
        arrays = [*(_contig(np.asarray(a)) for a in ins), *outs]
        fn = self.chunk_thunk.released
        b = self.bounds
        chunks = [[a[b[c]:b[c + 1]] for a in arrays] for c in range(self.chunks)]
        pool = split_pool(self.chunks)
        futures = [pool.submit(fn, *chunk) for chunk in chunks[1:]]
        ok = fn(*chunks[0]) is not None
        ok = all([f.result() is not None for f in futures]) and ok
        if not ok:
            raise FusebindInternalError("fusebind internal error: the call thunk refused a chunk of a split call")


class _GuardedStep:
    """A Python-callback kernel (`Kernel.python_callback`): called through
    `Kernel.__call__`, which re-raises what the callback raised. The thunk and
    prepared descriptors call the address directly and would lose it."""

    chunks = 1

    def __init__(self, kernel: Any, broadcast_inputs_to: tuple[int, ...] | None) -> None:
        self.kernel = kernel
        self.broadcast_inputs_to = broadcast_inputs_to

    def __call__(self, ins: list[Any], outs: list[np.ndarray]) -> None:
        arrays = [_contig(np.asarray(a)) for a in ins]
        if self.broadcast_inputs_to is not None:
            arrays = [np.broadcast_to(a, self.broadcast_inputs_to) for a in arrays]
        self.kernel(*(descriptor_for(a) for a in (*arrays, *outs)))


class _DescriptorStep:
    """A fused-arm call through prepared ctypes descriptors (no thunk here)."""

    def __init__(self, call: KernelCall) -> None:
        self.call = call
        self.chunks = call.chunks

    def __call__(self, ins: list[Any], outs: list[np.ndarray]) -> None:
        self.call([*(_contig(np.asarray(a)) for a in ins), *outs])


def compile_dtypes(op: Any) -> tuple[Any, ...]:
    from fusebind.runtime.resolve import node_dtypes

    return node_dtypes(op)


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
                return [np.array(o, copy=True) if c else np.asarray(o) for o, c in zip(results, self.copy_results)]
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


def _inplace_pairs(block: Any, options: PlanOptions) -> dict[Any, tuple[int, int]]:
    """Regions of `block` whose in-place marker the plan may honour: operand k
    is a `prim.matmul` result of the same block, read only by the region, of
    result r's type and a static shape (the marker is re-checked, not trusted)."""
    from fusebind.compiler.inplace import inplace_of
    from fusebind.dialect.fused import RegionOp
    from fusebind.dialect.prim import MatmulOp

    pairs: dict[Any, tuple[int, int]] = {}
    if options.verify:
        return pairs
    for op in block.ops:
        if not isinstance(op, RegionOp):
            continue
        marker = inplace_of(op)
        if marker is None:
            continue
        k, r = marker
        if not (0 <= k < len(op.operands) and 0 <= r < len(op.results)):
            continue
        value = op.operands[k]
        if not isinstance(value.owner, MatmulOp) or value.owner.parent_block() is not block:
            continue
        if len(list(value.uses)) != 1 or value.type != op.results[r].type or _shape(value) is None:
            continue
        pairs[op] = (k, r)
    return pairs


def build_plan(func: Any, table: BindingTable, options: PlanOptions, stats: ArmStats,
               fused_ids: Callable[[Any], tuple[int, str]]) -> Plan:
    """Resolve every node of `func` (a func.func) against `table`."""
    from xdsl.dialects import func as func_d

    from fusebind.dialect.fused import RegionOp

    b = _Builder(table, options, stats, fused_ids)
    block = func.body.blocks[0]
    arg_slots = [b.slot(a) for a in block.args]
    b.stable.update(arg_slots)
    ret = block.last_op
    if not isinstance(ret, func_d.ReturnOp):
        raise UnsupportedOperation(f"fusebind: @{func.sym_name.data} does not end in func.return")
    b.returned = set(ret.operands)
    b.inplace_regions = _inplace_pairs(block, options)
    b.inplace_into = {region.operands[k]: region.results[r] for region, (k, r) in b.inplace_regions.items()}
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
            fast = FastPath(table.generation, thunk, _shape(value), _np_dtype(value),  # type: ignore[arg-type]
                            dest[1] if dest is not None else None, profile=options.profile)
    return Plan(table.generation, steps, len(b.slots), arg_slots, result_slots, copy_results, b.decisions,
                b.notes, b.work_order, fast, b.machine, out_slots=out_slots,
                result_types=[(_shape(v), _np_dtype(v)) for v in ret.operands],
                inplace_args=_inplace_args(block, ret),
                recyclers=[d[2] for d in b.destinations.values() if d[2] is not None])


def _inplace_args(block: Any, ret: Any) -> frozenset[tuple[int, int]]:
    """(argument i, result j) pairs the caller may pass as one array: a region
    marked in-place-safe (`fused.inplace = [k, r]`, compiler/inplace.py: the
    body reads operand k at the index it writes result r) whose operand k is
    argument i, read by nothing else, and whose result r is returned at j
    with argument i's type."""
    from fusebind.compiler.inplace import inplace_of
    from fusebind.dialect.fused import RegionOp

    pairs = set()
    args = list(block.args)
    returned = list(ret.operands)
    for op in block.ops:
        marker = inplace_of(op) if isinstance(op, RegionOp) else None
        if marker is None:
            continue
        k, r = marker
        if not (0 <= k < len(op.operands) and 0 <= r < len(op.results)):
            continue
        value = op.operands[k]
        if not any(value is a for a in args) or len(list(value.uses)) != 1 or value.type != op.results[r].type:
            continue
        if _shape(value) is None or sum(v is op.results[r] for v in returned) != 1:
            continue
        pairs.add((next(i for i, a in enumerate(args) if a is value),
                   next(j for j, v in enumerate(returned) if v is op.results[r])))
    return frozenset(pairs)


def describe_decisions(decisions: list[RegionDecision]) -> list[str]:
    """Readable lines for `explain`: per region its costs, the kernel its
    fused arm resolved to (key, dtypes, backend, row, source, cost and trust,
    and why each other row lost), and the arm that runs and why."""
    lines = []
    for d in decisions:
        ident = f"FusedOpId {d.fused_id}" if d.fused_id else "FusedOpId unassigned"
        lines.append(f"region @{d.name} ({ident}): {len(d.ops)} ops [{', '.join(d.ops)}]")
        lines.append(f"  arm 0 (primitives): {_fmt_cost(d.arm0_cost)}")
        lines.append(f"  fused arm:          {_fmt_cost(d.fused_cost)}")
        k = d.kernel
        if k is not None:
            lines += k.describe("  ")
        split = f", split over {d.splits} threads" if d.splits > 1 else ""
        runs = f" {k.key!r} row {k.index} ({k.row.source})" if k is not None and d.arm == "fused" else ""
        lines.append(f"  chosen: {d.arm}{runs} -- {d.reason}{split}")
    return lines
