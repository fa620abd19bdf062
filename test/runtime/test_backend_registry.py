"""The backend registry: `cpu` first, the table's backend names come from it, unknown names are clear errors."""

from __future__ import annotations

import pytest

from fusebind.compiler.context import DEFAULT_BACKEND
from fusebind.lowering.backend import CPU, Backend, UnknownBackendError, backend_named, backend_names, register_backend
from fusebind.lowering.build import target_key_parts
from fusebind.runtime.bindings import BindingKey, UnknownBackendError as UnknownTableBackend, parse_backend
from fusebind.runtime.session import Session
from fusebind.runtime.testing import noop_kernel


def test_cpu_is_the_first_and_default_backend() -> None:
    from fusebind.runtime.backend import CPU as RUNTIME_CPU

    assert backend_names()[0] == DEFAULT_BACKEND == CPU.name == "cpu"
    # the runtime extended lowering's cpu: one object, with the same lowering facts
    assert backend_named("cpu") is RUNTIME_CPU and isinstance(RUNTIME_CPU, type(CPU))
    assert register_backend(RUNTIME_CPU) is RUNTIME_CPU  # again: a no-op
    assert RUNTIME_CPU.target_key_parts() == CPU.target_key_parts()
    assert target_key_parts()["backend"] == "cpu" and target_key_parts() == CPU.target_key_parts()


def test_unknown_backends_are_refused_by_name() -> None:
    with pytest.raises(UnknownBackendError, match=r"unknown backend 'gpu': expected one of cpu"):
        backend_named("gpu")
    with pytest.raises(UnknownTableBackend, match=r"unknown backend 'gpu': expected one of cpu"):
        parse_backend("gpu")
    table = Session().table
    with pytest.raises(UnknownTableBackend, match="unknown backend 'gpu'"):
        table.with_row(BindingKey.static("exp"), ("f32", "f32"), "gpu", noop_kernel())
    assert len(table.with_row(BindingKey.static("exp"), ("f32", "f32"), "cpu", noop_kernel())) == 1


def test_a_second_backend_under_a_taken_name_is_refused() -> None:
    with pytest.raises(ValueError, match="a backend named 'cpu' is registered already"):
        register_backend(Backend("cpu"))
    assert backend_named("cpu").name == "cpu" and type(backend_named("cpu")) is not Backend
