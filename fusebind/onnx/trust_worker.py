"""onnx's C++ passes on an untrusted model, in a child process so that a crash cannot take the caller.

Owns `onnx_passes(model, target, trusted)`: the model upgraded to `target` (importer.upgrade's rule)
and shape-inferred. With `trusted=True` (the user's own files) they run in this process, as before;
by default they run in one long-lived child (trust_child.py), started on the first untrusted import
and reused, because a fresh interpreter importing onnx costs about 1.5 s of CPU while a request to
a warm child costs the model's serialization (measured in docs/RELIABILITY.md). A child that dies
(a segfault, an abort) or does not answer within `CHILD_TIMEOUT_S` is killed and the model is
refused with InvalidModel; the next untrusted import starts a fresh child. The child is restarted
after `CHILD_MAX_REQUESTS` models (bounded memory in a serving process) and after a fork (the
parent's child is not ours to use). One request at a time (a lock): the passes are short next to
the compile that follows them. A process that replaced one of onnx's passes (a wrapper, a test's
monkeypatch) runs them in process: the replacement exists only there.

Models of 2 GiB or more cannot be serialized (protobuf's limit), and onnx's passes refuse them in
process too (their Python wrappers serialize first): they skip the passes, as the importer always did.

Must not: import the importer or any handler; parse anything the child sends but a ModelProto.
"""

from __future__ import annotations

import atexit
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from typing import Any

import onnx
from onnx import shape_inference, version_converter

from fusebind.onnx.trust import InvalidModel

#: seconds a model's passes may take in the child before it is killed and the model refused
CHILD_TIMEOUT_S = 300.0
#: models one child serves before it is replaced (its memory is then the OS's again)
CHILD_MAX_REQUESTS = 500
#: protobuf cannot serialize a message of 2 GiB or more
_PROTO_LIMIT = (1 << 31) - 1
_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trust_child.py")
#: the child runs trust_child.py without its own directory on sys.path (fusebind/onnx holds modules
#: named like others, coverage.py among them)
_BOOT = "import runpy, sys; sys.path.pop(0); runpy.run_path(sys.argv[1], run_name='__main__')"


class _Child:
    """One child process and its pipes (see the module docstring)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _BOOT, _SCRIPT], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True)
        self.pid = os.getpid()
        self.served = 0

    def request(self, data: bytes, target: int, timeout: float) -> tuple[int, bytes]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(struct.pack("<IQ", target, len(data)))
        self.proc.stdin.write(data)
        self.proc.stdin.flush()
        self.served += 1
        head = self._read(9, timeout)
        status, n = struct.unpack("<BQ", head)
        return status, self._read(n, timeout)

    def _read(self, n: int, timeout: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        out = bytearray()
        deadline = time.monotonic() + timeout
        while len(out) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, min(n - len(out), 1 << 24))
            if not chunk:
                raise EOFError
            out += chunk
        return bytes(out)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except OSError:
                pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()  # type: ignore[union-attr]
            except (OSError, ValueError):
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


_lock = threading.Lock()
_child: _Child | None = None


def _describe(proc: subprocess.Popen) -> str:
    code = proc.poll()
    if code is None:
        return "it stopped answering"
    if code < 0:
        try:
            return f"it was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"it was killed by signal {-code}"
    return f"it exited with status {code}"


def run_in_child(data: bytes, target: int, timeout: float = CHILD_TIMEOUT_S) -> bytes:
    """The child's reply for one model (serialized bytes in, serialized bytes out)."""
    global _child
    with _lock:
        if _child is not None and (_child.pid != os.getpid() or _child.served >= CHILD_MAX_REQUESTS
                                   or _child.proc.poll() is not None):
            if _child.pid == os.getpid():
                _child.close()
            _child = None
        if _child is None:
            _child = _Child()
        child = _child
        try:
            status, reply = child.request(data, target, timeout)
        except (EOFError, OSError, TimeoutError) as e:
            timed_out = isinstance(e, TimeoutError)
            if timed_out:
                child.close()
            else:
                try:
                    child.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            why = f"it did not finish in {timeout:g} s" if timed_out else _describe(child.proc)
            child.close()
            _child = None
            raise InvalidModel(f"fusebind.onnx: onnx's version converter / shape inference failed on this model "
                               f"in the child process that runs them ({why}); the model is refused (for a file "
                               "you trust, trusted=True runs them in this process)") from None
    if status != 0:
        raise InvalidModel(f"fusebind.onnx: the model is not an ONNX model onnx can read "
                           f"({reply.decode('utf-8', 'replace')})")
    return reply


#: onnx's passes as imported; a process that replaced one (a wrapper, a test's monkeypatch) gets its
#: replacement, which lives only here: the passes then run in this process
_ORIGINAL = (version_converter.convert_version, onnx.checker.check_model, shape_inference.infer_shapes)


def _replaced() -> bool:
    now = (version_converter.convert_version, onnx.checker.check_model, shape_inference.infer_shapes)
    return any(a is not b for a, b in zip(now, _ORIGINAL))


def onnx_passes(model: onnx.ModelProto, target: int, trusted: bool, upgrade: Any, infer: Any) -> onnx.ModelProto:
    """`model` upgraded (`upgrade(model, target)`) and shape-inferred (`infer(model)`): in this process
    when `trusted` (or when onnx's passes were replaced in this process), else in the child (the same
    two steps: trust_child.prepare)."""
    if trusted or model.ByteSize() >= _PROTO_LIMIT or _replaced():
        model = upgrade(model, target)
        return infer(model)
    out = onnx.ModelProto()
    out.ParseFromString(run_in_child(model.SerializeToString(), target))
    return out


@atexit.register
def _shutdown() -> None:
    global _child
    if _child is not None and _child.pid == os.getpid():
        _child.close()
    _child = None


__all__ = ["CHILD_MAX_REQUESTS", "CHILD_TIMEOUT_S", "onnx_passes", "run_in_child"]
