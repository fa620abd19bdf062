"""Reading an ONNX model file and its external data, from inside the model's directory only.

Owns `read_model(model, budget)`: a path, bytes or ModelProto as a ModelProto whose tensors all hold
their data inline. A path is parsed with `load_external_data=False` (onnx's own loader follows
`location` wherever it points; it has had path-traversal CVEs), then each tensor whose
`data_location` is EXTERNAL is read here: its `location` must be a relative path without `..`,
resolved under `os.path.realpath` of the model's directory (so a symlink, at any component, that
leaves the directory is refused), opened component by component from that directory with
`O_NOFOLLOW` (a component swapped for a symlink after the check is refused too), and it must be a
regular file (a FIFO or device would block or never end). `offset`/`length` are honoured; the bytes
the tensor's dims and type need are checked against `length` and against the file's size before
anything is read, and the total of every tensor's declared bytes against the budget
(trust.check_sizes) before the first read. Bytes and ModelProtos have no directory: external data
there is refused. `basepath` keys are ignored (the directory is the model file's, nothing else).

Must not: import the importer (it calls this) or any handler.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any

import onnx
from google.protobuf.message import DecodeError

from fusebind.onnx.trust import ExternalDataRefused, InvalidModel, check_sizes, declared_bytes, is_external, tensors

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # opening a FIFO must not block: it is refused after fstat


def parse(data: bytes, what: str) -> onnx.ModelProto:
    """`data` as a ModelProto; InvalidModel when protobuf cannot decode it."""
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as e:  # upb raises DecodeError; guard its siblings too
        raise InvalidModel(f"fusebind.onnx: {what} cannot be read as an ONNX model (protobuf: {e})") from None
    return model


def read_model(model: Any, budget: int) -> onnx.ModelProto:
    """`model` (a path, bytes or ModelProto) with every tensor's data inline, sizes checked."""
    if isinstance(model, onnx.ModelProto):
        proto, base = model, None
    elif isinstance(model, (bytes, bytearray, memoryview)):
        proto, base = parse(bytes(model), "the bytes given"), None
    else:
        path = os.fspath(model)
        with open(path, "rb") as f:
            data = f.read()
        proto, base = parse(data, f"the file {path!r}"), os.path.dirname(os.path.realpath(path))
    check_sizes(proto, budget)
    external = [(where, t) for where, t in tensors(proto.graph) if is_external(t)]
    if external and base is None:
        where, t = external[0]
        raise ExternalDataRefused(f"fusebind.onnx: {where} stores its data outside the model "
                                  f"({_location(t, where)!r}), and a model given as bytes or a ModelProto has no "
                                  "directory to read it from: pass the model's path instead")
    if external and proto is model:
        proto = onnx.ModelProto()
        proto.CopyFrom(model)
        external = [(where, t) for where, t in tensors(proto.graph) if is_external(t)]
    for where, t in external:
        _read_into(t, where, base)
    return proto


def _info(t: Any) -> dict[str, str]:
    return {e.key: e.value for e in t.external_data}


def _location(t: Any, where: str) -> str:
    loc = _info(t).get("location")
    if not loc:
        raise ExternalDataRefused(f"fusebind.onnx: {where} stores its data externally but names no location")
    return loc


def _int_key(info: dict[str, str], key: str, where: str, loc: str) -> int | None:
    text = info.get(key)
    if text is None or text == "":
        return None
    if not re.fullmatch(r"[0-9]{1,19}", text.strip()):
        raise InvalidModel(f"fusebind.onnx: {where}: the external data {key} {text!r} of {loc!r} is not a "
                           "non-negative integer")
    return int(text)


def _refuse(where: str, loc: str, why: str) -> ExternalDataRefused:
    return ExternalDataRefused(f"fusebind.onnx: {where}: the external data location {loc!r} {why}; fusebind reads "
                               "external data only from files inside the model's directory")


def open_under(base: str, loc: str, where: str) -> int:
    """A read-only fd of the regular file `loc` inside directory `base` (see the module docstring)."""
    if "\x00" in loc:
        raise _refuse(where, loc, "holds a NUL byte")
    if os.path.isabs(loc) or loc.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", loc):
        raise _refuse(where, loc, "is an absolute path")
    if ".." in re.split(r"[\\/]", loc):
        raise _refuse(where, loc, "contains '..'")
    real = os.path.realpath(os.path.join(base, loc))
    if os.path.commonpath([real, base]) != base or real == base:
        raise _refuse(where, loc, f"leads outside the directory through a symlink (to {real!r})")
    parts = os.path.relpath(real, base).split(os.sep)
    fd = os.open(base, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
        leaf = os.open(parts[-1], os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK, dir_fd=fd)
    except OSError as e:
        # ELOOP / ENOTDIR: a component became a symlink after realpath looked (a race): refused the same
        raise _refuse(where, loc, f"cannot be opened as a plain file under the directory ({e.strerror})") from None
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(leaf).st_mode):
        os.close(leaf)
        raise _refuse(where, loc, "is not a regular file")
    return leaf


def _read_into(t: Any, where: str, base: str) -> None:
    """Read `t`'s external bytes into `t.raw_data` (checked against its dims first)."""
    loc = _location(t, where)
    info = _info(t)
    offset = _int_key(info, "offset", where, loc) or 0
    length = _int_key(info, "length", where, loc)
    need = declared_bytes(t, where)
    if t.data_type == onnx.TensorProto.STRING:
        raise InvalidModel(f"fusebind.onnx: {where}: a string tensor cannot be stored as external data")
    if length is not None and length != need:
        raise InvalidModel(f"fusebind.onnx: {where}: its external data length {length} in {loc!r} does not match "
                           f"its dims {list(t.dims)} of {onnx.TensorProto.DataType.Name(t.data_type)} ({need} bytes)")
    fd = open_under(base, loc, where)
    try:
        size = os.fstat(fd).st_size
        if offset + need > size:
            raise InvalidModel(f"fusebind.onnx: {where}: its dims {list(t.dims)} need {need} bytes from offset "
                               f"{offset} of {loc!r}, but the file has {size} bytes (data shorter than claimed)")
        chunks, at = [], offset
        while at < offset + need:
            chunk = os.pread(fd, min(offset + need - at, 1 << 26), at)
            if not chunk:
                raise InvalidModel(f"fusebind.onnx: {where}: {loc!r} ended at byte {at} while reading {need} "
                                   f"bytes from offset {offset}")
            chunks.append(chunk)
            at += len(chunk)
    finally:
        os.close(fd)
    t.raw_data = b"".join(chunks)
    del t.external_data[:]
    t.data_location = onnx.TensorProto.DEFAULT


__all__ = ["open_under", "parse", "read_model"]
