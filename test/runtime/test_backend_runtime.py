"""The runtime's Backend: one object per name, reached by the table's backend name.

A second backend, `cpu-test`, is registered here and nowhere else: it reuses cpu's code
generation and loading, and kernels bound under it are keyed, built and found apart from cpu's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from fusebind.dialect import parse_module
from fusebind.lowering.backend import Backend, UnknownBackendError, backend_named, backend_names, register_backend
from fusebind.lowering.build import target_key_parts
from fusebind.runtime.backend import CPU, RuntimeBackend, register_runtime_backend, runtime_backend
from fusebind.runtime.bindings import BindingKey
from fusebind.runtime.executor import Executor
from fusebind.runtime.fused_kernels import fused_kernel_available
from fusebind.runtime.session import Session
from fusebind.runtime.static_kernels import ensure_static_kernel


@dataclass(frozen=True)
class CountingBackend(RuntimeBackend):
    """cpu's code generation; counts what it loaded (the proof that loading goes through it)."""

    def load(self, code, symbol, *, signature):  # type: ignore[no-untyped-def]
        LOADED.append(symbol)
        return super().load(code, symbol, signature=signature)

    def load_decomposition(self, decomposition):  # type: ignore[no-untyped-def]
        LOADED.append(decomposition.symbol)
        return super().load_decomposition(decomposition)


LOADED: list[str] = []
CPU_TEST = register_runtime_backend(CountingBackend("cpu-test"))
LOWERING_ONLY = register_backend(Backend("lowering-only-test"))

CHAIN = """
func.func @f(%a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %m = prim.mul %a, %b : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %e = prim.exp %m : tensor<64xf32> -> tensor<64xf32>
  func.return %e : tensor<64xf32>
}
"""
NEG = """
func.func @g(%a: tensor<8xf32>) -> tensor<8xf32> {
  %n = prim.neg %a : tensor<8xf32> -> tensor<8xf32>
  func.return %n : tensor<8xf32>
}
"""


def test_each_name_is_one_object_and_the_registry_lists_them() -> None:
    assert runtime_backend("cpu") is backend_named("cpu") is CPU
    assert runtime_backend("cpu-test") is CPU_TEST
    assert backend_names()[0] == "cpu" and "cpu-test" in backend_names()
    assert target_key_parts(CPU_TEST)["backend"] == "cpu-test"  # its objects are cached apart from cpu's
    assert {k: v for k, v in target_key_parts(CPU_TEST).items() if k != "backend"} == \
        {k: v for k, v in target_key_parts(CPU).items() if k != "backend"}


def test_unknown_and_lowering_only_names_are_clear_errors() -> None:
    with pytest.raises(UnknownBackendError) as info:
        runtime_backend("gpu")
    assert str(info.value).startswith("unknown backend 'gpu': expected one of cpu, cpu-test")
    with pytest.raises(UnknownBackendError) as info:
        runtime_backend("lowering-only-test")
    assert str(info.value) == ("backend 'lowering-only-test' is registered for lowering only: this process cannot "
                               "load or run its code; register a fusebind.runtime.backend.RuntimeBackend for it, or "
                               "use one of " + ", ".join(n for n in backend_names() if n != "lowering-only-test"))
    with pytest.raises(UnknownBackendError, match="unknown backend 'gpu': expected one of cpu, cpu-test"):
        Executor(parse_module(NEG), backend="gpu", session=Session())
    with pytest.raises(UnknownBackendError, match="unknown backend 'gpu'"):
        ensure_static_kernel("neg", ["f32", "f32"], 1, session=Session(), backend="gpu")
    with pytest.raises(TypeError, match="register_runtime_backend needs a fusebind RuntimeBackend, got Backend"):
        register_runtime_backend(Backend("plain"))  # type: ignore[arg-type]


def test_a_static_kernel_bound_under_cpu_test_is_keyed_and_found_apart_from_cpu() -> None:
    session = Session("two-backends")
    key = BindingKey.static("neg")
    LOADED.clear()
    row = ensure_static_kernel("neg", ["f32", "f32"], 1, session=session, backend="cpu-test")
    assert LOADED == ["_mlir_ciface_fb_static_neg_f32_f32_r1"]
    assert [r.kernel for r in session.table.lookup(key, ("f32", "f32"), "cpu-test")] == [row.kernel]
    assert list(session.table.lookup(key, ("f32", "f32"), "cpu")) == []
    cpu_row = ensure_static_kernel("neg", ["f32", "f32"], 1, session=session)
    assert cpu_row.kernel is not row.kernel  # each backend's own memo
    assert len(LOADED) == 1  # cpu loaded its own, not through cpu-test
    assert [r.kernel for r in session.table.lookup(key, ("f32", "f32"), "cpu-test")] == [row.kernel]
    assert [r.kernel for r in session.table.lookup(key, ("f32", "f32"), "cpu")] == [cpu_row.kernel]
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    ex = Executor(parse_module(NEG), backend="cpu-test", session=session, optimize=None)
    np.testing.assert_array_equal(ex(x), -x)
    assert "on 'cpu-test'" in ex.explain([x])


def test_the_jit_compiles_binds_and_runs_a_region_under_cpu_test_only() -> None:
    from fusebind.api.jit import default_optimizer

    session = Session("jit-cpu-test")
    LOADED.clear()
    ex = Executor(parse_module(CHAIN), backend="cpu-test", session=session,
                  optimize=default_optimizer("cpu-test", session))
    a = np.linspace(-1, 1, 64, dtype=np.float32)
    np.testing.assert_allclose(ex(a, a), np.exp(a * a), rtol=1e-6)
    np.testing.assert_allclose(ex(a, a), np.exp(a * a), rtol=1e-6)
    assert ex.stats.arms.fused_calls >= 1
    (fid,) = {k.fused_id for k, _, _, _ in session.table.rows() if k.is_runtime}
    assert fused_kernel_available(fid, "cpu-test", session=session)
    assert not fused_kernel_available(fid, "cpu", session=session)
    assert LOADED  # the region's kernel was linked by cpu-test
