"""The runtime-fused facade: adopt, gate and lookup over the one binding table."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from fusebind.compiler import RUNTIME_FUSED_BASE as COMPILER_BASE
from fusebind.compiler import CostEstimate, cheaper, recipe_region_text
from fusebind.runtime import (
    RUNTIME_FUSED_BASE,
    UNKNOWN_COST,
    AmbiguousKernel,
    BindingError,
    BindingKey,
    BindingTable,
    DType,
    FusedLookupMiss,
    InvalidFusedOpId,
    KernelNotBound,
    UnknownBackendError,
    adopt_runtime_fused,
    bindings_generation,
    descriptor_for,
    extend_global_bindings,
    fused_kernel_available,
    fused_kernel_available_in,
    global_bindings,
    lookup_runtime_kernel,
    register_runtime_kernel,
)
from fusebind.runtime.testing import noop_kernel, reset_global_state, simple_signature
from fusebind.runtime.bindings import global_recipes

pytestmark = pytest.mark.usefixtures("isolated_bindings")

F32 = ("f32", "f32")
F64 = ("f64", "f64")


def region(body: str = "prim.exp", elem: str = "f32", n: int = 4, name: str = "e") -> str:
    t = f"tensor<{n}x{elem}>"
    return f"""
%r = fused.region @{name} (%a) : ({t}) -> {t} {{
^bb0(%x: {t}):
  %y = {body} %x : {t} -> {t}
  fused.yield %y : {t}
}}"""


def test_base_is_shared_with_the_compiler() -> None:
    assert RUNTIME_FUSED_BASE == COMPILER_BASE == 1 << 16


def test_adopt_binds_under_runtime_fused_and_opens_the_gate() -> None:
    def double(x_ptr, out_ptr):  # noqa: ANN001
        x, out = x_ptr.contents, out_ptr.contents
        for i in range(x.sizes[0]):
            out.aligned[i] = 2 * x.aligned[i]

    kernel = noop_kernel(body=double)
    before = global_bindings()
    fid = adopt_runtime_fused("exp", region(), kernel, F32, "cpu")
    assert fid == RUNTIME_FUSED_BASE
    assert not fused_kernel_available_in(before, fid, "cpu")  # the old snapshot is unchanged
    assert fused_kernel_available(fid, "cpu") and fused_kernel_available_in(global_bindings(), fid, "cpu")
    rows = global_bindings().lookup(BindingKey.runtime_fused(fid), F32, "cpu")
    assert [r.kernel for r in rows] == [kernel]
    binding = lookup_runtime_kernel(fid, "cpu")
    assert binding.kernel is kernel and binding.dtypes == (DType.F32, DType.F32)
    x, out = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    binding.kernel(descriptor_for(x), descriptor_for(out))
    np.testing.assert_array_equal(out, 2 * x)
    assert global_recipes().recipe_of(fid).name == "exp"


# 1. idempotence --------------------------------------------------------------------------


def test_adopt_is_idempotent_even_from_8_threads() -> None:
    kernel = noop_kernel()
    barrier = threading.Barrier(8)
    ids: list[int] = []
    errors: list[BaseException] = []
    gen0 = bindings_generation()

    def work(i: int) -> None:
        try:
            barrier.wait(10)
            # Different names and SSA names: same recipe.
            ids.append(adopt_runtime_fused(f"name{i}", region().replace("%x", f"%x{i}"), kernel, F32, "cpu"))
        except BaseException as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(ids) == 8 and set(ids) == {RUNTIME_FUSED_BASE}
    assert len(global_bindings()) == 1
    assert bindings_generation() == gen0 + 1
    table = global_bindings()
    assert adopt_runtime_fused("again", region(), kernel, F32, "cpu") == RUNTIME_FUSED_BASE
    assert global_bindings() is table and bindings_generation() == gen0 + 1


# 2. alternatives and new dtype keys --------------------------------------------------------


def test_other_kernel_is_an_alternative_and_other_dtypes_a_new_key() -> None:
    k1, k2 = noop_kernel(source="k1"), noop_kernel(source="k2")
    fid = adopt_runtime_fused("exp", region(), k1, F32, "cpu")
    assert adopt_runtime_fused("exp2", region(), k2, F32, "cpu") == fid
    key = BindingKey.runtime_fused(fid)
    assert [r.source for r in global_bindings().lookup(key, F32, "cpu")] == ["k1", "k2"]
    # A different dtype tuple under the same id (the f64 region has other math, so it is
    # registered directly against the id).
    k64 = noop_kernel(simple_signature(F64), source="k64")
    register_runtime_kernel(fid, F64, "cpu", k64)
    assert global_bindings().signatures(key, "cpu") == ((DType.F32, DType.F32), (DType.F64, DType.F64))
    assert [r.source for r in global_bindings().lookup(key, F64, "cpu")] == ["k64"]
    assert len(global_bindings()) == 3


def test_adopt_validates_arguments_with_clear_errors() -> None:
    with pytest.raises(UnknownBackendError, match="unknown backend 'tpu'"):
        adopt_runtime_fused("exp", region(), noop_kernel(), F32, "tpu")
    with pytest.raises(BindingError, match=r"dtypes \(f64, f64\) do not match the region's inputs then outputs \(f32, f32\)"):
        adopt_runtime_fused("exp", region(), noop_kernel(simple_signature(F64)), F64, "cpu")
    with pytest.raises(ValueError, match="unknown dtype 'float'"):
        adopt_runtime_fused("exp", region(), noop_kernel(), ("float", "f32"), "cpu")
    with pytest.raises(BindingError, match="expected a fusebind Kernel"):
        adopt_runtime_fused("exp", region(), object(), F32, "cpu")  # type: ignore[arg-type]
    with pytest.raises(InvalidFusedOpId, match=r"needs a runtime FusedOpId >= RUNTIME_FUSED_BASE \(65536\), got 5"):
        register_runtime_kernel(5, F32, "cpu", noop_kernel())
    assert len(global_bindings()) == 0


def test_adopt_accepts_the_region_op_and_a_module() -> None:
    from fusebind.compiler import as_region

    text = recipe_region_text("bias_relu", "f32", (2, 3))
    sig = simple_signature(("f32", "f32", "f32"))
    sig = type(sig)(inputs=(("f32", 2), ("f32", 1)), outputs=(("f32", 2),))
    fid = adopt_runtime_fused("bias_relu", text, noop_kernel(sig), ("f32", "f32", "f32"), "cpu")
    again = adopt_runtime_fused("other", as_region(text), noop_kernel(sig), [DType.F32] * 3, "cpu")
    assert fid == again and global_recipes().recipe_of(fid).name == "bias_relu"
    assert len(global_bindings().lookup(BindingKey.runtime_fused(fid), ("f32",) * 3, "cpu")) == 2


# 3. lookup misses ------------------------------------------------------------------------


def test_lookup_not_bound_one_and_ambiguous() -> None:
    fid = RUNTIME_FUSED_BASE + 7
    with pytest.raises(KernelNotBound) as miss:
        lookup_runtime_kernel(fid, "cpu")
    msg = str(miss.value)
    assert f"runtime fused op {fid}" in msg and "'cpu'" in msg and "Register one with adopt_runtime_fused" in msg
    assert miss.value.fused_id == fid and miss.value.backend == "cpu" and isinstance(miss.value, FusedLookupMiss)

    k32 = noop_kernel()
    register_runtime_kernel(fid, F32, "cpu", k32)
    binding = lookup_runtime_kernel(fid, "cpu")
    assert binding.kernel is k32 and binding.dtypes == (DType.F32, DType.F32) and binding.cost is UNKNOWN_COST

    register_runtime_kernel(fid, F64, "cpu", noop_kernel(simple_signature(F64)))
    with pytest.raises(AmbiguousKernel) as amb:
        lookup_runtime_kernel(fid, "cpu")
    assert amb.value.signatures == ((DType.F32, DType.F32), (DType.F64, DType.F64))
    msg = str(amb.value)
    assert f"runtime fused op {fid}" in msg and "'cpu'" in msg and "(f32, f32); (f64, f64)" in msg
    assert "Name the signature you want" in msg
    assert not isinstance(amb.value, KernelNotBound) and isinstance(amb.value, FusedLookupMiss)


# gate for static ids -----------------------------------------------------------------------


def test_gate_answers_for_static_catalog_ids_too() -> None:
    assert not fused_kernel_available(1, "cpu")
    extend_global_bindings(lambda b: b.bind(BindingKey.static("fused.softmax"), F32, "cpu", noop_kernel()))
    assert fused_kernel_available(1, "cpu")  # softmax
    assert not fused_kernel_available(2, "cpu")  # layernorm: nothing bound
    assert not fused_kernel_available(999, "cpu")  # not in the catalog
    assert not fused_kernel_available(0, "cpu")  # unassigned
    with pytest.raises(UnknownBackendError):
        fused_kernel_available(1, "gpuu")
    table = BindingTable.empty().with_row(BindingKey.static("fused.gelu"), F32, "cpu", noop_kernel())
    assert fused_kernel_available_in(table, 3, "cpu") and not fused_kernel_available_in(table, 1, "cpu")


# 5. raising writers through the facade ------------------------------------------------------


def test_failed_adopt_leaves_table_and_generation() -> None:
    k = noop_kernel()
    fid = adopt_runtime_fused("exp", region(), k, F32, "cpu")
    table, gen = global_bindings(), bindings_generation()
    with pytest.raises(BindingError):
        adopt_runtime_fused("exp", region(), noop_kernel(simple_signature(F64)), F32, "cpu")
    assert global_bindings() is table and bindings_generation() == gen
    assert fused_kernel_available(fid, "cpu")


# 6. cost ---------------------------------------------------------------------------------


def test_runtime_rows_start_unknown_and_never_win() -> None:
    fid = adopt_runtime_fused("exp", region(), noop_kernel(), F32, "cpu")
    row = global_bindings().lookup(BindingKey.runtime_fused(fid), F32, "cpu")[0]
    assert row.cost is UNKNOWN_COST
    real = CostEstimate(1e9, 1e9, 1e12, "composed")  # a very slow but priced arm
    assert not cheaper(row.cost, real) and cheaper(real, row.cost)
    assert row.cost != CostEstimate(0.0, 0.0, 0.0)
    composed = CostEstimate(4.0, 32.0, 500.0)
    fid2 = adopt_runtime_fused("log", region("prim.log"), noop_kernel(), F32, "cpu", cost=composed)
    assert lookup_runtime_kernel(fid2, "cpu").cost == composed


def test_reset_clears_rows_before_recipes_so_reused_ids_are_unbound() -> None:
    fid = adopt_runtime_fused("exp", region(), noop_kernel(), F32, "cpu")
    gen = bindings_generation()
    reset_global_state()
    assert bindings_generation() == gen + 1 and len(global_bindings()) == 0
    # The id is handed out again, to other math: it must not reach the old kernel.
    fid2 = adopt_runtime_fused("tanh", region("prim.tanh"), noop_kernel(source="new"), F32, "cpu")
    assert fid2 == fid
    assert [r.source for r in global_bindings().lookup(BindingKey.runtime_fused(fid), F32, "cpu")] == ["new"]


# 4. the concurrency stress test ------------------------------------------------------------

LONG = os.environ.get("FUSEBIND_LONG") == "1"


def test_readers_never_block_and_no_registration_is_lost() -> None:
    writers, per_writer, readers = (6, 40, 6) if LONG else (3, 8, 3)
    # Distinct math per adoption: the tensor length encodes (writer, index).
    work = [
        [(region(n=1000 * (w + 1) + i), noop_kernel(source=f"w{w}:{i}")) for i in range(per_writer)]
        for w in range(writers)
    ]
    statics = [[noop_kernel(source=f"s{w}:{i}") for i in range(per_writer)] for w in range(writers)]
    shared = (region("prim.tanh"), noop_kernel(source="shared"))
    gen0 = bindings_generation()
    stop = threading.Event()
    problems: list[str] = []
    reads = [0] * readers

    def reader(r: int) -> None:
        last_gen = -1
        try:
            while not stop.is_set():
                table = global_bindings()
                # Every swap in this test adds exactly one row: a torn snapshot breaks this.
                if len(table) != table.generation - gen0:
                    problems.append(f"snapshot gen {table.generation} holds {len(table)} rows")
                if table.generation < last_gen:
                    problems.append(f"generation went back from {last_gen} to {table.generation}")
                last_gen = table.generation
                for key in table.keys():
                    if not key.is_runtime:
                        continue
                    if not fused_kernel_available_in(table, key.fused_id, "cpu"):
                        problems.append(f"{key!r} listed but the gate says no")
                    if lookup_runtime_kernel(key.fused_id, "cpu", table=table).dtypes != (DType.F32, DType.F32):
                        problems.append(f"{key!r} resolved to the wrong dtypes")
                reads[r] += 1
        except BaseException as err:  # noqa: BLE001
            problems.append(f"reader {r} raised {err!r}")

    def slow_static_bind(w: int, i: int) -> None:
        # A writer that takes its time inside the critical section (sleep releases the
        # GIL): without the writer lock, a concurrent swap is then lost.
        def fn(builder):  # noqa: ANN001
            time.sleep(0.0005)
            builder.bind(BindingKey.static(f"op_w{w}_{i}"), F32, "cpu", statics[w][i])

        extend_global_bindings(fn)

    def writer(w: int) -> None:
        try:
            for i, (text, kernel) in enumerate(work[w]):
                adopt_runtime_fused(f"w{w}_{i}", text, kernel, F32, "cpu")
                slow_static_bind(w, i)
                if i % 4 == 0:
                    adopt_runtime_fused(f"shared{w}", shared[0], shared[1], F32, "cpu")
        except BaseException as err:  # noqa: BLE001
            problems.append(f"writer {w} raised {err!r}")

    reader_threads = [threading.Thread(target=reader, args=(r,), daemon=True) for r in range(readers)]
    writer_threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(writers)]
    for t in reader_threads + writer_threads:
        t.start()
    deadline = time.monotonic() + (600 if LONG else 120)  # watchdog, not a timing assertion
    for t in writer_threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stop.set()
    for t in reader_threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in reader_threads + writer_threads if t.is_alive()]
    assert not stuck, f"deadlock: threads still running at the watchdog deadline: {stuck}"
    assert not problems, problems[:5]
    adopted = writers * per_writer + 1
    expected_rows = adopted + writers * per_writer
    table = global_bindings()
    assert len(table) == expected_rows, f"lost registrations: {len(table)} rows, expected {expected_rows}"
    assert table.generation == gen0 + expected_rows
    ids = sorted(k.fused_id for k in table.keys() if k.is_runtime)
    assert ids == list(range(RUNTIME_FUSED_BASE, RUNTIME_FUSED_BASE + adopted))
    assert all(n > 0 for n in reads), "a reader never completed a read while writers ran"


def test_the_same_object_code_loaded_twice_is_one_row_not_an_alternative(tmp_path) -> None:
    """Two JIT compilers racing on one recipe load the same object code twice: two function
    pointers, one kernel. The second adoption changes nothing (the concurrency stress test saw
    'duplicated rows: 13 rows for 12 keys' about once in 50 runs before)."""
    from fusebind.dialect import parse_module
    from fusebind.lowering import ObjectCache, decompose_region
    from fusebind.runtime.kernel import Kernel

    text = region()
    module = parse_module("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {" + text
                          + "\n  func.return %r : tensor<4xf32>\n}")
    op = next(o for o in module.walk() if o.name == "fused.region")
    decomp = decompose_region(op, ["f32", "f32"], cache=ObjectCache(tmp_path))
    first, second = Kernel.from_decomposition(decomp), Kernel.from_decomposition(decomp)
    assert first.address != second.address and first.source == second.source
    fid = adopt_runtime_fused("e", text, first, F32, "cpu", cost=decomp.cost)
    gen = bindings_generation()
    assert adopt_runtime_fused("e", text, second, F32, "cpu", cost=decomp.cost) == fid
    assert bindings_generation() == gen
    rows = global_bindings().lookup(BindingKey.runtime_fused(fid), F32, "cpu")
    assert [r.address for r in rows] == [first.address]
    # a user kernel with its own code is still an alternative row
    adopt_runtime_fused("e", text, noop_kernel(), F32, "cpu")
    assert len(global_bindings().lookup(BindingKey.runtime_fused(fid), F32, "cpu")) == 2
