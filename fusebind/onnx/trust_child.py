"""The child process that runs onnx's C++ passes on untrusted models (started by trust_worker.py).

onnx's version converter, checker and shape inference are C++ that trusts its input: hostile bytes
can crash them (a segfault or an abort takes the whole process). Here a crash ends only this child;
the parent sees the pipe close and refuses the model. Run as a script (`python trust_child.py`,
the parent's interpreter), it imports onnx and nothing of fusebind.

Protocol (stdin -> stdout, frames of `<u32 target opset><u64 n><n bytes of ModelProto>`): the reply
is `<u8 status><u64 n><n bytes>`, status 0 with the upgraded and shape-inferred ModelProto, or 1
with a UTF-8 message (the model does not parse). The passes' own Python exceptions are the
in-process importer's: a converter failure keeps the model's opset, a failed inference keeps
the shapes it had.

Must not: import fusebind (this runs as a plain script).
"""

from __future__ import annotations

import struct
import sys


def prepare(data: bytes, target: int) -> bytes:
    """The model converted to `target` (when older and the converter manages) and shape-inferred,
    exactly as importer.upgrade + shape_inference.infer_shapes do in process."""
    import onnx
    from onnx import shape_inference, version_converter

    model = onnx.ModelProto()
    model.ParseFromString(data)
    opset = next((int(i.version) for i in model.opset_import if i.domain in ("", "ai.onnx")), 1)
    if opset < target:
        try:
            converted = version_converter.convert_version(model, target)
            onnx.checker.check_model(converted)
            model = converted
        except Exception:  # no adapter for some op: the model's own opset
            pass
    try:
        model = shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:  # inference is advice
        pass
    return model.SerializeToString()


def limit_memory(n: int) -> None:
    """Bound this child's address space for a request of `n` bytes (4 GiB + 8 bytes per byte of the
    model): onnx's data propagation computes what a node claims (a Range of 2^40 elements), and
    without a bound it grew until the kernel's OOM killer took it (80 s of swapping the machine); with
    one the allocation fails at once as a MemoryError, which the passes report like any failure."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = (4 << 30) + 8 * n
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _read(stream: object, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = stream.read(n - len(out))  # type: ignore[attr-defined]
        if not chunk:
            raise EOFError
        out += chunk
    return bytes(out)


def main() -> int:
    import onnx  # noqa: F401  (import once, before the first request: the parent waits on replies only)

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            target, n = struct.unpack("<IQ", _read(stdin, 12))
            data = _read(stdin, n)
        except EOFError:
            return 0
        try:
            limit_memory(n)
            status, reply = 0, prepare(data, target)
        except Exception as e:  # a Python-level failure is reported, not a crash
            status, reply = 1, f"{type(e).__name__}: {e}".encode("utf-8", "replace")
        stdout.write(struct.pack("<BQ", status, len(reply)))
        stdout.write(reply)
        stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
