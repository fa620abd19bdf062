"""The call thunk: one native call from Python runs a kernel on ndarrays.

Owns `thunk_for(signature)` (the LLVM IR `thunk_ir`, thunk_ir.py, writes for
one kernel signature, compiled once per signature and process) and `ThunkCall`: a thunk bound to one kernel and the dims it
accepts, exposed as a CPython builtin function (`ThunkCall.function`).
`ParallelThunkCall` is its parallel-for variant: the same checks, then one
GIL release around `fb_pool_run` (pool.py), whose tasks call the kernel on
chunks of the operands along axis 0 (descriptors copied and offset per
chunk, in the task); docs/THREADS.md.

Why: building memref descriptors in Python costs ~17 us per call, and even
a ctypes call that passes one Python object costs ~0.3 us (PERFORMANCE.md;
measured here: an empty ctypes call is ~0.15 us, each converted argument
adds ~0.1 us). So the thunk is made a `METH_FASTCALL` builtin with
`PyCFunction_NewEx` (stable C API, called once through ctypes): Python calls
it like any builtin, `fn(a, b, c, out)`, with no ctypes on the call path.
Its `self` is a small int64 ndarray, the context block: `[kernel address,
ndarray type address, release-GIL flag, allocator, descr, session,
generation, call count, two attribute names, expected dims...]`
(`PLAIN_HEAD`).

The one-call entry (`ThunkCall.entry`, the fast path of a whole plan):
called without the output, `fn(*inputs)`, the thunk also checks that the
session's table generation is the plan's (two attribute reads through the
C API), allocates the output itself through numpy's C API
(`PyArray_NewFromDescr`, from the `_ARRAY_API` capsule, checked once by
`_array_new`) and counts the call in the context block: no Python runs
between the caller and the kernel (~0.2 us of `np.empty` and a closure
saved per call).

For each argument the thunk checks, reading numpy's public
`PyArrayObject_fields` layout, that it is exactly an `ndarray` with the
expected type number, native byte order, rank and dims, C-contiguous and
aligned (outputs also writeable); it fills a memref descriptor on its stack
and, when every operand passed, calls the kernel (between
`PyEval_SaveThread`/`PyEval_RestoreThread` when the flag says so, so other
threads run meanwhile) and returns the last argument (the output). When
anything does not fit it calls nothing and returns None: the caller takes
its slow path, which converts or reports.

Layouts read (numpy 1.x and 2.x, 64-bit CPython): ndarray `ob_type` at 8,
`data` at 16, `nd` (int) at 24, `dimensions` at 32, `flags` (int) at 64,
`descr` at 56; descr `byteorder` (char) at 26, `type_num` (int) at 28.
Reference counts are changed only through `Py_IncRef`.

Must not: decide which kernel runs (plan.py), or allocate outputs other than the
one-call entry's small one (large ones are recycled: call.py).
"""

from __future__ import annotations

import ctypes
import sys
import threading
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from fusebind.dialect.errors import FusebindError, FusebindValueError
from fusebind.runtime.dtypes import KernelSignature
from fusebind.runtime.session import default_session
from fusebind.runtime.thunk_ir import (_NAMES, ANY_DIM, PLAIN_HEAD, _type_num,  # noqa: F401 (re-exported)
                                       descriptor_task_ir, thunk_ir)


class ThunkUnavailable(FusebindError, RuntimeError):
    """The thunk cannot be used on this interpreter or could not be built."""


def _check_platform() -> None:
    if sys.maxsize != 2 ** 63 - 1 or sys.byteorder != "little" or np.dtype(np.int_).itemsize != 8:
        raise ThunkUnavailable("the call thunk reads 64-bit little-endian LP64 CPython/numpy layouts; "
                               "this interpreter differs, so calls use the ctypes descriptor path")


_METH_FASTCALL = 0x0080


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]


@dataclass(frozen=True, eq=False)
class CallThunk:
    """A compiled thunk for one signature, and the method definition that
    turns it into builtin functions (kept for the life of the process)."""

    signature: KernelSignature
    address: int
    method_def: Any
    keepalive: Any

    def bind(self, ctx: np.ndarray, keepalive: Any) -> Any:
        """A builtin function running this thunk with context block `ctx`.

        `keepalive` (the kernel whose address `ctx` holds) becomes the
        function's `m_module` slot, which CPython keeps a reference to: the
        builtin alone keeps the kernel's code alive, so calling it after every
        other reference is gone can never jump into freed code."""
        new = ctypes.pythonapi.PyCFunction_NewEx
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]
        return new(ctypes.addressof(self.method_def), ctx, keepalive)


def _thunk_object(signature: KernelSignature | None, parallel: tuple[int, ...] | None = None,
                  text: str | None = None) -> bytes:
    """Object code of the thunk (or of the IR `text`, whose symbol is fb_thunk too), through the
    on-disk object cache (a new process reuses it: ~0.3 ms to link instead of ~9 ms to compile)."""
    from fusebind.lowering.build import target_key_parts
    from fusebind.lowering.cache import CachedObject, cache_key, default_cache
    from fusebind.lowering.codegen import compile_llvm_ir

    text = thunk_ir(signature, parallel=parallel) if text is None else text  # type: ignore[arg-type]
    cache = default_cache()
    key = cache_key(kind="call-thunk", text=text, **target_key_parts()) if cache.enabled else None
    if key is not None:
        hit = cache.get(key)
        if hit is not None and hit.symbol == "fb_thunk":
            return hit.object_code
    code = compile_llvm_ir(text, "fb_thunk")
    if key is not None:
        cache.put(key, CachedObject("fb_thunk", code))
    return code


_THUNKS_LOCK = threading.Lock()


def _thunks() -> dict[tuple[Any, ...], CallThunk]:
    """The default session's thunks, by (inputs, outputs) of the signature.
    A thunk is code for a signature, not for a table: every session may use
    the default session's, so they are built once per process."""
    return default_session().slot("thunks", dict)


def thunk_for(signature: KernelSignature, parallel: Sequence[int] | None = None) -> CallThunk:
    """The thunk of `signature` (compiled on first use, then cached per process);
    `parallel`: its parallel-for variant (`thunk_ir`). Raises ThunkUnavailable
    when it cannot be built here."""
    par = None if parallel is None else tuple(int(b) for b in parallel)
    key = (signature.inputs, signature.outputs) if par is None else (signature.inputs, signature.outputs, par)
    thunks = _thunks()
    thunk = thunks.get(key)
    if thunk is not None:
        return thunk
    _check_platform()
    with _THUNKS_LOCK:
        thunk = thunks.get(key)
        if thunk is None:
            from fusebind.runtime.loader import load_object

            try:
                code = _thunk_object(signature, par)
                loaded = load_object(code, "fb_thunk", lasting=True)  # (cached for the process: _thunks)
            except FusebindError as exc:  # LoweringError (codegen), ObjectLoadError (linking)
                raise ThunkUnavailable(f"could not build the call thunk for {signature}: "
                                       f"{type(exc).__name__}: {exc}") from exc
            mdef = _MethodDef(b"fusebind_kernel_call", loaded.address, _METH_FASTCALL,
                              b"fusebind kernel call: fn(*inputs, *outputs) -> last output, or None")
            thunk = CallThunk(signature, loaded.address, mdef, loaded)
            thunks[key] = thunk
    return thunk


def descriptor_task(n_args: int) -> int:
    """The address of the pool task over prepared descriptors of `n_args` operands
    (`descriptor_task_ir`; compiled once per arity and process). ThunkUnavailable when it
    cannot be built here."""
    tasks = default_session().slot("descriptor-tasks", dict)
    address = tasks.get(n_args)
    if address is not None:
        return address
    with _THUNKS_LOCK:
        address = tasks.get(n_args)
        if address is None:
            from fusebind.runtime.loader import load_object

            try:
                code = _thunk_object(None, text=descriptor_task_ir(n_args, "fb_thunk"))
                loaded = load_object(code, "fb_thunk", lasting=True)
            except FusebindError as exc:
                raise ThunkUnavailable(f"could not build the descriptor task of {n_args} operands: "
                                       f"{type(exc).__name__}: {exc}") from exc
            tasks[("keep", n_args)] = loaded  # (the code lives as long as the process)
            address = tasks[n_args] = loaded.address
    return address


class ThunkCall:
    """A thunk bound to one kernel and the operand dims it accepts.

    `expected`: per operand (inputs then outputs), its dims (ANY_DIM matches
    any size). `function(*inputs, *outputs)` runs the kernel holding the GIL
    and returns the last output, or None (nothing ran) when an argument does
    not fit; `released(...)` is the same but releases the GIL around the
    kernel (large calls, split chunks). `entry(...)`: the one-call entry.
    """

    __slots__ = ("kernel", "function", "released", "_ctx", "_thunk", "_dims")

    def __init__(self, kernel: Any, expected: Sequence[Sequence[int]]) -> None:
        sig = kernel.signature
        operands = [*sig.inputs, *sig.outputs]
        if len(expected) != len(operands) or any(len(e) != r for e, (_, r) in zip(expected, operands)):
            raise FusebindValueError(f"ThunkCall: expected dims {[list(e) for e in expected]} do not fit the kernel "
                             f"signature {sig}")
        self._thunk = thunk = thunk_for(sig)
        self.kernel = kernel
        self._dims = [[int(d) for d in e] for e in expected]
        self._ctx = (self._context(0), self._context(1))
        self.function = thunk.bind(self._ctx[0], kernel)
        self.released = thunk.bind(self._ctx[1], kernel)

    def _context(self, release: int, new: int = 0, descr: Any = None, session: Any = None,
                 generation: int = 0) -> np.ndarray:
        ctx = np.array([self.kernel.address, id(np.ndarray), release, new, 0 if descr is None else id(descr),
                        0 if session is None else id(session), generation, 0, id(_NAMES[0]), id(_NAMES[1]),
                        *(d for e in self._dims for d in e)], dtype=np.int64)
        ctx.flags.writeable = False  # (Python never writes it; the thunk bumps its call count)
        return ctx

    def entry(self, session: Any, generation: int, dtype: Any, release: bool = False) -> tuple[Any, np.ndarray] | None:
        """The one-call entry: `fn(*inputs)` runs while `session.table.generation == generation`
        into a new output of `dtype` (allocated by the thunk) and returns it, or None (nothing
        ran: the table moved, or an input does not fit); `fn(*inputs, out)` as `function`. Also
        its context block, whose slot 7 counts the calls that ran. None when the thunk cannot
        allocate (not one output of fixed dims, or numpy's C API is not the one we read)."""
        sig = self.kernel.signature
        new = _array_new()
        if new == 0 or len(sig.outputs) != 1 or any(d < 0 for d in self._dims[-1]):
            return None
        descr = np.dtype(dtype)
        if descr.num != _type_num(sig.outputs[0][0]) or not descr.isnative:
            return None
        ctx = self._context(int(release), new, descr, session, int(generation))
        # the builtin holds ctx (its self) and this tuple (its module): the kernel, descr and session live as long
        return self._thunk.bind(ctx, (self.kernel, descr, session)), ctx


_ARRAY_NEW: list[int] = []


def _array_new() -> int:
    """The address of numpy's `PyArray_NewFromDescr` (slot 94 of its C API table, the same in
    numpy 1.x and 2.x), checked once by making an array through it; 0 when it is unavailable."""
    if _ARRAY_NEW:
        return _ARRAY_NEW[0]
    address = 0
    try:
        try:
            from numpy._core import _multiarray_umath as mu
        except ImportError:  # numpy 1.x
            from numpy.core import _multiarray_umath as mu  # type: ignore[no-redef]
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        table = ctypes.cast(get(mu._ARRAY_API, None), ctypes.POINTER(ctypes.c_void_p))
        candidate = table[94]
        proto = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.py_object, ctypes.c_int,  # (holds the GIL)
                                 ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                 ctypes.c_void_p)
        descr = np.dtype(np.float32)
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(descr))  # (stolen by the call)
        made = proto(candidate)(id(np.ndarray), descr, 2, (ctypes.c_int64 * 2)(3, 5), None, None, 0, None)
        if type(made) is np.ndarray and made.shape == (3, 5) and made.dtype == descr and made.flags.c_contiguous:
            address = int(candidate)
    except (AttributeError, ImportError, OSError, TypeError, ValueError):
        address = 0
    _ARRAY_NEW.append(address)
    return address


class ParallelThunkCall:
    """A parallel-for thunk bound to one kernel, its operand dims, a native pool
    (pool.py `NativePool`), a chunk count and a width (at most this many threads
    at once). `function(*inputs, *outputs)` releases the GIL, runs the kernel on
    `chunks` chunks on the pool and returns the last output, or None (nothing
    ran) when an argument does not fit. `blocks`: per operand, 0 (cut along
    axis 0) or the elements of its per-chunk block (whose expected dim is then
    chunks * block). Chunk bounds depend on the sizes and `chunks` only, never
    on which thread runs a chunk."""

    __slots__ = ("kernel", "function", "chunks", "width", "_ctx")

    def __init__(self, kernel: Any, expected: Sequence[Sequence[int]], pool: Any, chunks: int, width: int,
                 blocks: Sequence[int]) -> None:
        sig = kernel.signature
        operands = [*sig.inputs, *sig.outputs]
        if len(expected) != len(operands) or any(len(e) != r for e, (_, r) in zip(expected, operands)):
            raise FusebindValueError(f"ParallelThunkCall: expected dims {[list(e) for e in expected]} do not fit "
                                     f"the kernel signature {sig}")
        if not 1 <= chunks <= MAX_CHUNKS:
            raise FusebindValueError(f"ParallelThunkCall: chunks must be in [1, {MAX_CHUNKS}], got {chunks}")
        thunk = thunk_for(sig, blocks)
        self.kernel = kernel
        self.chunks, self.width = int(chunks), int(width)
        dims = [int(d) for e in expected for d in e]
        self._ctx = np.array([kernel.address, id(np.ndarray), 1, pool.run_address, pool.handle, self.chunks,
                              self.width, *dims], dtype=np.int64)
        self._ctx.flags.writeable = False
        self.function = thunk.bind(self._ctx, (kernel, pool))  # the pool's block lives as long as the builtin


#: the pool's claim word holds task indices in 20 bits (pool.py MAX_TASKS)
MAX_CHUNKS = (1 << 20) - 1

__all__ = ["ANY_DIM", "CallThunk", "MAX_CHUNKS", "ParallelThunkCall", "ThunkCall", "ThunkUnavailable", "descriptor_task",
           "thunk_for",
           "thunk_ir"]
