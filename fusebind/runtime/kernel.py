"""A callable kernel: a C function pointer, its signature, and its keep-alive.

This module owns `Kernel` and its constructors (ctypes function, Python
callable, shared library symbol, object code, a lowering `Decomposition`).
A Kernel never decides where it is bound; the binding table does that.

Python-callback kernels: ctypes swallows an exception raised inside a
callback (it prints "Exception ignored on calling ctypes callback function"
and returns), which would leave the outputs unwritten and the caller none the
wiser. So every kernel whose code is a Python callable (`from_python`, or a
CFUNCTYPE instance made from a Python callable given to `from_ctypes`) runs
through a trampoline that catches the exception into a per-thread slot of
the kernel; `Kernel.__call__` re-raises it after the foreign call returns.
Such kernels say so (`python_callback`): callers that call `address`
directly (the call thunk, prepared descriptor calls) must use `__call__` for
them instead, or the exception is lost.

Kernel ABI v2 (`signature.status`, docs/KERNEL-ABI.md): the kernel takes a
status memref after its outputs. Every call gets its own zeroed status array
(`new_status`; per call, not per kernel, so concurrent calls and the chunks
of a split call never share one), and a set status becomes
`fb.IndexOutOfBounds` after the call (`status_error`), worded from the
kernel's `checks` (`IndexCheck`: what was checked, and which kernel inputs
the index came from); the outputs of such a call are never returned.
"""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import hashlib
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from fusebind.dialect.errors import FusebindError, FusebindTypeError, IndexOutOfBounds
from fusebind.lowering.abi import STATUS_WORDS
from fusebind.runtime.dtypes import KernelSignature, descriptor_for

if TYPE_CHECKING:
    from fusebind.lowering.decompose import Decomposition

#: Shapes of a kernel's operands, inputs then outputs; None = a dim read at run time.
Shapes = tuple[tuple[int | None, ...], ...]


class KernelError(FusebindError, ValueError):
    """A kernel could not be made from what was given, or a Python-callback
    kernel raised (the original exception is the `__cause__`)."""


class CallbackGuard:
    """The trampoline around a Python kernel callable, and what the callable
    raised, per thread (each thread's call checks only its own slot)."""

    def __init__(self, fn: Callable[..., Any], prototype: Any) -> None:
        self.fn = fn
        self._slot = threading.local()
        self._failed = None if getattr(prototype, "_restype_", None) is None else 0
        self.callback = prototype(self._run)  # the C-callable closure; alive as long as the guard

    def _run(self, *args: Any) -> Any:
        try:
            return self.fn(*args)
        except BaseException as exc:  # everything: ctypes would print it and return as if all went well
            if getattr(self._slot, "error", None) is None:
                self._slot.error = exc
            return self._failed

    def clear(self) -> None:
        self._slot.error = None

    def take(self) -> BaseException | None:
        """What the callable raised on this thread since `clear`, and clear."""
        exc = getattr(self._slot, "error", None)
        self._slot.error = None
        return exc


@dataclass(frozen=True)
class IndexCheck:
    """One index check of an ABI v2 kernel: status code k names the kernel's `checks[k - 1]`.
    `what` is "axis <k> of <op>" (e.g. "axis 0 of prim.gather"), or any phrase; `inputs` are
    the kernel inputs (positions) the checked index is computed from."""

    what: str
    inputs: tuple[int, ...] = ()


def new_status() -> np.ndarray:
    """The zeroed status array of one call of an ABI v2 kernel."""
    return np.zeros(STATUS_WORDS, np.int64)


def status_error(kernel: "Kernel", status: Any, names: Any = None, inputs: Any = None) -> IndexOutOfBounds | None:
    """The `fb.IndexOutOfBounds` a set `status` reports (None when it is clear).

    `names`: None, or (function name, argument names) where `argument names[k]` is the name of
    kernel input k, or None when that input is not an argument (an intermediate value): the
    message then names the function and the argument the bad index came from. `inputs`: the
    call's input arrays, kept on the error (`err.inputs`) so whoever knows the arguments can
    name them (`located`). The error also keeps `kernel`, `status`, `index`, `size`, `check`."""
    code = int(status[0])
    if code == 0:
        return None
    index, size = int(status[1]), int(status[2])
    checks = kernel.checks
    check = checks[code - 1] if 0 < code <= len(checks) else IndexCheck(f"check {code}")
    axis, _, op = check.what.partition(" of ")
    head = f"{op}: " if op else ""
    fn, args = names if names is not None else (None, None)
    named = [args[i] for i in check.inputs if args is not None and i < len(args) and args[i] is not None]
    where = []
    if named:
        where.append(f"from argument{'s' if len(named) > 1 else ''} {', '.join(repr(n) for n in named)}")
    elif check.inputs and args is None:
        where.append(f"from kernel input{'s' if len(check.inputs) > 1 else ''} "
                     f"{', '.join(f'#{i}' for i in check.inputs)}")
    where.append(f"checked in the kernel {kernel.source}")
    prefix = f"fusebind: in '{fn}': " if fn else "fusebind: "
    err = IndexOutOfBounds(f"{prefix}{head}index {index} is out of bounds for {axis} with size {size} "
                           f"({'; '.join(where)})")
    err.index, err.size, err.check = index, size, check  # type: ignore[attr-defined]
    err.kernel, err.status, err.function = kernel, tuple(int(v) for v in status), fn  # type: ignore[attr-defined]
    err.inputs = inputs  # type: ignore[attr-defined]
    return err


def _view_of(array: Any, arguments: Any, names: Any) -> str | None:
    """The name of the one argument `array` is a view of (a reshape or transpose made outside the
    kernel), or None. Only on the error path: `np.may_share_memory` compares bounds."""
    found = [n for a, n in zip(arguments, names) if isinstance(a, np.ndarray) and isinstance(array, np.ndarray)
             and array.base is not None and np.may_share_memory(array, a)]
    return found[0] if len(found) == 1 else None


def located(err: BaseException, function: str, arguments: Any, names: Any) -> BaseException:
    """`err` (raised by an ABI v2 kernel's call, `status_error`) worded with the function it ran
    in and the argument its bad index came from: kernel input k is argument `names[j]` when it
    is the very array `arguments[j]`. Any other error, or one already located, is returned as is."""
    kernel, inputs = getattr(err, "kernel", None), getattr(err, "inputs", None)
    if not isinstance(err, IndexOutOfBounds) or kernel is None or getattr(err, "function", None):
        return err
    by_id = {id(a): n for a, n in zip(arguments, names)}
    args = [by_id.get(id(a), _view_of(a, arguments, names)) for a in inputs] if inputs is not None else []
    return status_error(kernel, err.status, (function, args)) or err  # type: ignore[attr-defined]


class FlatKernel:
    """An ABI v2 kernel seen as ABI v1, its status operand one more output
    (`KernelSignature.flat`): what the call thunk, which passes every operand alike, is built
    for. Holds the kernel, so the thunk's keep-alive keeps its code mapped."""

    __slots__ = ("kernel", "signature", "address")

    def __init__(self, kernel: "Kernel") -> None:
        self.kernel = kernel
        self.signature = kernel.signature.flat()
        self.address = kernel.address


def _checks(checks: Any, signature: KernelSignature) -> tuple[IndexCheck, ...]:
    out = tuple(c if isinstance(c, IndexCheck) else IndexCheck(str(c)) for c in checks or ())
    if out and not signature.status:
        raise KernelError(f"checks {[c.what for c in out]} given for a kernel of ABI v1 (no status operand): "
                          "pass KernelSignature(..., status=True) for a kernel that reports bad indices")
    return out


def _caller_source(depth: int) -> str:
    frame = sys._getframe(depth)
    return f"user:{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def _address_of(cfunc: Any) -> int:
    address = None
    if isinstance(cfunc, ctypes._CFuncPtr):  # CFUNCTYPE instances and CDLL symbols
        address = ctypes.cast(cfunc, ctypes.c_void_p).value
    if not address:
        raise KernelError(
            f"expected a ctypes function pointer (CFUNCTYPE instance or CDLL symbol), got {cfunc!r}"
        )
    return int(address)


@dataclass(frozen=True, eq=False)
class Kernel:
    """A kernel following the ABI of docs/INTERNAL-API.md.

    `function` is a ctypes function pointer typed by `signature`; `address`
    is the integer address of the code it was made from (the identity the
    table deduplicates on; for a Python callback given to `from_ctypes`, the
    caller's pointer, while `function` calls the guard's trampoline);
    `keepalive` owns the code; `source` says where it came from; `guard` is
    set for Python-callback kernels (`python_callback`); `compiled_shapes`
    are the shapes the code was compiled for (`from_decomposition`), None
    for code that knows no shapes (C, ctypes, Python callables).
    """

    function: Any
    signature: KernelSignature
    address: int
    source: str
    keepalive: Any = field(default=None, repr=False)
    #: the code is a Python callable behind a trampoline: call it only through
    #: `__call__`, which re-raises what it raised (see the module docstring).
    guard: CallbackGuard | None = field(default=None, repr=False)
    #: inputs then outputs (None = a dynamic dim); adoption refuses the kernel
    #: for a region of other static shapes and caps its row to these.
    compiled_shapes: Shapes | None = None
    #: ABI v2 (`signature.status`): what each status code means (`IndexCheck`, code k = checks[k-1])
    checks: tuple[IndexCheck, ...] = ()

    @property
    def python_callback(self) -> bool:
        """The code is a Python callable: call only through `__call__`."""
        return self.guard is not None

    @staticmethod
    def from_ctypes(cfunc: Any, *, signature: KernelSignature, source: str | None = None,
                    checks: Any = ()) -> "Kernel":
        """Wrap a ctypes function pointer; `source` defaults to the caller's file:line.

        A CFUNCTYPE instance made from a Python callable is re-wrapped like
        `from_python` (same argument conversions as the original), so an
        exception it raises reaches the caller instead of being swallowed.
        """
        _check_signature(signature)
        address = _address_of(cfunc)
        source = source or _caller_source(2)
        guard = None
        wrapped = _python_callable_of(cfunc)
        if wrapped is not None:  # same conversions as the original, but exceptions are kept
            guard = CallbackGuard(*wrapped)
        # `address` stays the caller's pointer (the table's identity for "the same kernel twice").
        function = signature.cfunctype()(_address_of(guard.callback) if guard else address)
        return Kernel(function, signature, address, source, cfunc, guard, checks=_checks(checks, signature))

    @staticmethod
    def from_python(fn: Callable[..., Any], *, signature: KernelSignature, source: str | None = None,
                    checks: Any = ()) -> "Kernel":
        """A kernel whose code is the Python callable `fn`, called with one
        pointer to a memref descriptor per operand (`signature.cfunctype()`
        conversions). If `fn` raises, the call raises `KernelError` from it
        (`KeyboardInterrupt`/`SystemExit` propagate as themselves)."""
        _check_signature(signature)
        if not callable(fn):
            raise KernelError(f"Kernel.from_python needs a callable, got {fn!r}")
        guard = CallbackGuard(fn, signature.cfunctype())
        address = _address_of(guard.callback)
        return Kernel(signature.cfunctype()(address), signature, address, source or _caller_source(2), fn, guard,
                      checks=_checks(checks, signature))

    @staticmethod
    def from_library(path: str | os.PathLike[str], symbol: str, *, signature: KernelSignature,
                     checks: Any = ()) -> "Kernel":
        """Load `symbol` from the shared library at `path` (ctypes.CDLL). A kernel of ABI v2
        (`signature.status`) names what its status codes mean in `checks` (strings such as
        "axis 0 of my_take", or `IndexCheck`s; code k is the k-th)."""
        _check_signature(signature)
        try:
            library = ctypes.CDLL(os.fspath(path))
        except OSError as err:
            raise KernelError(f"cannot load shared library {os.fspath(path)!r}: {err}") from err
        try:
            cfunc = getattr(library, symbol)
        except AttributeError:
            raise KernelError(
                f"shared library {os.fspath(path)!r} has no symbol {symbol!r}; "
                "check the name (C functions are not mangled; C++ needs extern \"C\")"
            ) from None
        address = _address_of(cfunc)
        function = signature.cfunctype()(address)
        return Kernel(function, signature, address, f"lib:{os.fspath(path)}:{symbol}", library,
                      checks=_checks(checks, signature))

    @staticmethod
    def from_object(code: bytes, symbol: str, *, signature: KernelSignature, lasting: bool = False) -> "Kernel":
        """JIT-link object code (see loader.py); source is `llvm:<sha256 prefix>`.
        `lasting`: the kernel lives as long as the process (a static kernel), so
        it is linked into the loader's engine that never rotates (loader.py)."""
        from fusebind.runtime.loader import load_object

        _check_signature(signature)
        loaded = load_object(code, symbol, lasting=lasting)
        function = signature.cfunctype()(loaded.address)
        digest = hashlib.sha256(bytes(code)).hexdigest()[:16]
        return Kernel(function, signature, loaded.address, f"llvm:{digest}", loaded)

    @staticmethod
    def from_decomposition(decomposition: "Decomposition") -> "Kernel":
        """JIT-link what lowering made of a region (`decompose_region`): its
        object code, symbol and signature, keeping the shapes it was compiled
        for as `compiled_shapes`. A loader failure is a `LoweringError` of
        stage "load" (the pipeline's one error type), the loader's error its cause."""
        from fusebind.lowering.errors import LoweringError
        from fusebind.runtime.loader import ObjectLoadError

        emitted = decomposition.emitted
        whats = tuple(getattr(emitted, "checks", ()))
        signature = decomposition.signature
        if whats and not signature.status:
            signature = dataclasses.replace(signature, status=True)
        try:
            kernel = Kernel.from_object(decomposition.object_code, decomposition.symbol, signature=signature)
        except (ObjectLoadError, KernelError) as exc:
            raise LoweringError("load", f"{type(exc).__name__}: {exc}") from exc
        sources = tuple(getattr(emitted, "check_sources", ())) or ((),) * len(whats)
        return dataclasses.replace(kernel, compiled_shapes=decomposition.shapes,
                                   checks=tuple(IndexCheck(w, tuple(s)) for w, s in zip(whats, sources)))

    def __call__(self, *descriptors: Any) -> None:
        """Call with one memref descriptor (struct or pointer) per operand, inputs then outputs.
        For an ABI v2 kernel the status operand is this call's own (`new_status`), and a set
        status raises `fb.IndexOutOfBounds` after the call (the outputs hold no answer)."""
        expected = len(self.signature.inputs) + len(self.signature.outputs)
        if len(descriptors) != expected:
            raise FusebindTypeError(f"kernel {self.source} takes {expected} memref descriptors, got {len(descriptors)}")
        guard = self.guard
        if guard is not None:
            guard.clear()
        status = new_status() if self.signature.status else None
        args = [d if isinstance(d, ctypes._Pointer) else ctypes.byref(d) for d in descriptors]
        if status is not None:
            args.append(ctypes.byref(descriptor_for(status)))
        self.function(*args)
        exc = guard.take() if guard is not None else None
        if exc is not None:
            if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: not a kernel failure
                raise exc
            raise KernelError(
                f"kernel {self.source} raised {type(exc).__name__}: {exc}; its outputs were not (fully) written"
            ) from exc
        failed = status_error(self, status) if status is not None else None  # descriptors: no arrays
        if failed is not None:
            raise failed

    def __repr__(self) -> str:
        return f"Kernel({self.signature}, address=0x{self.address:x}, source={self.source!r})"


def _python_callable_of(cfunc: Any) -> tuple[Callable[..., Any], Any] | None:
    """(callable, CFUNCTYPE prototype) when `cfunc` is a ctypes callback made
    from a Python callable, else None (C code: a library symbol, an address).

    ctypes keeps the callback's closure (a `CThunkObject`) in `_objects`; the
    thunk exposes its argument types, callable and result type only to the
    garbage collector, in that order (CPython 3.11; anything else is refused)."""
    objects = getattr(cfunc, "_objects", None)
    thunks = [v for v in objects.values() if type(v).__name__ == "CThunkObject"] if isinstance(objects, dict) else []
    if not thunks:
        return None
    refs = gc.get_referents(thunks[0])
    if len(refs) == 3 and isinstance(refs[0], tuple) and callable(refs[1]):
        argtypes, fn, restype = refs
        return fn, ctypes.CFUNCTYPE(restype, *argtypes)
    raise KernelError(
        f"{cfunc!r} is a ctypes callback around a Python callable that fusebind cannot unwrap on this Python, and "
        "ctypes would swallow any exception it raises; pass the callable to Kernel.from_python(fn, signature=...)"
    )


def _check_signature(signature: Any) -> None:
    if not isinstance(signature, KernelSignature):
        raise KernelError(
            f"signature must be a KernelSignature(inputs=..., outputs=...), got {signature!r}"
        )
