"""The native attention kernel's binding: one native call per attention call, on the native pool.

Owns `NativeAttention` (per kernel: builds a `NativePlan` for the operands' shapes, strides
and mask plan, fills its env, and runs every (batch/head, query block) task of
lowering/attention_ir.py in one call) and `native_attention_available`.

A call: `NativeAttention.run(q, kt, v, out, args, plans)` answers False when the native kernel
does not cover the call (not f32; a mask that is not one 2-D keep-mask every batch/head
shares, or whose plan is not exact: a row keeping nothing, a fill that does not vanish; an
operand BLAS cannot read with a leading dimension), and runtime/attention.py's tiled loop
computes it instead. Otherwise it fills the env's four base addresses (everything else is the
cached plan's) and calls `fb_pool_run` (or the serial loop at one thread) with the GIL
released, OpenBLAS held at one thread (`blas_threads(1)`): the tasks are the parallelism, and
BLAS threads inside them would oversubscribe the cores.

Tasks are fixed by shape (block rows by the key count, `block_rows`), never by the thread
count, and a task's values do not depend on which thread or scratch slot runs it: results are
bitwise the same at any thread count.

Must not: decide what is fused (the compiler's rule) or compute the fallback (attention.py).
"""

from __future__ import annotations

import ctypes
import math
import threading
from typing import Any

import numpy as np

from fusebind.dialect.errors import FusebindError
from fusebind.lowering.attention_ir import BLOCK_FIELDS, ENTRY, ENV, compile_attention
from fusebind.runtime.attention import _EXP_ZERO, AttentionArgs, BlockPlan, MaskPlans, _mask_arrays, _score_bound
from fusebind.runtime.blas import blas_threads

__all__ = ["BLOCK_ELEMENTS", "NativeAttention", "NativePlan", "block_rows", "native_attention_available"]

#: scores of one task (rows x keys, f32): 1 MiB (in L3; 128 rows at S=2048 measured ~1.4x faster
#: than 32 rows within L2: OpenBLAS packs each call's kT and v span, taller calls pack less)
BLOCK_ELEMENTS = 1 << 18
#: query rows of a task: at most MAX_ROWS (a 128-row sgemm is past BLAS's efficient size), at
#: least MIN_ROWS (fewer rows measured slower per score)
MAX_ROWS, MIN_ROWS = 128, 16
#: at most MASKED_ROWS under a mask over at most MASKED_KEYS keys: causal S=128 measured 0.84 ms
#: at 64 rows vs 1.11 ms at 128 (one pinned core, B=2, H=4; equal at S=512), a 64-row block's
#: span skipping a quarter; at S=2048 128 rows were faster (285 vs 349 ms: less packing)
MASKED_ROWS, MASKED_KEYS = 64, 512
#: at least this many tasks a call when rows allow it (both cores busy on a 2-D T=256 block);
#: a constant, so the plan never depends on the thread count
MIN_TASKS = 4

_F32 = np.dtype(np.float32)


def block_rows(nbh: int, sq: int, sk: int, masked: bool = False) -> int:
    """Query rows per task: a power of two with rows x sk <= BLOCK_ELEMENTS, within
    [MIN_ROWS, MAX_ROWS] (MASKED_ROWS under a mask: shorter blocks skip more of a causal
    mask's keys), halved while there are fewer than MIN_TASKS tasks and 32 or more rows."""
    cap = MASKED_ROWS if masked and sk <= MASKED_KEYS else MAX_ROWS
    rows = max(MIN_ROWS, min(cap, BLOCK_ELEMENTS // max(1, sk)))
    rows = 1 << (rows.bit_length() - 1)
    while rows > 32 and nbh * -(-sq // rows) < MIN_TASKS:
        rows //= 2
    return min(rows, 1 << max(0, (sq - 1).bit_length()))


class _Lib:
    """The linked kernel (one per process: it embeds the sgemm address)."""

    def __init__(self) -> None:
        from fusebind.runtime.blas import blas_gemm_address
        from fusebind.runtime.loader import load_object

        self.loaded = load_object(compile_attention(blas_gemm_address("f32")), ENTRY, lasting=True)
        table = (ctypes.c_void_p * 2)()
        ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self.loaded.address)(ctypes.addressof(table))
        self.task, serial = int(table[0]), int(table[1])
        self.serial = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(serial)


_LIB: _Lib | None = None
_LIB_LOCK = threading.Lock()


def _lib() -> _Lib:
    global _LIB
    if _LIB is None:
        with _LIB_LOCK:
            if _LIB is None:
                _LIB = _Lib()
    return _LIB


def native_attention_available() -> bool:
    """Whether the native kernel builds here (compiles it on first call)."""
    try:
        _lib()
    except (FusebindError, OSError, AttributeError):
        return False
    return True


def _pool() -> Any:
    from fusebind.runtime.pool import PoolUnavailable, process_pool

    try:
        return process_pool()
    except PoolUnavailable:
        return None


def _matrix(a: np.ndarray) -> tuple[int, int] | None:
    """(row, column) strides in elements of `a`'s matrices when BLAS reads them with a leading
    dimension (one unit stride, the other at least the matrix's extent), else None."""
    s0, s1 = (s // a.itemsize for s in a.strides[-2:])
    if any(s % a.itemsize for s in a.strides[-2:]):
        return None
    r, c = a.shape[-2:]
    if s1 == 1 and s0 >= max(c, 1):
        return s0, s1
    if s0 == 1 and s1 >= max(r, 1) and c > 1:
        return s0, s1
    return None


def _offsets(a: np.ndarray, lead: tuple[int, ...]) -> np.ndarray:
    """Each batch/head matrix's element offset from `a`'s first element, in C order of `lead`."""
    off = np.zeros(lead, dtype=np.int64)
    for axis, n in enumerate(lead):
        shape = [1] * len(lead)
        shape[axis] = n
        off = off + (np.arange(n, dtype=np.int64) * (a.strides[axis] // a.itemsize)).reshape(shape)
    return np.ascontiguousarray(off.reshape(-1))


class NativePlan:
    """The env of one (shapes, strides, blocks, width): offsets, blocks, bias tiles, scratch."""

    def __init__(self, q: np.ndarray, kt: np.ndarray, v: np.ndarray, out: np.ndarray, strides: tuple[tuple[int, int], ...],
                 blocks: list[BlockPlan], rows: int, scale: tuple[str, float] | None, width: int) -> None:
        lead = q.shape[:-2]
        self.nbh = math.prod(lead)
        self.ntasks = self.nbh * len(blocks)
        self.width = max(1, min(width, self.ntasks))
        self.offs = [_offsets(a, lead) for a in (q, kt, v, out)]
        tiles, table, at = [], [], 0
        for b in blocks:
            boff = -1
            if b.bias is not None:
                boff = at
                tiles.append(np.ascontiguousarray(b.bias, dtype=_F32).reshape(-1))
                at += tiles[-1].size
            table.append((b.i0, b.i1, b.lo, b.hi, b.c0, b.c1, boff))
        self.blocks = np.array(table, dtype=np.int64).reshape(-1, len(BLOCK_FIELDS))
        self.bias = np.concatenate(tiles) if tiles else np.zeros(1, _F32)
        span = max(b.hi - b.lo for b in blocks)
        slot = -(-(rows + rows * span) // 16) * 16  # whole cache lines: slots never share one
        self.scratch = np.empty(self.width * slot + 16, _F32)
        self.slots = np.zeros(self.width, np.int64)  # claim words (0 free, 1 taken)
        env = np.zeros(len(ENV), np.int64)
        (qs0, qs1), (ks0, ks1), (vs0, vs1), (os0, _) = strides
        kind = {None: 0, "mul": 1, "div": 2}[scale[0] if scale else None]
        c = float(scale[1]) if scale else 1.0
        if kind == 1 and 0 < np.float32(c) < np.inf:
            kind = 3  # folded into the exp: a row pass less (lowering/attention_ir.py)
        words = {"qoff": self.offs[0].ctypes.data, "ktoff": self.offs[1].ctypes.data,
                 "voff": self.offs[2].ctypes.data, "ooff": self.offs[3].ctypes.data,
                 "q_s0": qs0, "q_s1": qs1, "kt_s0": ks0, "kt_s1": ks1, "v_s0": vs0, "v_s1": vs1, "o_s0": os0,
                 "d": q.shape[-1], "dv": v.shape[-1], "nblocks": len(blocks), "nbh": self.nbh,
                 "blocks": self.blocks.ctypes.data, "bias": self.bias.ctypes.data,
                 "scale_kind": kind, "scale": int(np.float64(c).view(np.int64)),
                 "scratch": (self.scratch.ctypes.data + 63) & ~63, "slot_elems": slot,
                 "nslots": self.width, "slots": self.slots.ctypes.data, "rows_max": rows}
        for name, value in words.items():
            env[ENV[name]] = value
        self.env = env
        self.env_address = env.ctypes.data


class NativeAttention:
    """The native arm of one attention kernel (plans cached per thread). `pool`: the NativePool
    its tasks run on (None: the process's, or serially where it cannot run)."""

    def __init__(self, pool: Any = None) -> None:
        self.local = threading.local()
        self.pool = pool

    def _plan(self, q: np.ndarray, kt: np.ndarray, v: np.ndarray, out: np.ndarray, args: AttentionArgs,
              plans: MaskPlans | None, width: int) -> NativePlan | None:
        strides = tuple(_matrix(a) for a in (q, kt, v, out))
        if any(s is None for s in strides) or strides[3][1] != 1:  # type: ignore[index]
            return None
        sq, sk = q.shape[-2], kt.shape[-1]
        lead = q.shape[:-2]
        nbh = math.prod(lead)
        keep, add = _mask_arrays(args, lead, sq, sk)
        rows = block_rows(nbh, sq, sk, masked=keep is not None)
        if add is not None:
            return None
        planned: list[BlockPlan] | None = None
        if keep is not None:
            if keep.ndim != 2 or args.fill is None:
                return None
            all_rows, planned = (plans or MaskPlans()).get(keep, rows, q.dtype)
            if not all_rows:
                return None
            if not math.isinf(args.fill) or args.fill > 0:
                # a finite fill vanishes only when fill + max|score| underflows exp (attention.py)
                bound = _score_bound(q, kt) * (abs(args.scale[1]) if args.scale and args.scale[0] == "mul"
                                               else 1.0 / abs(args.scale[1]) if args.scale else 1.0)
                if not float(args.fill) + bound < _EXP_ZERO[q.dtype]:
                    return None
        key = (q.shape, kt.shape, v.shape, out.shape, strides, None if planned is None else id(planned),
               args.scale, width)
        cache = self.local.__dict__.setdefault("plans", {})
        plan = cache.get(key)
        if plan is None:
            if len(cache) > 8:
                cache.clear()
            if planned is None:
                planned = [BlockPlan(i0, min(sq, i0 + rows), 0, sk, 0, 0, None) for i0 in range(0, sq, rows)]
            plan = cache[key] = NativePlan(q, kt, v, out, strides, planned, rows, args.scale, width)
            plan.keepalive = planned  # type: ignore[attr-defined]  # id(planned) stays this plan's
        return plan

    def run(self, q: np.ndarray, kt: np.ndarray, v: np.ndarray, out: np.ndarray, args: AttentionArgs,
            plans: MaskPlans | None = None, constant_mask: bool = False,
            addresses: tuple[int, int, int, int] | None = None) -> bool:
        """Compute the attention into `out` natively (True), or answer False (not covered).
        `constant_mask`: `args.mask` is the region's constant (its values never change), so the
        plan is found by layout alone (~100 us less a call than re-planning the mask).
        `addresses`: the first elements of q, kt, v, out when the caller knows them (each
        `__array_interface__` costs ~5 us)."""
        if not (q.dtype == kt.dtype == v.dtype == out.dtype == _F32) or q.ndim < 2:
            return False
        if args.scale is not None and args.scale[1] == 0 and args.scale[0] == "div":
            return False
        pool = self.pool if self.pool is not None else _pool()
        width = pool.threads if pool is not None else 1
        # what depends on layout and the mask's values only (a finite fill's check reads the
        # data): a mask argument is compared with the one the plan was made for (~5 us at
        # S=128), a region's constant mask is the same object every call
        fast = args.mask is None or (args.fill is not None and args.fill == -math.inf)
        mask = args.mask
        key = (q.shape, kt.shape, v.shape, out.shape, q.strides, kt.strides, v.strides, out.strides, args.scale,
               args.mask_kind, args.fill, id(mask) if constant_mask else getattr(mask, "shape", None),
               width) if fast else None
        fast_plans = self.local.__dict__.setdefault("fast", {})
        entry = fast_plans.get(key, None) if fast else None
        if entry is not None and entry[1] is not None and not np.array_equal(entry[1], mask):
            entry = None
        if entry is None:
            plan = self._plan(q, kt, v, out, args, plans, width)
            if fast:
                if len(fast_plans) > 8:
                    fast_plans.clear()
                seen = None if mask is None or constant_mask else np.array(mask, copy=True)
                fast_plans[key] = (plan if plan is not None else False, seen)
        else:
            plan = entry[0]
        if not plan:
            self.local.last = None
            return False
        # the plan a caller may replay with `run_plan` while its layout holds (no value check needed)
        self.local.last = plan if fast and (mask is None or constant_mask) else None
        if addresses is None:
            addresses = tuple(a.__array_interface__["data"][0] for a in (q, kt, v, out))  # type: ignore[assignment]
        self.run_plan(plan, addresses)  # type: ignore[arg-type]
        return True

    def last_plan(self) -> NativePlan | None:
        """This thread's plan of its last `run` when it depends on the layout alone, else None."""
        return getattr(self.local, "last", None)

    def run_plan(self, plan: NativePlan, addresses: tuple[int, int, int, int]) -> None:
        """Run `plan` on operands at `addresses` (first elements of q, kt, v, out) of the layout
        it was made for (the caller's promise: `last_plan` after a `run` of that layout)."""
        pool = self.pool if self.pool is not None else _pool()
        lib = _lib()
        env = plan.env
        env[ENV["q"]], env[ENV["kt"]], env[ENV["v"]], env[ENV["out"]] = addresses
        with blas_threads(1):
            if pool is None or plan.width <= 1:
                lib.serial(plan.env_address, plan.ntasks)
            else:
                pool.run(lib.task, plan.env_address, plan.ntasks, min(plan.width, pool.threads))
