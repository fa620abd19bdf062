"""Concurrency under load: processes sharing one object cache, and threads
mixing adoption, cache writes, kernel loads and lookups in one process.

Bounded runs: every thread is joined under a watchdog (a hang fails the test),
every result is checked against numpy, and the table and registry are checked
for lost or duplicated registrations afterwards. (helper-2's test_fused_kernels
covers adopt-only stress; this file mixes in compilation and the cache.)
Phase 2 adds executor calls racing with background adoption.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import expected, operands, region_of, region_text, run_kernel, run_threads, scaled
from fusebind.dialect import parse_module
from fusebind.lowering import ObjectCache, decompose_region
from fusebind.lowering.cache import _decode
from fusebind.runtime.kernel import Kernel

HERE = Path(__file__).resolve().parent

PROCESS_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from pathlib import Path
    from conftest import expected, operands, region_of, region_text, run_kernel
    from fusebind.dialect import parse_module
    from fusebind.lowering import ObjectCache, decompose_region
    from fusebind.runtime.kernel import Kernel
    cache = ObjectCache(Path(sys.argv[2]))
    me = int(sys.argv[3])
    jobs = json.loads(sys.argv[4])
    report = []
    for op, n in jobs:
        d = decompose_region(region_of(parse_module(region_text(n, op))), cache=cache)
        a, b = operands(n, seed=me)
        ok = bool((run_kernel(Kernel.from_decomposition(d), a, b, out_like=a) == expected(op, a, b)).all())
        report.append([op, n, d.from_cache, ok])
    print(json.dumps(report))
""")


def _spawn(cache_dir: Path, me: int, jobs: list[tuple[str, int]]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", PROCESS_SCRIPT, str(HERE), str(cache_dir), str(me), json.dumps(jobs)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_processes_share_one_cache_with_same_and_different_kernels(tmp_path: Path) -> None:
    procs_n = scaled(2, 4)  # (two racing writers per kernel already; each process is ~2 s of CPU)
    shared = [("mul", 64), ("add", 65)]
    rounds = scaled(1, 5)
    for r in range(rounds):
        jobs = {me: shared + [("sub", 100 + 10 * me + r), ("max", 200 + me)] for me in range(procs_n)}
        procs = [_spawn(tmp_path, me, jobs[me]) for me in range(procs_n)]
        for me, p in enumerate(procs):
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err[-2000:]
            report = json.loads(out)
            assert [tuple(x[:2]) for x in report] == jobs[me]
            assert all(ok for *_, ok in report), report
    distinct = {k for js in [shared] + [[("sub", 100 + 10 * me + r), ("max", 200 + me)] for me in range(procs_n)
                                        for r in range(rounds)] for k in js}
    entries = [p for p in tmp_path.iterdir() if not p.name.startswith("fusebind-repro")]
    # one object per distinct kernel, and beside each its pre-emission note (cache.py's NOTE_SUFFIX);
    # nothing else: no temp file or partial entry is left
    assert sorted(p.suffix for p in entries) == [".note"] * len(distinct) + [".o"] * len(distinct), \
        [p.name for p in entries]
    assert all(_decode(p.read_bytes()) is not None for p in entries)
    # A later process finds every kernel in the cache.
    p = _spawn(tmp_path, 9, sorted(distinct))
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-2000:]
    assert all(hit and ok for *_, hit, ok in json.loads(out))


def test_threads_mixing_compile_cache_adopt_and_lookup(tmp_path: Path, isolated_state: None) -> None:
    from fusebind.runtime import (KernelNotBound, adopt_runtime_fused, bindings_generation, fused_kernel_available,
                                  global_bindings, lookup_runtime_kernel)
    from fusebind.runtime.bindings import BindingKey

    cache = ObjectCache(tmp_path)
    sizes = [16 + i for i in range(scaled(4, 12))]
    ops = ["mul", "add"]
    compiled: dict[tuple[str, int], Any] = {}
    adopted: dict[tuple[str, int], int] = {}
    lock = threading.Lock()
    stop = threading.Event()
    bad: list[str] = []

    def compile_and_adopt(op: str, sizes_: list[int], worker: int) -> None:
        for n in sizes_:
            text = region_text(n, op)
            region = region_of(parse_module(text))
            d = decompose_region(region, cache=cache)
            kernel = Kernel.from_decomposition(d)
            a, b = operands(n, seed=worker)
            if not np.array_equal(run_kernel(kernel, a, b, out_like=a), expected(op, a, b)):
                bad.append(f"wrong values for {op} n={n} in worker {worker}")
            with lock:
                compiled.setdefault((op, n), kernel)
                kernel = compiled[(op, n)]
            fid = adopt_runtime_fused(f"{op}{n}-w{worker}", region, kernel, ["f32"] * 3, "cpu")
            again = adopt_runtime_fused(f"{op}{n}-again", region, kernel, ["f32"] * 3, "cpu")
            if fid != again:
                bad.append(f"re-adopting {op} n={n} gave id {again}, first {fid}")
            with lock:
                if adopted.setdefault((op, n), fid) != fid:
                    bad.append(f"{op} n={n} got two ids: {adopted[(op, n)]} and {fid}")

    def reader() -> None:
        last = -1
        while not stop.is_set():
            gen = bindings_generation()
            if gen < last:
                bad.append(f"generation went back from {last} to {gen}")
            last = gen
            with lock:
                known = dict(adopted)
            for (op, n), fid in known.items():
                if not fused_kernel_available(fid, "cpu"):
                    bad.append(f"id {fid} adopted but the gate says unavailable")
                try:
                    binding = lookup_runtime_kernel(fid, "cpu")
                except KernelNotBound:
                    bad.append(f"id {fid} adopted but lookup missed")
                    continue
                if [d.value for d in binding.dtypes] != ["f32"] * 3:
                    bad.append(f"id {fid} bound with dtypes {binding.dtypes}")

    half = len(sizes) // 2
    workers = [
        lambda: compile_and_adopt("mul", sizes, 0),
        lambda: compile_and_adopt("mul", list(reversed(sizes)), 1),  # same kernels, other order: dedup races
        lambda: compile_and_adopt("add", sizes[:half], 2),
        lambda: compile_and_adopt("add", sizes[half:], 3),
    ]
    readers = [threading.Thread(target=reader, daemon=True) for _ in range(2)]
    for t in readers:
        t.start()
    errors = run_threads(workers, timeout=240)
    stop.set()
    for t in readers:
        t.join(30)
        assert not t.is_alive(), "watchdog: a reader thread hung"
    assert not errors, errors
    assert not bad, bad[:10]
    want = {(op, n) for op in ops for n in sizes}
    assert set(adopted) == want
    assert len(set(adopted.values())) == len(want), "two recipes share an id"
    table = global_bindings()
    for (op, n), fid in adopted.items():
        rows = table.lookup(BindingKey.runtime_fused(fid), ["f32"] * 3, "cpu")
        assert [r.address for r in rows] == [compiled[(op, n)].address], f"{op} n={n}: rows {rows}"
    assert len(table) == len(want)
    assert sorted(p.suffix for p in tmp_path.glob("*.o")) == [".o"] * len(want)
