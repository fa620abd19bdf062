"""The binding table: keys, dtypes, kernels, rows, snapshots and the global swap."""

from __future__ import annotations

import ctypes
import ctypes.util
import threading

import numpy as np
import pytest

from fusebind.compiler.cost import UNKNOWN_COST, CostEstimate
from fusebind.runtime import (
    BindingError,
    BindingKey,
    BindingTable,
    DType,
    DuplicateKernelError,
    Kernel,
    KernelError,
    KernelSignature,
    UnknownBackendError,
    bindings_generation,
    descriptor_for,
    extend_global_bindings,
    global_bindings,
)
from fusebind.runtime.testing import noop_kernel, simple_signature

F32_UNARY = simple_signature(("f32", "f32"))


# ----------------------------------------------------------------------------- DType


@pytest.mark.parametrize(
    "name, np_dtype, ctype",
    [
        ("f32", np.float32, ctypes.c_float),
        ("f64", np.float64, ctypes.c_double),
        ("i32", np.int32, ctypes.c_int32),
        ("i64", np.int64, ctypes.c_int64),
        ("i1", np.bool_, ctypes.c_bool),
    ],
)
def test_dtype_maps_to_numpy_mlir_and_ctypes(name: str, np_dtype: type, ctype: type) -> None:
    d = DType.parse(name)
    assert d.mlir == name
    assert d.numpy == np.dtype(np_dtype)
    assert d.ctype is ctype
    assert DType.from_numpy(np.dtype(np_dtype)) is d
    assert DType.parse(d) is d


def test_dtype_rejects_unknown_names_and_numpy_types() -> None:
    with pytest.raises(ValueError, match=r"unknown dtype 'f8': expected one of f32, f64, i32, i64, i1, f16, bf16, "):
        DType.parse("f8")
    with pytest.raises(ValueError, match=r"numpy dtype complex64 has no fusebind DType"):
        DType.from_numpy(np.complex64)


def test_kernel_signature_dtypes_are_inputs_then_outputs() -> None:
    sig = KernelSignature(inputs=(("f32", 2), (DType.I64, 1)), outputs=(("f64", 2),))
    assert sig.dtypes == (DType.F32, DType.I64, DType.F64)
    assert str(sig) == "(memref<2d x f32>, memref<1d x i64>) -> (memref<2d x f64>)"
    with pytest.raises(ValueError, match="at least one output"):
        KernelSignature(inputs=(("f32", 1),), outputs=())
    with pytest.raises(ValueError, match="rank must be an int >= 0"):
        KernelSignature(inputs=(("f32", -1),), outputs=(("f32", 1),))


def test_descriptor_for_views_array_with_element_strides() -> None:
    a = np.zeros((3, 4), np.float32)[:, ::2]
    d = descriptor_for(a)
    assert list(d.sizes) == [3, 2]
    assert list(d.strides) == [4, 2]
    assert ctypes.cast(d.aligned, ctypes.c_void_p).value == a.ctypes.data


# ----------------------------------------------------------------------------- BindingKey


def test_binding_key_is_hashable_frozen_and_readable() -> None:
    a, b = BindingKey.static("add"), BindingKey.static("add")
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert repr(a) == "Static(add)"
    r = BindingKey.runtime_fused(65536)
    assert repr(r) == "RuntimeFused(65536)" and r.is_runtime and not a.is_runtime
    assert r != BindingKey.static("65536")
    with pytest.raises(AttributeError):
        a.op = "mul"  # type: ignore[misc]
    with pytest.raises(BindingError, match="positive FusedOpId"):
        BindingKey.runtime_fused(0)


# ----------------------------------------------------------------------------- Kernel


def test_kernel_from_ctypes_runs_and_records_caller_source() -> None:
    def body(x_ptr, out_ptr):  # noqa: ANN001
        x, out = x_ptr.contents, out_ptr.contents
        for i in range(x.sizes[0]):
            out.aligned[i] = x.aligned[i] * 2.0

    cfunc = F32_UNARY.cfunctype()(body)
    kernel = Kernel.from_ctypes(cfunc, signature=F32_UNARY)
    assert kernel.source.startswith("user:test_bindings.py:")
    assert kernel.address == ctypes.cast(cfunc, ctypes.c_void_p).value
    x = np.arange(4, dtype=np.float32)
    out = np.zeros(4, np.float32)
    kernel(descriptor_for(x), descriptor_for(out))
    np.testing.assert_array_equal(out, x * 2)


def test_kernel_rejects_non_functions_and_bad_signatures() -> None:
    with pytest.raises(KernelError, match="expected a ctypes function pointer"):
        Kernel.from_ctypes(42, signature=F32_UNARY)
    with pytest.raises(KernelError, match="signature must be a KernelSignature"):
        Kernel.from_ctypes(noop_kernel().keepalive, signature=("f32",))  # type: ignore[arg-type]


def test_kernel_from_library_missing_symbol_names_it(tmp_path) -> None:  # noqa: ANN001
    libc = ctypes.util.find_library("c")
    if libc is None:
        pytest.skip("no libc found by ctypes.util.find_library")
    with pytest.raises(KernelError, match="has no symbol 'fusebind_nope'"):
        Kernel.from_library(libc, "fusebind_nope", signature=F32_UNARY)
    with pytest.raises(KernelError, match="cannot load shared library"):
        Kernel.from_library(tmp_path / "missing.so", "f", signature=F32_UNARY)


# ----------------------------------------------------------------------------- Python-callback kernels


def _doubler(fail_when: float | None = None):  # noqa: ANN202
    def body(x_ptr, out_ptr):  # noqa: ANN001
        x, out = x_ptr.contents, out_ptr.contents
        if fail_when is not None and x.aligned[0] == fail_when:
            raise ValueError(f"kernel failed on {fail_when}")
        for i in range(x.sizes[0]):
            out.aligned[i] = x.aligned[i] * 2.0
    return body


def _run(kernel: Kernel, x: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    kernel(descriptor_for(x), descriptor_for(out))
    return out


def test_from_python_runs_and_flags_itself() -> None:
    kernel = Kernel.from_python(_doubler(), signature=F32_UNARY)
    assert kernel.python_callback and kernel.source.startswith("user:test_bindings.py:")
    np.testing.assert_array_equal(_run(kernel, np.arange(4, dtype=np.float32)), np.arange(4) * 2)
    with pytest.raises(KernelError, match="Kernel.from_python needs a callable, got 3"):
        Kernel.from_python(3, signature=F32_UNARY)  # type: ignore[arg-type]


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")  # nothing swallowed by ctypes
@pytest.mark.parametrize("make", ["from_python", "from_ctypes"])
def test_a_raising_python_kernel_raises_kernel_error_from_the_original(make: str) -> None:
    body = _doubler(fail_when=1.0)
    if make == "from_python":
        kernel = Kernel.from_python(body, signature=F32_UNARY, source="user:k")
    else:
        kernel = Kernel.from_ctypes(F32_UNARY.cfunctype()(body), signature=F32_UNARY, source="user:k")
    assert kernel.python_callback
    with pytest.raises(KernelError, match=r"^kernel user:k raised ValueError: kernel failed on 1.0; its outputs") as info:
        _run(kernel, np.ones(4, np.float32))
    assert isinstance(info.value.__cause__, ValueError)
    # the error was consumed: the next call of the same kernel succeeds
    np.testing.assert_array_equal(_run(kernel, np.full(4, 3, np.float32)), np.full(4, 6))


def test_from_ctypes_keeps_the_callers_argument_conversions_and_pointer() -> None:
    seen: list[object] = []
    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)  # raw addresses, not descriptor pointers
    cfunc = proto(lambda a, b: seen.append((type(a), type(b))))
    kernel = Kernel.from_ctypes(cfunc, signature=F32_UNARY)
    assert kernel.python_callback and kernel.address == ctypes.cast(cfunc, ctypes.c_void_p).value
    _run(kernel, np.ones(2, np.float32))
    assert seen == [(int, int)]


def test_c_code_is_not_a_python_callback() -> None:
    libc = ctypes.util.find_library("c")
    if libc is None:
        pytest.skip("no libc found by ctypes.util.find_library")
    symbol = ctypes.CDLL(libc).abs
    assert not Kernel.from_ctypes(symbol, signature=F32_UNARY).python_callback
    address = ctypes.cast(symbol, ctypes.c_void_p).value
    assert not Kernel.from_ctypes(F32_UNARY.cfunctype()(address), signature=F32_UNARY).python_callback


def test_keyboard_interrupt_in_a_python_kernel_propagates_as_itself() -> None:
    def body(*_: object) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(Kernel.from_python(body, signature=F32_UNARY), np.ones(2, np.float32))


def test_python_kernel_errors_are_per_thread() -> None:
    kernel = Kernel.from_python(_doubler(fail_when=1.0), signature=F32_UNARY)
    barrier = threading.Barrier(8)
    outcomes: dict[int, str] = {}

    def work(i: int) -> None:
        barrier.wait()
        for _ in range(50):
            x = np.full(8, float(i % 2), np.float32)  # odd threads fail, even ones succeed
            try:
                out = _run(kernel, x)
                outcome = "ok" if np.array_equal(out, x * 2) else "wrong"
            except KernelError:
                outcome = "error"
            if outcomes.setdefault(i, outcome) != outcome:
                outcomes[i] = "mixed"

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes == {i: "error" if i % 2 else "ok" for i in range(8)}


def _fused_text(n: int) -> str:
    t = f"tensor<{n}xf32>"
    return (f"func.func @f(%a: {t}) -> {t} {{\n  %r = fused.region @dbl (%a) : ({t}) -> {t} {{\n"
            f"  ^bb0(%x: {t}):\n    %y = prim.add %x, %x : ({t}, {t}) -> {t}\n    fused.yield %y : {t}\n  }}\n"
            f"  func.return %r : {t}\n}}\n")


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_the_executor_calls_python_kernels_through_the_guard() -> None:
    import fusebind as fb
    from fusebind.dialect import parse_module
    from fusebind.runtime.fused_kernels import adopt_runtime_fused
    from fusebind.runtime.testing import isolated_global_state

    with isolated_global_state():
        region = next(op for op in parse_module(_fused_text(4)).walk() if op.name == "fused.region")
        cheap = CostEstimate(flops=0, bytes=1, ns=1e-3, trust="measured")
        adopt_runtime_fused("dbl", region, Kernel.from_python(_doubler(fail_when=1.0), signature=F32_UNARY),
                            ("f32", "f32"), "cpu", cost=cheap)
        f = fb.compile(_fused_text(4), optimize=None)
        x = np.arange(2, 6, dtype=np.float32)
        (decision,) = f.executor.plan_for([x]).decisions
        assert decision.arm == "fused" and f.executor.plan_for([x]).fast is None
        np.testing.assert_array_equal(f(x), x * 2)
        with pytest.raises(KernelError, match="kernel failed on 1.0"):
            f(np.ones(4, np.float32))


# ----------------------------------------------------------------------------- BindingTable


def test_table_lookup_keeps_registration_order_and_lists_neighbours() -> None:
    k1, k2 = noop_kernel(source="a"), noop_kernel(source="b")
    k64 = noop_kernel(simple_signature(("f64", "f64")), source="c")
    key = BindingKey.static("exp")
    t0 = BindingTable.empty()
    t1 = t0.with_row(key, ("f32", "f32"), "cpu", k1)
    t2 = t1.with_row(key, [DType.F32, DType.F32], "cpu", k2).with_row(key, ("f64", "f64"), "cpu", k64)
    assert len(t0) == 0 and len(t1) == 1 and len(t2) == 3  # snapshots are immutable
    rows = t2.lookup(key, ("f32", "f32"), "cpu")
    assert [r.source for r in rows] == ["a", "b"]
    assert t2.signatures(key, "cpu") == ((DType.F32, DType.F32), (DType.F64, DType.F64))
    assert t2.bindings_of(key) == (((DType.F32, DType.F32), "cpu"), ((DType.F64, DType.F64), "cpu"))
    assert t2.lookup(key, ("i32", "i32"), "cpu") == ()
    assert t2.describe_nearby(key, "cpu") == "bound for Static(exp): (f32, f32) on 'cpu', (f64, f64) on 'cpu'"
    assert t2.describe_nearby(BindingKey.static("log"), "cpu") == "nothing is bound for Static(log) on any backend"


def test_row_fields_default_to_unknown_cost_and_have_a_revision() -> None:
    row = BindingTable.empty().with_row(BindingKey.static("exp"), ("f32", "f32"), "cpu", noop_kernel(source="s")).lookup(
        BindingKey.static("exp"), ("f32", "f32"), "cpu"
    )[0]
    assert row.cost is UNKNOWN_COST
    assert row.caps == frozenset() and row.precision == "native" and row.source == "s"
    assert len(row.revision) == 16 and int(row.revision, 16) >= 0
    other = BindingTable.empty().with_row(BindingKey.static("log"), ("f32", "f32"), "cpu", noop_kernel(source="s"))
    assert other.lookup(BindingKey.static("log"), ("f32", "f32"), "cpu")[0].revision != row.revision


def test_same_function_pointer_twice_under_one_key_is_refused_naming_the_first() -> None:
    k = noop_kernel(source="user:first.py:1")
    key = BindingKey.static("exp")
    t = BindingTable.empty().with_row(key, ("f32", "f32"), "cpu", k)
    again = Kernel.from_ctypes(k.keepalive, signature=F32_UNARY, source="user:second.py:2")
    with pytest.raises(DuplicateKernelError, match=r"already bound under Static\(exp\) \(f32, f32\) on 'cpu' by user:first.py:1"):
        t.with_row(key, ("f32", "f32"), "cpu", again)
    # Under another key the same pointer is fine.
    assert len(t.with_row(BindingKey.static("log"), ("f32", "f32"), "cpu", again)) == 2


def test_bind_validates_backend_and_dtypes_against_signature() -> None:
    key = BindingKey.static("exp")
    with pytest.raises(UnknownBackendError, match=r"unknown backend 'gpu': expected one of cpu"):
        BindingTable.empty().with_row(key, ("f32", "f32"), "gpu", noop_kernel())
    with pytest.raises(BindingError, match=r"differ from the binding dtypes \(f64, f64\)"):
        BindingTable.empty().with_row(key, ("f64", "f64"), "cpu", noop_kernel())
    with pytest.raises(TypeError, match="must be a sequence"):
        BindingTable.empty().with_row(key, "f32", "cpu", noop_kernel())


# ----------------------------------------------------------------------------- global table


def test_extend_global_bindings_swaps_and_bumps_generation(isolated_bindings) -> None:  # noqa: ANN001
    before = global_bindings()
    gen = bindings_generation()
    k = noop_kernel()
    key = BindingKey.static("exp")
    row = extend_global_bindings(lambda b: b.bind(key, ("f32", "f32"), "cpu", k))
    after = global_bindings()
    assert after is not before and len(before) == 0 and len(after) == 1
    assert after.lookup(key, ("f32", "f32"), "cpu") == (row,)
    assert bindings_generation() == gen + 1 == after.generation


def test_raising_writer_keeps_old_table_and_generation(isolated_bindings) -> None:  # noqa: ANN001
    key = BindingKey.static("exp")
    extend_global_bindings(lambda b: b.bind(key, ("f32", "f32"), "cpu", noop_kernel()))
    before, gen = global_bindings(), bindings_generation()

    def bad(b):  # noqa: ANN001
        b.bind(key, ("f32", "f32"), "cpu", noop_kernel())
        raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError, match="writer failed"):
        extend_global_bindings(bad)
    assert global_bindings() is before and bindings_generation() == gen
    # A refused duplicate also leaves everything as it was.
    k = before.lookup(key, ("f32", "f32"), "cpu")[0].kernel
    with pytest.raises(DuplicateKernelError):
        extend_global_bindings(lambda b: b.bind(key, ("f32", "f32"), "cpu", k))
    assert global_bindings() is before and bindings_generation() == gen
    # A writer that changes nothing swaps nothing.
    assert extend_global_bindings(lambda b: "no change") == "no change"
    assert global_bindings() is before and bindings_generation() == gen
    # Every successful swap bumps exactly once.
    for i in range(3):
        extend_global_bindings(lambda b: b.bind(BindingKey.static(f"op{i}"), ("f32", "f32"), "cpu", noop_kernel()))
        assert bindings_generation() == gen + i + 1


def test_nested_extend_is_refused_not_deadlocked(isolated_bindings) -> None:  # noqa: ANN001
    result: list[BaseException] = []

    def nested(b):  # noqa: ANN001
        extend_global_bindings(lambda inner: None)

    def run() -> None:
        try:
            extend_global_bindings(nested)
        except BaseException as err:  # noqa: BLE001
            result.append(err)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "nested extend_global_bindings deadlocked"
    assert isinstance(result[0], BindingError) and "inside a writer fn" in str(result[0])


def test_global_bindings_takes_no_lock_while_a_writer_holds_it(isolated_bindings) -> None:  # noqa: ANN001
    inside, release = threading.Event(), threading.Event()

    def slow(b):  # noqa: ANN001
        b.bind(BindingKey.static("exp"), ("f32", "f32"), "cpu", noop_kernel())
        inside.set()
        release.wait(10)

    writer = threading.Thread(target=extend_global_bindings, args=(slow,), daemon=True)
    writer.start()
    assert inside.wait(10)
    seen: list[int] = []
    reader = threading.Thread(target=lambda: seen.append(len(global_bindings())), daemon=True)
    reader.start()
    reader.join(5)
    finished_while_writer_held_lock = not reader.is_alive()
    release.set()
    writer.join(10)
    assert finished_while_writer_held_lock and seen == [0]
    assert len(global_bindings()) == 1


def test_cost_estimates_are_stored_on_rows() -> None:
    cost = CostEstimate(10.0, 80.0, 5.0, "declared")
    t = BindingTable.empty().with_row(BindingKey.static("exp"), ("f32", "f32"), "cpu", noop_kernel(), cost=cost)
    assert t.lookup(BindingKey.static("exp"), ("f32", "f32"), "cpu")[0].cost == cost
    with pytest.raises(BindingError, match="cost must be a CostEstimate or UNKNOWN_COST"):
        t.with_row(BindingKey.static("exp"), ("f32", "f32"), "cpu", noop_kernel(), cost=0)


def test_isolated_global_state_empties_then_restores_rows_and_recipes() -> None:
    from fusebind.runtime import global_recipes
    from fusebind.runtime.testing import isolated_global_state

    key = BindingKey.static("restore_me")
    with isolated_global_state():
        extend_global_bindings(lambda b: b.bind(key, ("f32", "f32"), "cpu", noop_kernel()))
        recipes_before = global_recipes().snapshot()
        outer = global_bindings()
        with isolated_global_state():
            assert len(global_bindings()) == 0 and len(global_recipes()) == 0
            extend_global_bindings(lambda b: b.bind(BindingKey.static("inner"), ("f32", "f32"), "cpu", noop_kernel()))
        restored = global_bindings()
        assert [k for k in restored.keys()] == [key]
        assert restored.lookup(key, ("f32", "f32"), "cpu") == outer.lookup(key, ("f32", "f32"), "cpu")
        assert restored.generation > outer.generation  # a restore is a swap too
        assert global_recipes().snapshot() == recipes_before
