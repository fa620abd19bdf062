"""Building the steps of a plan: one block's ops as closures over a shared
environment of slots, with their buffers and their arms.

Owns `PlanOptions` (how plans are built), `StepBuilder` and `compile_dtypes`.
Primitive steps resolve through `compile_one` (a miss asks static_kernels.py
to build the kernel; ops without one run as their numpy reference; a transpose
only matmuls read is a view, which a BLAS matmul takes as its gemm's transpose
flag on the untransposed array: blas_operands.py). A region
step has arm 0 (its primitives, resolved lazily) and, when priced and
cheaper, its fused arm (the call kinds of steps.py; the comparison under
verify is arms.py's). A fused arm's kernel caps come from its resolved row
(`CAP_SPLIT_AXIS0`: it may run in chunks; `CAP_SHAPE_DYNAMIC`: it takes any
shape, so its Layer-1 cost is composed again for this region's shapes). A
kernel verify mode ("warn") found wrong is in `PlanOptions.failed_fused_arms`
and is never chosen again by plans of the same options; the region's
`RegionDecision` says so. Every region run is counted per arm (`ArmStats`);
it is timed only under `PlanOptions.profile`, so an unprofiled call reads no
clock.

Buffers: an output of a kernel step the function does not return is one
array per plan, reused every call; a returned value is the caller's `out=`
array when there is one in its destination slot, else a fresh or recycled
array (`OutputRecycler`, call.py). `stable` records the slots whose array
outlives a call (arguments, constants, plan buffers and their views): a
result in one is copied before it is returned. An in-place region (marker
re-checked by compiler/inplace.py) writes its result into its matmul
operand's buffer, which then follows the result's buffer policy; a compiled
arm runs there as its in-place kernel variant (builder_inplace.py).

Must not: compile fused kernels other than in-place variants (jit.py),
validate user input (executor.py), or assemble and run the plan (plan.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from fusebind.lowering.backend import DEFAULT_BACKEND
from fusebind.runtime.backend import runtime_backend
from fusebind.compiler.cost import (
    UNKNOWN_COST,
    Cost,
    MachineModel,
    cheaper,
    compose_primitives_cost,
    compose_region_cost,
)
from fusebind.dialect.errors import FusebindError, FusebindInternalError, UnsupportedOperation
from fusebind.runtime.arms import ArmStats, RegionDecision, verify_failed_reason, verify_results
from fusebind.runtime.bindings import BindingTable
from fusebind.runtime.builder_inplace import fused_call, plain_fused_runner, variant_call
from fusebind.runtime.blas_operands import (blas_batched, blas_threaded, blas_transposed, column_major_retry,
                                            transpose_is_view)
from fusebind.runtime.call import PY_SPLIT_THRESHOLD, KernelCall, OutputRecycler, output_allocator
from fusebind.runtime.fused_kernels import CAP_SPLIT_AXIS0
from fusebind.runtime.resolve import KernelMiss, compile_one, row_is_dynamic, static_attrs
from fusebind.runtime.steps import (
    Alloc,
    Env,
    GuardedStep,
    Step,
    ThunkStep,
    contig,
    np_dtype,
    static_shape,
)
from fusebind.runtime.strict import internal_bug
from fusebind.runtime.thunk import ThunkCall, ThunkUnavailable


@dataclass
class PlanOptions:
    backend: str = DEFAULT_BACKEND
    verify: bool = False
    verify_action: str = "raise"  # or "warn"
    threads: int = 1
    static_kernels: Any = None  # a StaticKernels, or None for the session's
    #: the session static kernels are bound in (None: the default session)
    session: Any = None
    #: the Layer-1 machine model; None: the process's (`calibrate.machine_model()`:
    #: FUSEBIND_MACHINE, else measured), resolved when a plan is built, not before.
    machine: MachineModel | None = None
    #: (binding key, kernel address) of fused arms verify mode ("warn") found
    #: wrong: the plans of these options never choose them again
    failed_fused_arms: set[tuple[Any, int]] = field(default_factory=set)
    #: time every region step and fast-path call (`ArmStats` seconds); off, nothing is timed
    profile: bool = False
    #: the object cache in-place kernel variants go to (builder_inplace.py); None: `default_cache()`
    cache: Any = None

    def machine_model(self) -> MachineModel:
        """The model these options price with (resolving None as above)."""
        if self.machine is not None:
            return self.machine
        from fusebind.runtime.calibrate import machine_model

        return machine_model()



class StepBuilder:
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
        self.inplace_source: dict[Any, Any] = {}  # in-place region -> the matmul result whose buffer it reuses
        self.inplace_views: set[Any] = set()  # matmul results an in-place region reads through a reshape
        self.stable: set[int] = set()  # slots whose array outlives a call (args, constants, buffers, their views)
        self.returned: set[Any] = set()
        #: returned value -> (env slot of the caller's out= array for it, allocator, recycler)
        self.destinations: dict[Any, tuple[int, Callable[[], np.ndarray], OutputRecycler | None]] = {}
        self.notes: list[str] = []
        self.decisions: list[RegionDecision] = []
        self.work_order: list[Any] = []  # compiler WorkItems
        self.fast_region: tuple[Any, Any] | None = None  # (region, thunk) of a fused arm the executor may call
        self.machine = options.machine_model()
        self.transpose_views: set[Any] = set()  # transpose results run as views, read by matmuls (blas_operands.py)

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
        shape, dtype = static_shape(value), np_dtype(value)
        into = self.inplace_into.get(value)
        if into is not None and value in self.inplace_views:
            # the in-place epilogue reads this matmul through a reshape (conv): the buffer is the
            # epilogue result's (its shape, its policy: plan buffer, fresh, or the caller's out=,
            # all C-contiguous), the matmul writes a row-major view of it; the region step writes
            # its result into that same array (`inplace_base_slot`)
            outer = self._out_array(into)
            if self.slot(into) in self.stable:
                self.stable.add(self.slot(value))
            base = self.inplace_base_slot(into)

            def alloc_view(env: Env) -> np.ndarray:
                o = env[base] = outer(env)
                return o.reshape(shape)
            return alloc_view
        target = value if value in self.returned else into
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

    def inplace_base_slot(self, result: Any) -> int:
        """The slot holding the buffer of in-place `result` when its matmul wrote a view of it."""
        return self.slot(("inplace-base", result))

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
        shapes = [static_shape(v) for v in (*op.operands, *op.results)]
        if transpose_is_view(op):
            return self._transpose_view_step(op, ins, out)
        kernel_ok = all(s is not None for s in shapes) and (not isinstance(op, ShapeOp) or op.KIND == "transpose")
        if isinstance(op, MatmulOp) and any(len(s or ()) != 2 for s in shapes):
            from fusebind.runtime.session import default_session

            batched = blas_batched(op, self.transpose_views, self.options.session or default_session(),
                                   runtime_backend(self.options.backend), self.options.threads)
            if batched is not None:  # one native call over the batch entries (runtime/blas.py)
                kernel, sources = batched
                return self._kernel_step(op, kernel, [self.slot(v) for v in sources], out, elementwise=False,
                                         in_shapes=[static_shape(v) for v in sources])
            kernel_ok = False  # numpy's matmul (f16/bf16, integers, dynamic shapes)
        if not getattr(op, "kernel_computable", lambda: True)():
            kernel_ok = False  # its reference is its meaning (prim.check raises; a traced integer exponent)
        if kernel_ok:
            resolved = self._resolve_static(op)
            if resolved is not None:
                from fusebind.runtime.session import default_session

                transposed = blas_transposed(op, resolved.kernel, self.transpose_views,
                                             self.options.session or default_session(),
                                             runtime_backend(self.options.backend), self.options.threads)
                if transposed is not None:  # w.T read as the gemm's Trans flag: the kernel gets w itself
                    kernel, sources = transposed
                    return self._kernel_step(op, kernel, [self.slot(v) for v in sources], out, elementwise=False,
                                             in_shapes=[static_shape(v) for v in sources])
                kernel = blas_threaded(op, resolved.kernel, self.options.session or default_session(),
                                       runtime_backend(self.options.backend), self.options.threads)
                return self._kernel_step(op, kernel, ins, out, elementwise=isinstance(op, ElementwiseOp))
        return self._reference_step(op, ins, out)

    def _transpose_view_step(self, op: Any, ins: list[int], out: int) -> Step:
        """A transpose only matmuls read: a numpy view (a BLAS matmul then reads its source with
        the Trans flag; numpy's batched matmul reads the view), never a copy kernel."""
        self.transpose_views.add(op.results[0])
        self.notes.append(f"{op.name}: read only by matmuls: a view, their gemm's transpose flag (no copy kernel)")
        if ins[0] in self.stable:
            self.stable.add(out)  # a view of something that outlives the call
        perm = op.perm_list()
        (src,) = ins

        def view(env: Env) -> None:
            env[out] = np.transpose(env[src], perm)
        return view

    def _resolve_static(self, op: Any) -> Any:
        try:
            return compile_one(op, self.table, self.options.backend)
        except KernelMiss:
            pass
        try:
            from fusebind.runtime.session import default_session
            from fusebind.runtime.static_kernels import ensure_static_kernel

            session = self.options.session or default_session()
            rank, attrs = static_attrs(op)
            dtypes = [d.value for d in compile_dtypes(op)]
            ensure_static_kernel(op.KIND, dtypes, rank, kernels=self.options.static_kernels, session=session,
                                 backend=self.options.backend, **attrs)
            return compile_one(op, session.table, self.options.backend)
        except FusebindError as exc:  # no static kernel (it says why): the numpy reference runs the op
            self.notes.append(f"{op.name}: no static kernel ({type(exc).__name__}: {exc}); runs its numpy reference")
            return None
        except Exception as exc:  # a fusebind bug: the reference still answers, but it must not hide
            internal_bug(f"building the static kernel of {op.name}", exc, "the op runs its numpy reference")
            self.notes.append(f"{op.name}: no static kernel (internal error {type(exc).__name__}: {exc}); "
                              "runs its numpy reference")
            return None

    def _kernel_step(self, op: Any, kernel: Any, ins: list[int], out: int, elementwise: bool,
                     in_shapes: list[Any] | None = None) -> Step:
        """`kernel` runs `op` on the arrays in slots `ins` (of `in_shapes`: default, the operands')."""
        in_shapes = [static_shape(v) for v in op.operands] if in_shapes is None else in_shapes
        out_shape = static_shape(op.results[0])
        alloc = self._out_array(op.results[0])
        self.owned.add(out)
        # a Python callback, or a kernel of ABI v2 (a status operand, e.g. a user's C kernel bound
        # under a prim op's key): Kernel.__call__ passes the status and raises what it reports
        if getattr(kernel, "python_callback", False) or getattr(kernel.signature, "status", False):
            guarded = GuardedStep(kernel, out_shape if elementwise else None)

            def run_guarded(env: Env) -> None:
                o = alloc(env)
                guarded([env[i] for i in ins], [o])
                env[out] = o
            return run_guarded
        large = elementwise and self.options.threads > 1 and int(np.prod(out_shape)) >= PY_SPLIT_THRESHOLD  # type: ignore[arg-type]
        if not large and (not elementwise or all(s == out_shape for s in in_shapes)):
            # Operands described by their own shapes: the thunk makes it one native call.
            try:
                fn = ThunkCall(kernel, [*in_shapes, out_shape]).function  # type: ignore[list-item]
            except ThunkUnavailable:
                fn = None
            if fn is not None:
                from fusebind.runtime.session import default_session

                retry = column_major_retry(op, kernel, self.options.session or default_session(),
                                           runtime_backend(self.options.backend),
                                           self.options.threads) or (lambda *arrays: None)

                def run_thunk(env: Env) -> None:
                    o = alloc(env)
                    # refused (e.g. a non-contiguous view): a column-major matmul operand as the gemm's
                    # transpose flag, else convert
                    if fn(*[env[i] for i in ins], o) is None and retry(*[env[i] for i in ins], o) is None:
                        if fn(*[contig(np.asarray(env[i])) for i in ins], o) is None:
                            raise FusebindInternalError(f"fusebind internal error: the call thunk refused the operands of "
                                               f"{op.name}")
                    env[out] = o
                return run_thunk
        call = KernelCall(kernel, in_shapes, [out_shape],  # type: ignore[list-item]
                          broadcast_inputs_to=out_shape if elementwise else None,
                          splittable=elementwise and bool(out_shape), threads=self.options.threads,
                          pool=runtime_backend(self.options.backend).split_pool)

        def run(env: Env) -> None:
            o = alloc(env)
            call([*(contig(env[i]) for i in ins), o])
            env[out] = o
        return run

    def _reference_step(self, op: Any, ins: list[int], out: int) -> Step:
        from fusebind.dialect.prim import BroadcastToOp, ReshapeOp
        from fusebind.dialect.types import elem_of, numpy_dtype, shape_of

        ref = op.reference
        if isinstance(op, (ReshapeOp, BroadcastToOp)):
            self.notes.append(f"{op.name}: shape-only op, runs its numpy reference (reshape: a view; no kernel)")
            if any(i in self.stable for i in ins):
                self.stable.add(out)  # a view of something that outlives the call

        if isinstance(op, ReshapeOp) and sum(d is None for d in shape_of(op.result.type)) <= 1:  # the view
            shape = tuple(-1 if d is None else d for d in shape_of(op.result.type))  # without the
            want = numpy_dtype(elem_of(op.result.type))

            def reshape(env: Env) -> None:  # reference's per-call work (~11 us -> ~0.6 us)
                y = np.asarray(env[ins[0]]).reshape(shape)
                env[out] = y if y.dtype == want else ref(env[ins[0]])
            return reshape

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
        shapes_static = all(static_shape(v) is not None for v in (*region.operands, *region.results))
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
            if shapes_static and row_is_dynamic(resolved.row) and (not fused_cost.is_known
                                                                    or fused_cost.trust == "composed"):
                # compiled for any shape (or `?` dims), priced at the shapes it was compiled for
                # (unknown when they were `?`): price this one
                fused_cost = compose_region_cost(region, self.machine)
            decision.fused_cost = fused_cost
            if (resolved.key, resolved.kernel.address) in self.options.failed_fused_arms:
                decision.reason = verify_failed_reason(decision.fused_id)
            elif not fused_cost.is_known:
                decision.reason = "fused arm is unpriced (UNKNOWN_COST): skipped, never treated as free"
            elif not cheaper(fused_cost, arm0_cost):
                decision.reason = "fused arm is not cheaper than its primitives"
            else:
                decision.arm = "fused"
                decision.reason = "fused arm is priced and cheaper than its primitives"
                splittable = CAP_SPLIT_AXIS0 in resolved.row.caps
                call = fused_call(region, resolved.kernel, splittable, self.options.threads,
                                  runtime_backend(self.options.backend).split_pool, self.notes)
                decision.splits = call.splits
                failed_arm = (resolved.key, resolved.kernel.address)
        stats = self.stats
        profile = self.options.profile
        clock = time.perf_counter
        if call is None:
            if not decision.reason:
                decision.reason = "runs arm 0"
            arm0_steps()  # resolve now: arm 0 is the arm that runs (its steps take the plan's slots here)

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
        source = self.inplace_source.get(region)
        if inplace is not None and (source is None or self.slot(source) not in self.owned):
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
            call = variant_call(region, inplace, resolved.kernel, canonical, splittable, self.options,
                                self.notes, decision) or call
        src = -1
        if inplace is not None:  # operand k's buffer: the matmul's own array, or the array its output views
            src = operand_slots[inplace[0]] if source is region.operands[inplace[0]] else \
                self.inplace_base_slot(region.results[inplace[1]])
        kcall = call
        verify = self.options.verify
        verify_action = self.options.verify_action
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
                if not verify_results(decision, outs, ref, verify_action):
                    # warn mode: arm 0's values are the answer (copied into the fresh or
                    # plan-owned outputs, so nothing aliases arm 0's buffers)
                    for o, r in zip(outs, ref):
                        np.copyto(o, np.asarray(r), casting="unsafe")
                    failed.append(True)
                    self.options.failed_fused_arms.add(failed_arm)
                    decision.arm = "arm 0"
                    decision.reason = verify_failed_reason(decision.fused_id)
        # not an in-place region: its kernel (the variant) must never be called with the caller's arrays
        if isinstance(kcall, ThunkStep) and kcall.splits == 1 and not verify and inplace is None:
            self.fast_region = (region, kcall.thunk)
        plain = None if verify or profile or len(allocs) != 1 else plain_fused_runner(
            kcall, allocs[0], operand_slots, result_slots[0], stats)
        return plain or run_fused


def compile_dtypes(op: Any) -> tuple[Any, ...]:
    from fusebind.runtime.resolve import node_dtypes

    return node_dtypes(op)

