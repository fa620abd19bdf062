"""Portable object code: the versioned blob a pickled fusebind function carries.

Owns: `machine_key()` (the facts object code depends on: the backend's
target facts `Backend.target_key_parts()` -- CPU name and features, LLVM
version, triple, fusebind version, pipeline -- plus the llvmlite version and
the kernel ABI version), `Payload` and `PortableKernel`, `encode_payload` /
`decode_payload` (the blob), `install_payload` (verify, compare the machine
key, install into the object cache's portable layer), `CorruptPayload` and
`MachineMismatchWarning`, and `scratch_session` (where a pickling process
replays a function to learn the keys of every kernel it needs).

The blob (inside the pickle): `MAGIC`, a 4-byte format version, an 8-byte
header length, the JSON header (machine key, kernels: key, symbol, sha256,
size; the traced modules' text; what kind of function), an 8-byte body
length, then the kernels' object code back to back. Every length is checked
against the bytes present and every kernel's code against its sha256 before
anything is installed: a short, garbled or altered blob is `CorruptPayload`
(a `FusebindValueError`), never a crash and never code we did not hash.

Trust: unpickling a fusebind function runs code, like any pickle (pickle
itself can call anything). The hashes catch corruption, not malice: whoever
can write the pickle can write its hashes. Load pickles only from where you
would load code.

Must not: import `mlir` (a receiving process binds kernels with llvmlite only).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import struct
import warnings
from dataclasses import dataclass, field
from typing import Any

from fusebind.dialect.errors import FusebindValueError
from fusebind.lowering.backend import DEFAULT_BACKEND, backend_named
from fusebind.lowering.cache import CachedObject, RecordingCache, install_portable, portable_counts

MAGIC = b"FBPORT\x00"
#: the blob's layout version (bump on any change of the layout or the header's fields)
FORMAT = 1
#: the kernel ABI this fusebind calls kernels with (docs/KERNEL-ABI.md: v1, v2 with the status operand)
KERNEL_ABI = 2
_KEY = re.compile(r"[0-9a-f]{64}")
#: this process among all others (with its pid: a forked child is another process)
_TOKEN = secrets.token_hex(8)
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class CorruptPayload(FusebindValueError):
    """The portable blob in a pickled fusebind function is truncated, garbled, of an
    unknown format, or a kernel's object code does not match its sha256."""


class MachineMismatchWarning(UserWarning):
    """The kernels in a pickle were compiled for another machine (CPU, LLVM, fusebind ...):
    they are not bound, and the function is compiled again here from its module."""


def machine_key(backend: str = DEFAULT_BACKEND) -> dict[str, str]:
    """What object code compiled here depends on, as strings: the backend's target facts
    (the ones every object-cache key includes; the pipeline as its sha256), the llvmlite
    version and the kernel ABI version. Two machines with the same key run each other's code."""
    import llvmlite

    parts = backend_named(backend).target_key_parts()
    key = {k: str(v) for k, v in parts.items() if k != "pipeline"}
    key["pipeline"] = hashlib.sha256(str(parts.get("pipeline", "")).encode()).hexdigest()[:16]
    key["llvmlite"] = str(llvmlite.__version__)
    key["kernel_abi"] = str(KERNEL_ABI)
    return key


def machine_differences(theirs: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    """`field: theirs != ours` for every field that differs (a long feature string shows
    only the features that differ)."""
    out = []
    for name in sorted(set(theirs) | set(ours)):
        a, b = theirs.get(name), ours.get(name)
        if a == b:
            continue
        if name == "features" and isinstance(a, str) and isinstance(b, str):
            sa, sb = set(a.split(",")), set(b.split(","))
            out.append(f"features: only in the pickle {sorted(sa - sb)[:6]}, only here {sorted(sb - sa)[:6]}")
        else:
            out.append(f"{name}: {a!r} in the pickle, {b!r} here")
    return out


@dataclass(frozen=True)
class PortableKernel:
    """One kernel's object code, its exported symbol and its object-cache key."""

    key: str
    symbol: str
    code: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.code).hexdigest()


@dataclass
class Payload:
    """What a pickled function carries besides itself (see the module docstring)."""

    machine: dict[str, str]
    kernels: list[PortableKernel] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    kind: str = "jit"
    #: the process that made it (`origin()`)
    origin: str = ""


def origin() -> str:
    """This process's mark in the payloads it makes: a payload read back where it was made
    installs nothing (its kernels are bound or cached here already, and a process that only
    round-trips its own functions keeps its object cache exactly as it was)."""
    return f"{_TOKEN}:{os.getpid()}"


def encode_payload(payload: Payload) -> bytes:
    """The blob of `payload` (layout in the module docstring)."""
    header = {"format": FORMAT, "kind": payload.kind, "machine": payload.machine, "modules": payload.modules,
              "origin": payload.origin or origin(),
              "kernels": [{"key": k.key, "symbol": k.symbol, "sha256": k.sha256, "size": len(k.code)}
                          for k in payload.kernels]}
    head = json.dumps(header, sort_keys=True).encode()
    body = b"".join(k.code for k in payload.kernels)
    return MAGIC + struct.pack("<IQ", FORMAT, len(head)) + head + struct.pack("<Q", len(body)) + body


def _corrupt(what: str) -> CorruptPayload:
    return CorruptPayload(f"fusebind: the compiled-function payload in this pickle is corrupt: {what}. Pickle "
                          "the function again from its source (and check how the bytes were copied)")


def decode_payload(blob: Any) -> Payload:
    """The payload of `blob`, every length and kernel hash checked; `CorruptPayload` otherwise."""
    if not isinstance(blob, (bytes, bytearray)):
        raise _corrupt(f"expected bytes, got {type(blob).__name__}")
    blob = bytes(blob)
    if not blob.startswith(MAGIC):
        raise _corrupt(f"it does not start with the magic {MAGIC!r}")
    at = len(MAGIC)
    if len(blob) < at + 12:
        raise _corrupt(f"{len(blob)} bytes, shorter than its fixed header")
    version, head_len = struct.unpack_from("<IQ", blob, at)
    if version != FORMAT:
        raise _corrupt(f"format version {version}, this fusebind reads version {FORMAT}")
    at += 12
    if at + head_len + 8 > len(blob):
        raise _corrupt(f"its header claims {head_len} bytes, only {len(blob) - at} are present")
    try:
        header = json.loads(blob[at:at + head_len].decode())
    except (UnicodeDecodeError, ValueError) as err:
        raise _corrupt(f"its header is not valid JSON ({err})") from None
    at += head_len
    (body_len,) = struct.unpack_from("<Q", blob, at)
    at += 8
    if at + body_len != len(blob):
        raise _corrupt(f"its body claims {body_len} bytes, {len(blob) - at} are present")
    try:
        machine = {str(k): str(v) for k, v in dict(header["machine"]).items()}
        modules = [str(m) for m in header.get("modules", [])]
        kind = str(header.get("kind", "jit"))
        made_in = str(header.get("origin", ""))
        metas = [(str(m["key"]), str(m["symbol"]), str(m["sha256"]), int(m["size"])) for m in header["kernels"]]
    except (KeyError, TypeError, ValueError) as err:
        raise _corrupt(f"its header lacks or garbles a field ({type(err).__name__}: {err})") from None
    if sum(size for *_, size in metas) != body_len or any(size <= 0 for *_, size in metas):
        raise _corrupt(f"its kernels' sizes do not add up to its body of {body_len} bytes")
    kernels = []
    for key, symbol, digest, size in metas:
        code = blob[at:at + size]
        at += size
        if not _KEY.fullmatch(key) or not _SYMBOL.fullmatch(symbol):
            raise _corrupt(f"a kernel has a malformed key {key[:80]!r} or symbol {symbol[:80]!r}")
        if hashlib.sha256(code).hexdigest() != digest:
            raise _corrupt(f"the object code of kernel {symbol} (key {key[:12]}...) does not match its sha256")
        kernels.append(PortableKernel(key, symbol, code))
    return Payload(machine, kernels, modules, kind, made_in)


def install_payload(payload: Payload, name: str, backend: str = DEFAULT_BACKEND) -> bool:
    """Install the payload's kernels into the object cache's portable layer when its machine
    key is this machine's (True); else warn once, naming what differs, and install nothing
    (False: the function is compiled here from its module). A payload made in this very
    process installs nothing (`origin`)."""
    ours = machine_key(backend)
    diff = machine_differences(payload.machine, ours)
    if diff:
        warnings.warn(f"fusebind: the kernels pickled with '{name}' were compiled for another machine ("
                      + "; ".join(diff) + "); they are not used, and it is compiled again here from its module",
                      MachineMismatchWarning, stacklevel=3)
        return False
    if payload.origin == origin():
        return True
    install_portable({k.key: CachedObject(k.symbol, k.code) for k in payload.kernels})
    return True


def portable_stats() -> dict[str, Any]:
    """What this process received: {"entries", "installed", "hits"} of the portable layer, and
    "mlir_imported" (no kernel is compiled from MLIR without importing it)."""
    import sys

    return {**portable_counts(), "mlir_imported": "mlir" in sys.modules}


def recorded_kernels(cache: RecordingCache) -> list[PortableKernel]:
    """The kernels a `RecordingCache` served or stored, in key order."""
    return [PortableKernel(k, e.symbol, e.object_code) for k, e in sorted(cache.entries.items())]


def scratch_session(cache: RecordingCache, backend: str = DEFAULT_BACKEND) -> Any:
    """A fresh session (an empty table, as a new process has) whose static kernels are built
    and loaded through `cache`, so replaying a function in it records every kernel's key."""
    from fusebind.runtime.backend import runtime_backend
    from fusebind.runtime.session import Session
    from fusebind.runtime.static_kernels import StaticKernels

    session = Session("portable-scratch")
    target = runtime_backend(backend)
    slot = "static_kernels" if target.name == DEFAULT_BACKEND else f"static_kernels:{target.name}"
    session.slot(slot, lambda: StaticKernels(cache=cache, backend=target, session=session))
    return session
