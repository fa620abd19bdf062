"""KernelCall's split on the native pool (split_call.py): the prepared-descriptor path (static
elementwise kernels with broadcast operands) runs its chunks as one parallel-for, not on Python
threads, with values independent of the thread count and ABI v2 statuses per chunk."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from fusebind.dialect.errors import IndexOutOfBounds
from fusebind.runtime.call import SPLIT_THRESHOLD, KernelCall, split_tasks
from fusebind.runtime.kernel import Kernel
from fusebind.runtime.pool import NativePool, native_pool_available, pool_for
from fusebind.runtime.split_call import NativeSplit

pytestmark = pytest.mark.skipif(not native_pool_available(), reason="no native pool on this platform")

ROWS = 2 * SPLIT_THRESHOLD // 8 + 3  # 16,387 rows: 131,096 elements, 5 chunks, the last ones uneven


@pytest.fixture(scope="module")
def fma() -> Kernel:
    """The static kernel of prim.add on rank 2 (dynamic dims, strided operands: a broadcast
    operand is described with a stride-0 axis 0)."""
    from fusebind.runtime.static_kernels import StaticRequest, default_static_kernels

    return default_static_kernels().kernel_for(StaticRequest.of("add", ["f32", "f32", "f32"], 2))


A = np.random.default_rng(5).standard_normal((ROWS, 8)).astype(np.float32)
ROW = np.random.default_rng(6).standard_normal((1, 8)).astype(np.float32)  # broadcast along axis 0


@pytest.mark.parametrize("threads", [2, 4, 8])
def test_a_broadcast_call_runs_as_one_parallel_for_bitwise_equal_to_one_thread(fma, threads) -> None:
    one = KernelCall(fma, [A.shape, ROW.shape], [A.shape], broadcast_inputs_to=A.shape)
    want = np.empty_like(A)
    one([A, ROW, want])
    np.testing.assert_array_equal(want, A + ROW)
    pool = NativePool(threads)
    try:
        call = KernelCall(fma, [A.shape, ROW.shape], [A.shape], broadcast_inputs_to=A.shape, splittable=True,
                          threads=threads, pool=lambda t: pool)
        assert isinstance(call._native, NativeSplit) and call.chunks == 1
        assert call._native.chunks == split_tasks(A.size, ROWS) == 5 and call.splits == min(threads, 5)
        for _ in range(3):  # the descriptors are patched per call: new arrays each time
            a, row = A.copy(), ROW.copy()
            got = np.full_like(A, np.nan)
            call([a, row, got])
            np.testing.assert_array_equal(got, want)
    finally:
        pool.close()


def test_below_the_threshold_or_one_thread_it_does_not_split(fma) -> None:
    small = (SPLIT_THRESHOLD // 8 - 1, 8)
    for shape, threads in ((small, 2), (A.shape, 1)):
        call = KernelCall(fma, [shape, (1, 8)], [shape], broadcast_inputs_to=shape, splittable=True, threads=threads,
                          pool=pool_for)
        assert call._native is None and call.chunks == 1 and call.splits == 1


def _take_module():
    path = Path(__file__).parents[1] / "lowering" / "test_error_channel.py"
    spec = importlib.util.spec_from_file_location("fb_test_error_channel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_an_abi_v2_kernel_gets_a_status_per_chunk_and_the_first_bad_index_raises() -> None:
    chan = _take_module()
    text, em = chan.take_kernel_text(chan.N)  # (as its `take` fixture builds it)
    emitted = chan.CheckedKernel(text, "fb_test_take", (chan.TensorSpec("f32", (None, chan.N)),
                                 chan.TensorSpec("i64", (None,))), (chan.TensorSpec("f32", (None,)),), False,
                                 tuple(em.checks), tuple(em.check_sources))
    built = chan.build_object(emitted)
    take = Kernel.from_decomposition(chan.Decomposition(None, built.object_code, built.symbol,
                                                        chan.kernel_signature(emitted.inputs, emitted.outputs),
                                                        emitted))
    m = 600_000
    call = KernelCall(take, [(m, chan.N), (m,)], [(m,)], splittable=True, threads=2, pool=pool_for)
    assert isinstance(call._native, NativeSplit) and call._native.chunks == split_tasks(m, m) == 19
    x, idx = chan.rows(m), np.arange(m, dtype=np.int64) % chan.N
    out = np.empty(m, np.float32)
    call([x, idx, out])
    np.testing.assert_array_equal(out, chan.along(x, idx))
    for pairs, first in ([((500_000, 8), (10, 6)), 6], [((299_999, -6), (300_000, 7)), -6]):
        with pytest.raises(IndexOutOfBounds, match=chan.MESSAGE.format(i=first)):
            call([x, chan.bad(*pairs, n=m), out])
