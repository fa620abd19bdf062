"""A callable kernel: a C function pointer, its signature, and its keep-alive.

This module owns `Kernel` and its three constructors (ctypes function,
shared library symbol, object code). A Kernel never decides where it is
bound; the binding table does that.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from fusebind.runtime.dtypes import KernelSignature


class KernelError(ValueError):
    """A kernel could not be made from what was given."""


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
    is its integer address (the identity the table deduplicates on);
    `keepalive` owns the code; `source` says where it came from.
    """

    function: Any
    signature: KernelSignature
    address: int
    source: str
    keepalive: Any = field(default=None, repr=False)

    @staticmethod
    def from_ctypes(cfunc: Any, *, signature: KernelSignature, source: str | None = None) -> "Kernel":
        """Wrap a ctypes function pointer; `source` defaults to the caller's file:line."""
        _check_signature(signature)
        address = _address_of(cfunc)
        function = signature.cfunctype()(address)
        return Kernel(function, signature, address, source or _caller_source(2), cfunc)

    @staticmethod
    def from_library(path: str | os.PathLike[str], symbol: str, *, signature: KernelSignature) -> "Kernel":
        """Load `symbol` from the shared library at `path` (ctypes.CDLL)."""
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
        return Kernel(function, signature, address, f"lib:{os.fspath(path)}:{symbol}", library)

    @staticmethod
    def from_object(code: bytes, symbol: str, *, signature: KernelSignature) -> "Kernel":
        """JIT-link object code (see loader.py); source is `llvm:<sha256 prefix>`."""
        from fusebind.runtime.loader import load_object

        _check_signature(signature)
        loaded = load_object(code, symbol)
        function = signature.cfunctype()(loaded.address)
        digest = hashlib.sha256(bytes(code)).hexdigest()[:16]
        return Kernel(function, signature, loaded.address, f"llvm:{digest}", loaded)

    def __call__(self, *descriptors: Any) -> None:
        """Call with one memref descriptor (struct or pointer) per operand."""
        expected = len(self.signature.inputs) + len(self.signature.outputs)
        if len(descriptors) != expected:
            raise TypeError(f"kernel {self.source} takes {expected} memref descriptors, got {len(descriptors)}")
        self.function(*(d if isinstance(d, ctypes._Pointer) else ctypes.byref(d) for d in descriptors))

    def __repr__(self) -> str:
        return f"Kernel({self.signature}, address=0x{self.address:x}, source={self.source!r})"


def _check_signature(signature: Any) -> None:
    if not isinstance(signature, KernelSignature):
        raise KernelError(
            f"signature must be a KernelSignature(inputs=..., outputs=...), got {signature!r}"
        )
