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

Lifetime: the code stays mapped exactly as long as its `LoadedCode` lives
(the resource tracker is its only owner; dropping it makes LLVM unload the
code). A `Kernel` holds its `LoadedCode`, a binding row its `Kernel`, so code
is freed when no table snapshot, plan or call holds the kernel any more: the
kernel budget (budget.py) only drops rows, Python's reference counts do the
rest. `loaded_code_stats()` counts what is mapped now and what was freed
(each `LoadedCode` has a finalizer), so tests and users can watch it.
Measured (one elementwise kernel, 1.8 KB of object code): ~48 KB of RSS per
loaded kernel; freeing one returns ~40 KB to the allocator for reuse (LLJIT
keeps ~9 KB per library name, which cannot be removed or reused).

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
    object code), `loaded` ever linked, `freed` unloaded since."""

    live: int
    live_bytes: int
    loaded: int
    freed: int


class _Ledger:
    """Counts of linked and freed code (a finalizer per `LoadedCode`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.loaded = self.freed = self.live_bytes = 0

    def linked(self, code: LoadedCode) -> None:
        with self._lock:
            self.loaded += 1
            self.live_bytes += code.size
        weakref.finalize(code, self._released, code.size)

    def _released(self, size: int) -> None:
        with self._lock:
            self.freed += 1
            self.live_bytes -= size

    def stats(self) -> LoadedCodeStats:
        with self._lock:
            return LoadedCodeStats(self.loaded - self.freed, self.live_bytes, self.loaded, self.freed)


_LEDGER = _Ledger()


def loaded_code_stats() -> LoadedCodeStats:
    """What this process has linked and freed (see the module docstring)."""
    return _LEDGER.stats()


class _Jit:
    """One LLJIT per process, created on first use; each object gets its own
    uniquely named library in it (library names cannot be reused)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jit: Any = None
        self._counter = itertools.count()

    def link(self, code: bytes, symbol: str) -> LoadedCode:
        import llvmlite.binding as llvm

        with self._lock:
            if self._jit is None:
                llvm.initialize_native_target()
                llvm.initialize_native_asmprinter()
                self._jit = llvm.create_lljit_compiler()
            jit = self._jit
            name = f"fusebind_obj{next(self._counter)}"
            builder = llvm.JITLibraryBuilder().add_object_img(code).add_current_process()
            builder.export_symbol(symbol)
            try:
                tracker = builder.link(jit, name)
            except RuntimeError as err:
                raise ObjectLoadError(
                    f"cannot link object code for symbol {symbol!r}: {err}; "
                    "check that the code was emitted for this host and defines the symbol"
                ) from err
        address = tracker[symbol]
        if not address:
            raise ObjectLoadError(
                f"object code does not define symbol {symbol!r}; "
                "pass the name of the exported entry (e.g. '_mlir_ciface_<func>')"
            )
        loaded = LoadedCode(symbol, int(address), name, tracker, jit, len(code))
        _LEDGER.linked(loaded)
        return loaded


_JIT = _Jit()


def load_object(code: bytes, symbol: str) -> LoadedCode:
    """Link `code` (an ELF object for this host) and return `symbol`'s address
    with the handle that keeps it alive."""
    if not isinstance(code, (bytes, bytearray, memoryview)) or len(code) == 0:
        raise ObjectLoadError(f"load_object needs non-empty object code bytes, got {type(code).__name__}")
    if not isinstance(symbol, str) or not symbol:
        raise ObjectLoadError(f"load_object needs a non-empty symbol name, got {symbol!r}")
    return _JIT.link(bytes(code), symbol)
