"""JIT-linking object code into this process.

This module owns `load_object(code, symbol) -> LoadedCode`: it links one
object file (the bytes llvmlite's `emit_object` produced) with llvmlite's
ORC LLJIT into a fresh JIT library, resolving external symbols (libm …)
against the current process, and returns the symbol's address together with
the resource tracker that keeps the code mapped.

Why LLJIT and not MCJIT: measured in a new process on the reference machine,
the first load costs ~1.7 ms with either, but each further kernel costs
0.17 ms with one shared LLJIT against 0.75 ms with one MCJIT engine per
object (PERFORMANCE.md: <= 3 ms per cached kernel).

Lifetime: the code stays mapped exactly as long as its `LoadedCode` lives:
its finalizer disposes the resource tracker (LLVM unloads the code), so the
order is explicit even when the `LoadedCode` dies in a garbage cycle. A
`Kernel` holds its `LoadedCode`, a binding row its `Kernel`, so code is freed
when no table snapshot, plan or call holds the kernel any more: the kernel
budget (budget.py) only drops rows, Python's reference counts do the rest.
`loaded_code_stats()` counts what is mapped now and what was freed, so tests
and users can watch it. Measured (one elementwise kernel, 1.8 KB of object
code): ~48 KB of RSS per loaded kernel; freeing one returns ~40 KB.

Engines rotate: an LLJIT keeps ~9 KB for every library it ever linked (a
JITDylib cannot be removed, nor its name reused), so a process that loads
and evicts kernels for days (the kernel budget thrashing over many shapes)
would grow by that much per load forever. So each LLJIT links at most
`LIBRARIES_PER_ENGINE` (256) libraries; then a fresh one takes over and the
old one is disposed as soon as the last code it linked is freed, which
returns its per-library memory (measured over 3,000 load/free cycles: 9.1
KiB per load without rotation, 0.3 KiB with it; a new LLJIT costs ~1.5 ms,
6 us per load amortized). What cannot be freed: a retired engine whose
code some kernel still holds stays whole until that kernel goes (~146 KB
plus ~9 KB per library it linked: up to ~2.4 MB); so code that lives as long
as the process (call thunks, static kernels) should be loaded with
`lasting=True`, into an engine that never rotates.

It must never import `mlir` (a cache hit must not pay for it); llvmlite is
imported lazily, on the first load.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any
from fusebind.dialect.errors import FusebindError


#: Compiler-runtime functions LLVM's x86 backend may call from a kernel that neither the process
#: (libgcc has no bfloat16 helpers) nor the kernel defines: linked once, given to every library.
#: `__truncsfbf2`: float -> bfloat16, round to nearest even (ml_dtypes' and numpy's rounding); a NaN
#: stays a NaN of its sign (quieted). A kernel that rounds f32 to bf16 through a libcall (the window
#: pools, a bf16 mean's epilogue) failed to link without it ("Symbols not found") and ran arm 0.
SUPPORT_IR = {
    "__truncsfbf2": """
define bfloat @__truncsfbf2(float %x) {
  %u = bitcast float %x to i32
  %abs = and i32 %u, 2147483647
  %nan = icmp ugt i32 %abs, 2139095040
  %top = lshr i32 %u, 16
  %odd = and i32 %top, 1
  %bias = add i32 %odd, 32767
  %sum = add i32 %u, %bias
  %rounded = lshr i32 %sum, 16
  %quiet = or i32 %top, 64
  %bits = select i1 %nan, i32 %quiet, i32 %rounded
  %half = trunc i32 %bits to i16
  %out = bitcast i16 %half to bfloat
  ret bfloat %out
}
""",
}


class ObjectLoadError(FusebindError, RuntimeError):
    """Object code could not be linked, or lacks the requested symbol."""


@dataclass(frozen=True, eq=False)
class LoadedCode:
    """Linked code: `address` of `symbol`, valid while this object lives."""

    symbol: str
    address: int
    library: str
    _tracker: Any = field(repr=False)
    _jit: Any = field(repr=False)
    #: bytes of object code linked (what `loaded_code_stats` sums)
    size: int = 0


@dataclass(frozen=True)
class LoadedCodeStats:
    """Linked code of this process: `live` objects mapped now (`live_bytes` of
    object code), `loaded` ever linked, `freed` unloaded since; `engines`
    LLJIT instances alive (the current one and retired ones still holding code)."""

    live: int
    live_bytes: int
    loaded: int
    freed: int
    engines: int = 1


#: libraries one LLJIT links before a fresh one takes over (see the module docstring)
LIBRARIES_PER_ENGINE = 256


class _Engine:
    """One LLJIT, the libraries it linked and how many of them are still mapped."""

    __slots__ = ("jit", "linked", "live", "retired")

    def __init__(self, jit: Any) -> None:
        self.jit = jit
        self.linked = 0
        self.live = 0
        self.retired = False


class _Jit:
    """The current LLJIT (created on first use) and the retired ones still
    holding code. Each object gets its own uniquely named library; an engine
    that has linked LIBRARIES_PER_ENGINE of them is retired and disposed when
    its last code is freed. Counts of linked and freed code live here too
    (a finalizer per `LoadedCode`)."""

    def __init__(self) -> None:
        # re-entrant: a garbage collection inside `link` may run a finalizer (`_released`) here
        self._lock = threading.RLock()
        self._current: _Engine | None = None
        #: the engine of code that lives as long as the process (never retired)
        self._lasting: _Engine | None = None
        self._counter = itertools.count()
        self._engines: set[_Engine] = set()  # every engine not disposed yet
        self._support_symbols: dict[str, int] | None = None
        self._support_trackers: list[Any] = []  # (they keep the support code linked)
        self.loaded = self.freed = self.live_bytes = 0

    def _engine(self, lasting: bool = False) -> _Engine:
        """The engine to link into (under the lock): the lasting one, or the
        current one (a fresh one once it has linked LIBRARIES_PER_ENGINE)."""
        import llvmlite.binding as llvm

        if not self._engines:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
        if lasting:
            if self._lasting is None:
                self._lasting = _Engine(llvm.create_lljit_compiler())
                self._engines.add(self._lasting)
            return self._lasting
        engine = self._current
        if engine is not None and engine.linked >= LIBRARIES_PER_ENGINE:
            engine.retired = True
            if engine.live == 0:
                self._dispose(engine)
            engine = None
        if engine is None:
            engine = _Engine(llvm.create_lljit_compiler())
            self._engines.add(engine)
            self._current = engine
        return engine

    def _dispose(self, engine: _Engine) -> None:
        self._engines.discard(engine)
        jit, engine.jit = engine.jit, None
        if jit is not None:
            jit.close()

    def _support(self) -> dict[str, int]:
        """The compiler-runtime functions kernels may call that the process lacks (under the lock):
        name -> address, linked once into the lasting engine (`SUPPORT_IR`)."""
        if self._support_symbols is None:
            import llvmlite.binding as llvm

            from fusebind.lowering.codegen import compile_llvm_ir

            found: dict[str, int] = {}
            for name, ir in SUPPORT_IR.items():
                builder = llvm.JITLibraryBuilder().add_object_img(compile_llvm_ir(ir, name)).add_current_process()
                builder.export_symbol(name)
                tracker = builder.link(self._engine(True).jit, f"fusebind_support_{name}")
                self._support_trackers.append(tracker)
                found[name] = tracker[name]
            self._support_symbols = found
        return self._support_symbols

    def link(self, code: bytes, symbol: str, lasting: bool = False) -> LoadedCode:
        import llvmlite.binding as llvm

        with self._lock:
            support = self._support()
            engine = self._engine(lasting)
            name = f"fusebind_obj{next(self._counter)}"
            builder = llvm.JITLibraryBuilder().add_object_img(code).add_current_process()
            for support_name, address in support.items():
                builder.import_symbol(support_name, address)
            builder.export_symbol(symbol)
            try:
                tracker = builder.link(engine.jit, name)
            except RuntimeError as err:
                raise ObjectLoadError(
                    f"cannot link object code for symbol {symbol!r}: {err}; "
                    "check that the code was emitted for this host and defines the symbol"
                ) from err
            engine.linked += 1
            engine.live += 1
        try:
            address = tracker[symbol]
        except BaseException:
            self._released(engine, tracker, 0, counted=False)
            raise
        if not address:
            self._released(engine, tracker, 0, counted=False)
            raise ObjectLoadError(
                f"object code does not define symbol {symbol!r}; "
                "pass the name of the exported entry (e.g. '_mlir_ciface_<func>')"
            )
        loaded = LoadedCode(symbol, int(address), name, tracker, engine.jit, len(code))
        with self._lock:
            self.loaded += 1
            self.live_bytes += len(code)
        # The finalizer holds the tracker and the engine: it disposes the tracker first, then
        # (for a retired engine whose last code this was) the LLJIT, never the other way round.
        # Not at exit: a daemon thread may still be running the code while the interpreter ends.
        weakref.finalize(loaded, self._released, engine, tracker, len(code)).atexit = False
        return loaded

    def _released(self, engine: _Engine, tracker: Any, size: int, counted: bool = True) -> None:
        tracker.close()  # LLVM unloads the code
        with self._lock:
            if counted:
                self.freed += 1
                self.live_bytes -= size
            engine.live -= 1
            if engine.retired and engine.live == 0:
                self._dispose(engine)

    def stats(self) -> LoadedCodeStats:
        with self._lock:
            return LoadedCodeStats(self.loaded - self.freed, self.live_bytes, self.loaded, self.freed,
                                   len(self._engines))


_JIT = _Jit()


def loaded_code_stats() -> LoadedCodeStats:
    """What this process has linked and freed (see the module docstring)."""
    return _JIT.stats()


def load_object(code: bytes, symbol: str, *, lasting: bool = False) -> LoadedCode:
    """Link `code` (an ELF object for this host) and return `symbol`'s address
    with the handle that keeps it alive. `lasting`: the code is meant to live
    as long as the process (a call thunk, a static kernel): it goes to an
    engine that never rotates, so it cannot pin a rotating one (whose
    per-library memory, ~9 KB for each of its 256 libraries, would stay with it)."""
    if not isinstance(code, (bytes, bytearray, memoryview)) or len(code) == 0:
        raise ObjectLoadError(f"load_object needs non-empty object code bytes, got {type(code).__name__}")
    if not isinstance(symbol, str) or not symbol:
        raise ObjectLoadError(f"load_object needs a non-empty symbol name, got {symbol!r}")
    return _JIT.link(bytes(code), symbol, bool(lasting))
