"""Bugs 10 and 11: a kernel must fit the region it is bound for. Adoption
checks its signature (dtypes, ranks) and, when it knows them, the shapes it
was compiled for; `compile_one` declines a row whose ranks or shape caps do
not fit the region, so the region runs arm 0 instead of a wrong kernel."""

from __future__ import annotations

import numpy as np
import pytest

import fusebind as fb
from fusebind.dialect import parse_module
from fusebind.lowering import ObjectCache, decompose_region
from fusebind.runtime.bindings import BindingError, BindingKey, bindings_generation, global_bindings
from fusebind.runtime.fused_kernels import (
    CAP_SHAPE_DYNAMIC,
    adopt_runtime_fused,
    compiled_shapes_of,
    register_runtime_kernel,
    shape_cap,
    shape_cap_fits,
)
from fusebind.runtime.kernel import Kernel
from fusebind.runtime.resolve import KernelMiss, compile_one
from fusebind.runtime.testing import noop_kernel, simple_signature

pytestmark = pytest.mark.usefixtures("isolated_bindings")


def _region_module(shape: str, op: str = "mul") -> str:
    t = f"tensor<{shape}xf32>"
    return (f"func.func @main(%a: {t}, %b: {t}) -> {t} {{\n"
            f"  %r = fused.region @k (%a, %b) : ({t}, {t}) -> {t} {{\n"
            f"  ^bb0(%x: {t}, %y: {t}):\n"
            f"    %m = prim.{op} %x, %y : ({t}, {t}) -> {t}\n"
            f"    %s = prim.add %m, %x : ({t}, {t}) -> {t}\n"
            f"    fused.yield %s : {t}\n  }}\n  func.return %r : {t}\n}}\n")


def _chain(n: int) -> str:
    t = f"tensor<{n}xf32>"
    return (f"func.func @main(%a: {t}, %b: {t}) -> {t} {{\n"
            f"  %m = prim.mul %a, %b : ({t}, {t}) -> {t}\n"
            f"  %s = prim.add %m, %a : ({t}, {t}) -> {t}\n"
            f"  func.return %s : {t}\n}}\n")


def _region(shape: str, op: str = "mul"):
    return next(op_ for op_ in parse_module(_region_module(shape, op)).walk() if op_.name == "fused.region")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> ObjectCache:
    return ObjectCache(tmp_path_factory.mktemp("fit-cache"))


def _vectors(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    return rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)


# ------------------------------------------------------------------ the shape cap text


def test_shape_cap_fits_exact_dims_and_question_marks() -> None:
    assert shape_cap([(4, 8), (8,), ()]) == "shape=4x8,8,"
    assert shape_cap([(None, 8), (-1,)]) == "shape=?x8,?"
    assert shape_cap_fits("shape=4x8,8,", [(4, 8), (8,), ()])
    assert not shape_cap_fits("shape=4x8,8,", [(4, 8), (9,), ()])
    assert not shape_cap_fits("shape=4x8,8", [(4, 8), (8,), ()])  # one operand short
    assert not shape_cap_fits("shape=4x8", [(4, 8, 1)])  # another rank
    assert shape_cap_fits("shape=?x8", [(123, 8)]) and shape_cap_fits("shape=?x8", [(None, 8)])
    assert not shape_cap_fits("shape=4x8", [(None, 8)])  # a dynamic dim fits only a `?`
    assert shape_cap_fits("shape=", [()]) and not shape_cap_fits("split:axis0", [()])


# ------------------------------------------------------------------ bug 10: the signature


def test_a_kernel_of_other_ranks_is_refused_at_adoption_and_nothing_changes() -> None:
    region = _region("16")
    k = noop_kernel(simple_signature(("f32", "f32", "f32"), rank=2))
    before = bindings_generation()
    with pytest.raises(BindingError) as err:
        adopt_runtime_fused("k", region, k, ["f32"] * 3, "cpu")
    assert str(err.value) == (
        "adopt_runtime_fused('k'): the kernel test:noop_kernel with signature (memref<2d x f32>, memref<2d x f32>)"
        " -> (memref<2d x f32>) does not match the region: input #0 is 2-d f32 in the kernel but tensor<16xf32> "
        "(rank 1) in the region; adopt a kernel compiled from this region (decompose_region)")
    assert bindings_generation() == before and not list(global_bindings().rows())


def test_a_kernel_with_another_operand_count_is_refused() -> None:
    k = noop_kernel(simple_signature(("f32", "f32")))
    with pytest.raises(BindingError, match=r"it takes 1 inputs and 1 outputs, the region has 2 operands and 1 "
                                           r"results"):
        adopt_runtime_fused("k", _region("16"), k, ["f32"] * 3, "cpu")


def test_a_row_of_other_ranks_bound_without_adoption_is_a_miss_and_arm0_runs(cache) -> None:
    """register_runtime_kernel has no region to check against: compile_one
    declines the row, the region runs arm 0 (or a kernel the JIT compiles)."""
    region = _region("16")
    fid = adopt_runtime_fused("k", region, Kernel.from_decomposition(decompose_region(region, cache=cache)), ["f32"] * 3, "cpu")
    key = BindingKey.runtime_fused(fid)
    rank2 = noop_kernel(simple_signature(("f32", "f32", "f32"), rank=2))
    register_runtime_kernel(fid + 1, ["f32"] * 3, "cpu", rank2)
    with pytest.raises(KernelMiss, match=r"do not fit the region's ranks or shapes \[16, 16, 16\]"):
        compile_one(region, global_bindings(), "cpu", fused_id=fid + 1)
    assert compile_one(region, global_bindings(), "cpu", fused_id=fid).key == key


# ------------------------------------------------------------------ bug 11: the shapes


def test_kernel_from_decomposition_carries_the_compiled_shapes(cache) -> None:
    static = decompose_region(_region("8"), cache=cache)
    kernel = Kernel.from_decomposition(static)
    assert static.shapes == ((8,), (8,), (8,)) and compiled_shapes_of(kernel) == ((8,), (8,), (8,))
    assert kernel.compiled_shapes == ((8,), (8,), (8,))  # a field of Kernel, set by its constructor
    dynamic = decompose_region(_region("8"), cache=cache, dynamic=True)
    assert compiled_shapes_of(Kernel.from_decomposition(dynamic)) == ((None,), (None,), (None,))
    assert compiled_shapes_of(noop_kernel()) is None  # C / ctypes code knows no shapes
    assert noop_kernel().compiled_shapes is None
    assert not hasattr(static, "load")  # lowering makes object code; the runtime links it


def test_a_kernel_compiled_for_other_static_shapes_is_refused(cache) -> None:
    small = Kernel.from_decomposition(decompose_region(_region("1024"), cache=cache))
    with pytest.raises(BindingError) as err:
        adopt_runtime_fused("k", _region("4096"), small, ["f32"] * 3, "cpu")
    assert f"the kernel {small.source} was compiled for shapes [1024, 1024, 1024] but the region's are " \
           "[4096, 4096, 4096] (input #0 differs): it would read and write the wrong number of elements" \
           in str(err.value)
    assert not list(global_bindings().rows())


def test_adoption_caps_the_row_to_the_compiled_shapes(cache) -> None:
    region = _region("64")
    fid = adopt_runtime_fused("k", region, Kernel.from_decomposition(decompose_region(region, cache=cache)), ["f32"] * 3, "cpu")
    (row,) = global_bindings().lookup(BindingKey.runtime_fused(fid), ["f32"] * 3, "cpu")
    assert row.caps == {shape_cap([(64,)] * 3)}
    dyn = Kernel.from_decomposition(decompose_region(region, cache=cache, dynamic=True))
    dyn_fid = adopt_runtime_fused("k", _region("?"), dyn, ["f32"] * 3, "cpu")
    (row,) = global_bindings().lookup(BindingKey.runtime_fused(dyn_fid), ["f32"] * 3, "cpu")
    assert CAP_SHAPE_DYNAMIC in row.caps


def test_a_row_compiled_for_other_shapes_never_runs_for_a_region(cache) -> None:
    """A 1024-element kernel bound (without adoption's check) under the id of
    the 4096-element recipe: compile_one declines it, and the function returns
    the right values at every element."""
    small = Kernel.from_decomposition(decompose_region(_region("1024"), cache=cache))
    big = _region("4096")
    fid = adopt_runtime_fused("k", big, Kernel.from_decomposition(decompose_region(big, cache=cache)), ["f32"] * 3, "cpu")
    register_runtime_kernel(fid + 7, ["f32"] * 3, "cpu", small)
    (row,) = global_bindings().lookup(BindingKey.runtime_fused(fid + 7), ["f32"] * 3, "cpu")
    assert row.caps == {shape_cap([(1024,)] * 3)}
    with pytest.raises(KernelMiss, match=r"do not fit the region's ranks or shapes \[4096, 4096, 4096\]"):
        compile_one(big, global_bindings(), "cpu", fused_id=fid + 7)
    a, b = _vectors(4096)
    np.testing.assert_array_equal(fb.compile(_chain(4096))(a, b), a * b + a)


def test_a_c_kernel_without_shapes_is_trusted_by_ranks_only() -> None:
    """Documented: a kernel with no shape knowledge gets no shape cap (its dims
    are the binder's responsibility); the binder may name them with caps, and
    a row capped to other shapes is passed over even when registered first."""
    region = _region("16")
    capped = noop_kernel(simple_signature(("f32",) * 3))
    fid = adopt_runtime_fused("k", region, capped, ["f32"] * 3, "cpu", caps=(shape_cap([(8,)] * 3),))
    plain = noop_kernel(simple_signature(("f32",) * 3))
    assert adopt_runtime_fused("k", region, plain, ["f32"] * 3, "cpu") == fid
    first, second = global_bindings().lookup(BindingKey.runtime_fused(fid), ["f32"] * 3, "cpu")
    assert first.kernel is capped and second.kernel is plain and second.caps == frozenset()
    assert compile_one(region, global_bindings(), "cpu", fused_id=fid).row is second


def test_kernel_from_decomposition_reports_a_loader_failure_as_the_load_stage(cache) -> None:
    import dataclasses

    from fusebind.lowering import LoweringError
    from fusebind.runtime.loader import ObjectLoadError

    broken = dataclasses.replace(decompose_region(_region("8"), cache=cache), object_code=b"\x7fELF not an object")
    with pytest.raises(LoweringError, match="ObjectLoadError") as info:
        Kernel.from_decomposition(broken)
    assert info.value.stage == "load" and isinstance(info.value.__cause__, ObjectLoadError)
