"""Shared fixtures for the lowering tests: a per-session object cache, and a
way to compile a `func.func` of prim ops and call it on numpy arrays."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from fusebind.dialect import parse_module
from fusebind.lowering import ObjectCache, build_object, emit_linalg, kernel_signature
from fusebind.lowering.build import default_fastmath


@pytest.fixture(scope="session")
def object_cache(tmp_path_factory: pytest.TempPathFactory) -> ObjectCache:
    return ObjectCache(Path(tmp_path_factory.mktemp("fusebind-cache")))


def compile_func(text: str, cache: ObjectCache, *, dynamic: bool = False, strided: bool = False,
                 fastmath: bool = True, name: str = "k") -> Callable[..., tuple[np.ndarray, ...]]:
    """Compile the only func of `text`; the result is called as f(*inputs, out_shapes=[...])."""
    from fusebind.runtime.dtypes import descriptor_for
    from fusebind.runtime.kernel import Kernel

    module = parse_module(text)
    func = next(iter(module.ops))
    fm = default_fastmath() if fastmath else None
    emitted = emit_linalg(func, name, dynamic=dynamic, strided_inputs=strided,
                          fastmath=fm[0] if fm else None, fastmath_defs=fm[1] if fm else None)
    built = build_object(emitted, cache=cache, key_parts={"test": text, "dynamic": dynamic, "strided": strided})
    kernel = Kernel.from_object(built.object_code, built.symbol,
                                signature=kernel_signature(emitted.inputs, emitted.outputs))

    def call(*arrays: np.ndarray, out_shapes: list[tuple[int, ...]] | None = None) -> tuple[np.ndarray, ...]:
        shapes = out_shapes or [tuple(s.shape) for s in emitted.outputs]
        outs = [np.full(shape, 0x5A, dtype=np.dtype(_np_name(spec.elem))) for shape, spec in zip(shapes, emitted.outputs)]
        keep = [np.require(a, requirements="C") if not strided else a for a in arrays]
        kernel(*(descriptor_for(a) for a in keep), *(descriptor_for(o) for o in outs))
        return tuple(outs)

    call.emitted = emitted  # type: ignore[attr-defined]
    call.module = module  # type: ignore[attr-defined]
    call.built = built  # type: ignore[attr-defined]
    return call


def _np_name(elem: str) -> str:
    return {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "i1": "bool"}[elem]


def reference(module: Any, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    from fusebind.dialect import interpret

    out = interpret(module, *arrays)
    return out if isinstance(out, tuple) else (out,)
