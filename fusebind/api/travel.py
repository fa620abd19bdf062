"""How an `fb.jit` function and an `fb.compile` result travel in a pickle (docs/PORTABLE.md).

Owns: `ArraySpec` (a shape and a dtype standing for an array: what `precompile`
takes and what a pickle records of each traced call), `call_spec` /
`materialize` (a call with its arrays replaced by specs, and back by zeros),
`plan_and_wait` (plan, wait for the kernels, plan again: what `precompile`
does per signature), `build_blob` (replay the function's calls in a scratch
session, as a new process would, through a recording cache: the blob then
holds the object code of every kernel such a process asks for, static arm-0
kernels included) and `receive` (decode, verify, install, replay).

Why replay instead of walking the bound kernels: a new process plans each
signature from an empty table (arm-0 static kernels first, then the fused
ones), and a kernel this process built long ago for another function is
memoised here without any cache lookup. Replaying in an empty session asks
for exactly the keys the receiver will ask for, each found in the on-disk
cache (a hit costs a link, not a compile). The receiver replays the same calls
in the same order, so its shape policy (automatic dynamic dims) reaches the
same traces and kernels as the sender's.

Unpickling runs code, like any pickle: see runtime/portable.py.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, Sequence

import numpy as np

from fusebind.dialect.errors import FusebindError
from fusebind.lowering.cache import ObjectCache, RecordingCache, recording_default
from fusebind.runtime.portable import (
    Payload,
    decode_payload,
    encode_payload,
    install_payload,
    machine_key,
    recorded_kernels,
    scratch_session,
)
from fusebind.runtime.session import use_session


class ArraySpec:
    """An array's shape and dtype, without data: `precompile(ArraySpec((1024, 64), np.float32))`
    compiles for such arrays. Any object with `.shape` and `.dtype` (an `np.empty(...)`, a
    `jax.ShapeDtypeStruct`, a dask chunk's meta) is taken the same way. Not a pytree node."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: Sequence[int], dtype: Any) -> None:
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)

    def __reduce__(self) -> Any:
        return (ArraySpec, (self.shape, self.dtype))

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ArraySpec) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))

    def __repr__(self) -> str:
        return f"ArraySpec({self.shape}, {self.dtype})"


_REDUCING = threading.local()


def by_reference(fn: Any) -> bool:
    """Is `fn` the module-level object its module and qualified name name (`@fb.jit def f` at
    the top of an imported module), so a receiver finds it by importing that module? Then its
    reduce is `(receive, (fn, state))`, and `fn` inside it pickles as that global (see
    `inner_reference`): the receiver imports the module, and the state is applied to its `f`."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__" or module not in sys.modules:
        return False
    obj: Any = sys.modules[module]
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if obj is not fn:
        return False
    _REDUCING.__dict__.setdefault("ids", set()).add(id(fn))
    return True


def inner_reference(fn: Any) -> bool:
    """True (once) when pickle asks for `fn`'s reduce while saving the reduce `by_reference`
    made: `fn` then reduces to its qualified name, which pickle saves as a global reference
    (pickle and cloudpickle handle the recursion: the loaded object is that global, after the
    receive call ran)."""
    busy = _REDUCING.__dict__.setdefault("ids", set())
    if id(fn) in busy:
        busy.discard(id(fn))
        return True
    return False


def _spec_of(leaf: Any) -> Any:
    if isinstance(leaf, (np.ndarray, np.generic)):
        return ArraySpec(np.shape(leaf), leaf.dtype)
    return leaf  # a Python scalar: its type is part of the key, its value is kept as it is


def materialize(leaf: Any) -> Any:
    """An `ArraySpec` or array-like spec (shape and dtype, not an ndarray) as zeros; else `leaf`."""
    if isinstance(leaf, (np.ndarray, np.generic)) or not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
        return leaf
    return np.zeros(tuple(leaf.shape), np.dtype(leaf.dtype))


def call_spec(flat: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """(args, kwargs) of a flattened call, each array leaf an `ArraySpec` (static values kept)."""
    return flat.rebuild([_spec_of(leaf) for leaf in flat.leaves])


def plan_and_wait(executor: Any, arrays: list[np.ndarray]) -> None:
    """Plan for `arrays`, wait until the kernels it asked for are compiled, and plan again (so
    the plan runs them): afterwards every kernel of this signature is bound."""
    executor.plan_for(arrays)
    executor.wait_compiled()
    executor.plan_for(arrays)


def build_blob(make_clone: Callable[[RecordingCache], Any], replay: Callable[[Any], list[str]],
               backend: str, kind: str, cache: Any = None) -> bytes:
    """The blob of a function: `make_clone(cache)` (in a scratch session) makes a fresh copy of
    it that compiles through `cache`; `replay(clone)` plans every recorded call and returns the
    traced modules' text. `cache`: the function's own object cache, if it has one."""
    rec = RecordingCache(cache if isinstance(cache, ObjectCache) else None)
    with use_session(scratch_session(rec, backend)), recording_default(rec):
        clone = make_clone(rec)
        try:
            modules = replay(clone)
        finally:
            for ex in _executors_of(clone):
                ex.close()
    return encode_payload(Payload(machine_key(backend), recorded_kernels(rec), modules, kind))


def _executors_of(fn: Any) -> list[Any]:
    executors = getattr(fn, "_executors", None)
    if isinstance(executors, dict):
        return list(executors.values())
    one = getattr(fn, "_executor", None)
    return [one] if one is not None else []


def receive(name: str, blob: bytes, backend: str) -> bool:
    """Decode and verify `blob` (`CorruptPayload` on any defect), then install its kernels
    when its machine key is this machine's (True), else warn (False)."""
    return install_payload(decode_payload(blob), name, backend)


def replay_quietly(step: Callable[[], Any]) -> None:
    """Run one replayed call's planning; a call that fails on zeros (the function's own checks
    of values) is skipped: the real call later says why, as it would without the pickle. Under
    FUSEBIND_STRICT an error that is not fusebind's (a bug, or the user's code) is raised."""
    from fusebind.runtime.strict import strict_mode

    try:
        step()
    except FusebindError:
        pass
    except Exception:
        if strict_mode():
            raise
