"""Compiled functions that travel (docs/PORTABLE.md): an `fb.jit` function and an `fb.compile`
result pickle (pickle and cloudpickle) with the object code of their kernels; a process that
unpickles them on this machine binds those kernels and compiles nothing (no `import mlir`),
with the parent's values bit for bit. The blob is checked: an altered kernel or a garbled
payload is `CorruptPayload`, a truncated pickle is pickle's own clear error, a kernel of
another machine is not bound (a warning names what differs, the function compiles again).

One child process (a fresh object cache, so the disk cannot hide a compile) runs every
cross-process check; the parent's kernels are shared by all tests (the same shapes)."""

from __future__ import annotations

import json
import os
import pickle
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import fusebind as fb
from fusebind.api.travel import ArraySpec
from fusebind.lowering.cache import ObjectCache, clear_portable, portable_counts
from fusebind.runtime.session import Session, use_session
from fusebind.runtime.portable import (
    MAGIC,
    CorruptPayload,
    MachineMismatchWarning,
    decode_payload,
    encode_payload,
)

cloudpickle = pytest.importorskip("cloudpickle", reason="cloudpickle (the `dask` extra) is not installed")

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import pickle_fns  # noqa: E402  (by reference: the child imports it by this name)

X = np.random.default_rng(7).random((16, 32), dtype=np.float32)
W = np.linspace(0.0, 1.0, 32, dtype=np.float32)


@pytest.fixture(autouse=True)
def _no_portable_left():
    """A test that unpickles in this process must not leave kernels in its portable layer."""
    yield
    clear_portable()


def _closure():
    w = W.copy()  # a captured array: cloudpickle carries it by value

    @fb.jit
    def scaled(a):
        return np.exp(a - w) * 2.0
    return scaled


class _Reduced:
    """Pickles as `fn(*args)`: a pickle of a function with its reduce arguments altered."""

    def __init__(self, fn, args):
        self.rv = (fn, args)

    def __reduce__(self):
        return self.rv


def _with_blob(rv, change):
    """The reduce value `rv` of a function with its blob replaced by `change(blob)`."""
    fn, args = rv
    calls, blob, machine = args[-1]
    return _Reduced(fn, (*args[:-1], (calls, change(blob), machine)))


def _tamper_machine(blob):
    payload = decode_payload(blob)
    payload.machine["cpu"] = "some-other-cpu"
    return encode_payload(payload)


CHILD = textwrap.dedent('''
    import json, pickle, sys, warnings
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    d = sys.argv[2]
    X = np.load(d + "/x.npy")
    out = {}

    def load(name):
        with open(d + "/" + name, "rb") as f:
            return pickle.load(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing may warn on a compatible machine
        by_ref = load("ref.pkl")
        import pickle_fns
        out["same_object"] = by_ref is pickle_fns.row_tanh
        closure = load("closure.pkl")
        compiled = load("compiled.pkl")
        dynamic = load("dynamic.pkl")
        values = {"ref": by_ref(X, X), "closure": closure(X), "compiled": compiled(X, X)}
        for n in (24, 16, 20):  # the sizes in another order than the parent traced them, and a new one
            values[f"dynamic{n}"] = dynamic(X[:1].repeat(n, axis=0) * 0.5)
    out["values"] = {k: v.tobytes().hex() for k, v in values.items()}
    out["compiles"] = {k: f.stats.compiles for k, f in
                       [("ref", by_ref), ("closure", closure), ("compiled", compiled), ("dynamic", dynamic)]}
    out["mlir"] = "mlir" in sys.modules
    from fusebind.runtime.portable import portable_stats
    out["portable"] = portable_stats()
    print(json.dumps(out))
''')


def test_functions_travel_to_a_new_process(tmp_path):
    """By reference (pickle), by value with a captured array (cloudpickle), an fb.compile result
    and a function with automatic dynamic dims precompiled for two sizes: the child compiles
    nothing, imports no mlir, and returns the parent's values bit for bit."""
    closure = _closure()
    closure(X)  # called before it is pickled: that signature's kernels travel
    compiled = fb.compile(pickle_fns.row_tanh.mlir(X, X))
    compiled(X, X)
    dynamic = pickle_fns.shifted.precompile(ArraySpec((16, 32), np.float32))
    dynamic.precompile(ArraySpec((24, 32), np.float32))
    files = {"ref.pkl": pickle.dumps(pickle_fns.row_tanh), "closure.pkl": cloudpickle.dumps(closure),
             "compiled.pkl": pickle.dumps(compiled), "dynamic.pkl": pickle.dumps(dynamic)}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    np.save(tmp_path / "x.npy", X)
    env = dict(os.environ, FUSEBIND_CACHE_DIR=str(tmp_path / "child-cache"), FUSEBIND_MACHINE="default",
               FUSEBIND_STRICT="1")
    run = subprocess.run([sys.executable, "-c", CHILD, str(HERE), str(tmp_path)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    expect = {"ref": pickle_fns.row_tanh(X, X), "closure": closure(X), "compiled": compiled(X, X)}
    for n in (24, 16, 20):
        expect[f"dynamic{n}"] = dynamic(X[:1].repeat(n, axis=0) * 0.5)
    for key, value in expect.items():
        assert got["values"][key] == value.tobytes().hex(), key
    assert got["same_object"] is True
    assert got["compiles"] == {"ref": 0, "closure": 0, "compiled": 0, "dynamic": 0}
    assert got["mlir"] is False
    assert got["portable"]["hits"] > 0 and got["portable"]["installed"] > 0


def test_another_machine_key_warns_and_compiles_again():
    """A payload of another CPU: one warning naming what differs, nothing installed, the
    function compiled again (in a fresh session, as in a new process; its fused kernel without
    an object cache, so the compile is real), with the right values."""
    fn = fb.jit(pickle_fns.plain, cache=ObjectCache(None)).precompile(X)
    data = pickle.dumps(_with_blob(fn.__reduce__(), _tamper_machine))
    before = portable_counts()
    with use_session(Session("receiver")), pytest.warns(MachineMismatchWarning) as caught:
        other = pickle.loads(data)
    assert portable_counts() == before  # nothing installed
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith("fusebind: the kernels pickled with 'plain' were compiled for another machine (cpu: "
                              "'some-other-cpu' in the pickle, ")
    assert message.endswith("); they are not used, and it is compiled again here from its module")
    assert other is not fn and other.stats.compiles == 1
    np.testing.assert_array_equal(other(X), fn(X))
    np.testing.assert_allclose(other(X), np.sqrt(X * X + 1.0), rtol=1e-6)


def _blob_span(data: bytes) -> tuple[int, bytes]:
    """Where the blob starts in pickled bytes, and the blob (pickle stores bytes verbatim)."""
    start = data.index(MAGIC)
    _, head_len = struct.unpack_from("<IQ", data, start + len(MAGIC))
    body_at = start + len(MAGIC) + 12 + head_len
    (body_len,) = struct.unpack_from("<Q", data, body_at)
    return start, data[start:body_at + 8 + body_len]


def test_a_flipped_byte_of_object_code_is_a_clear_error():
    fn = fb.jit(pickle_fns.plain).precompile(X)
    data = bytearray(pickle.dumps(fn))
    start, blob = _blob_span(bytes(data))
    data[start + len(blob) - 5] ^= 0x40  # inside the last kernel's code
    with pytest.raises(CorruptPayload, match=r"^fusebind: the compiled-function payload in this pickle is corrupt: "
                       r"the object code of kernel \w+ \(key [0-9a-f]{12}\.\.\.\) does not match its sha256\. "
                       r"Pickle the function again"):
        pickle.loads(bytes(data))
    assert issubclass(CorruptPayload, fb.FusebindValueError) and issubclass(CorruptPayload, ValueError)


def test_a_truncated_pickle_or_payload_is_a_clear_error():
    fn = fb.jit(pickle_fns.plain).precompile(X)
    data = pickle.dumps(fn)
    with pytest.raises(pickle.UnpicklingError, match="^pickle data was truncated$"):
        pickle.loads(data[: len(data) // 2])
    # the pickle intact, the blob inside it cut short: our own lengths catch it
    rv = fn.__reduce__()
    with pytest.raises(CorruptPayload, match=r"its body claims \d+ bytes, \d+ are present"):
        pickle.loads(pickle.dumps(_with_blob(rv, lambda b: b[:-7])))
    with pytest.raises(CorruptPayload, match=r"its header claims \d+ bytes, only \d+ are present"):
        pickle.loads(pickle.dumps(_with_blob(rv, lambda b: b[:len(MAGIC) + 40])))
    with pytest.raises(CorruptPayload, match=r"it does not start with the magic"):
        pickle.loads(pickle.dumps(_with_blob(rv, lambda b: b"garbage" + b)))
    with pytest.raises(CorruptPayload, match=r"format version 99, this fusebind reads version 1"):
        pickle.loads(pickle.dumps(_with_blob(rv, lambda b: b[:len(MAGIC)] + struct.pack("<I", 99)
                                                  + b[len(MAGIC) + 4:])))


def test_precompile_takes_specs_and_in_process_round_trip_shares_the_function():
    """In the process that made them: by reference the very same object comes back, by value
    a new one that binds the kernels already here; nothing goes into the portable layer. A
    spec and an array of the same shape are the same trace."""
    f = pickle_fns.row_tanh.precompile(ArraySpec(X.shape, X.dtype), np.empty_like(X))
    traces = f.stats.traces
    before = portable_counts()
    assert pickle.loads(pickle.dumps(f)) is f
    assert f.stats.traces == traces
    closure = _closure()
    closure(X)
    again = cloudpickle.loads(cloudpickle.dumps(closure))  # by value: a new function
    assert again is not closure and again.stats.traces == 1 and again.stats.compiles == 0
    np.testing.assert_array_equal(again(X), closure(X))
    assert portable_counts() == before  # read back where it was made: nothing installed
    np.testing.assert_array_equal(f(X, X), pickle_fns.row_tanh(X, X))
    np.testing.assert_allclose(f(X, X), np.tanh(X * X + 1.0).sum(axis=-1), rtol=1e-5)


def test_decode_of_damaged_blobs_is_a_payload_or_corrupt_payload():
    """Every single-byte change and every truncation of a blob decodes to a payload (a byte of
    module text or of a key's value, caught later by the machine key or the cache key) or
    raises CorruptPayload: never another exception. A change inside object code is always caught."""
    fn = fb.jit(pickle_fns.plain).precompile(X)
    blob = fn._portable_blob()
    good = decode_payload(blob)
    code_at = len(blob) - sum(len(k.code) for k in good.kernels)
    rng = np.random.default_rng(3)
    for at in rng.integers(0, len(blob), 300):
        damaged = bytearray(blob)
        damaged[at] ^= int(rng.integers(1, 256))
        try:
            decode_payload(bytes(damaged))
        except CorruptPayload:
            continue
        assert at < code_at, f"a change at byte {at}, inside the object code, was not caught"
    for end in range(0, len(blob), max(1, len(blob) // 97)):
        with pytest.raises(CorruptPayload):
            decode_payload(blob[:end])
