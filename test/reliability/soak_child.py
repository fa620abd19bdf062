"""The soak of test_soak.py, run in a fresh interpreter (so the suite's own state does not
count in its RSS): `python soak_child.py <mode>:<shapes>:<calls>:<budget> ...` prints one
JSON line of figures per soak (run one after another, each with its own jitted function). Every result is checked against numpy here (a mismatch exits non-zero).

mode: static (`fb.jit(dynamic=False)`: a trace and a kernel per shape), auto
(`dynamic=None`) or dynamic (`dynamic=True`). The first `shapes` calls visit every shape
once; the rest pick shapes at random (seeded), so evicted kernels come back (from the
object cache in FUSEBIND_CACHE_DIR, which the caller makes fresh).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time

import numpy as np

#: recipes kept beyond the bound ones (session.RECIPES_UNBOUND); the short slice makes it
#: small so that its few shapes exercise the trimming too
RECIPES_UNBOUND = int(os.environ.get("SOAK_RECIPES_UNBOUND", "0")) or None


def rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def shape_list(n: int) -> list[tuple[int, int]]:
    """`n` distinct 2-d shapes, every dim >= 2 (so the dynamic traces cover them all)."""
    return [(2 + i % 17, 3 + i // 17) for i in range(n)]


def main(mode: str, n_shapes: int, n_calls: int, budget: int) -> dict:
    import fusebind as fb
    from fusebind.runtime import budget as budget_mod
    from fusebind.runtime.bindings import BindingKey
    from fusebind.runtime.loader import loaded_code_stats
    from fusebind.runtime import session as session_mod
    from fusebind.runtime.session import default_session

    if RECIPES_UNBOUND is not None:
        session_mod.RECIPES_UNBOUND = RECIPES_UNBOUND

    budget_mod.set_kernel_budget(budget)
    session = default_session()
    # figures are this soak's own: counters as deltas from here (earlier soaks of this process
    # leave their kernels bound until evicted; the bounded counts below are totals)
    evictions0, code0 = session.budget_state.evictions, loaded_code_stats()
    dynamic = {"static": False, "auto": None, "dynamic": True}[mode]

    def soaked(a, b, c):
        return np.maximum(a * b + c, 0.0)

    f = fb.jit(soaked, dynamic=dynamic)

    shapes = shape_list(n_shapes)
    rng = np.random.default_rng(0)
    figures: dict = {"mode": mode, "shapes": n_shapes, "calls": n_calls, "budget": budget}
    rss: list[tuple[int, int]] = []
    t0 = time.perf_counter()
    loads0 = 0
    for k in range(n_calls):
        shape = shapes[k] if k < n_shapes else shapes[int(rng.integers(n_shapes))]
        a = rng.standard_normal(shape).astype(np.float32)
        b = rng.standard_normal(shape).astype(np.float32)
        c = rng.standard_normal(shape).astype(np.float32)
        got = f(a, b, c)
        want = np.maximum(a * b + c, np.float32(0))
        if got.dtype != want.dtype or got.shape != want.shape or not np.allclose(got, want, rtol=1e-6, atol=1e-6):
            print(f"wrong answer at call {k}, shape {shape}", file=sys.stderr)
            sys.exit(3)
        if k in (min(8, n_calls - 1), n_shapes - 1) or k == n_calls - 1:
            gc.collect()
            rss.append((k, rss_kib()))
            if k == n_shapes - 1:
                loads0 = loaded_code_stats().loaded
    seconds = time.perf_counter() - t0
    gc.collect()
    table = session.table
    runtime_rows = [(key, row) for key, _d, _b, row in table.rows() if key.is_runtime]
    bound_ids = {key.fused_id for key, _row in runtime_rows}
    evicted = sorted(session.budget_state.evicted_ids)
    stats = budget_mod.kernel_budget_stats(session)
    code = loaded_code_stats()
    executors = list(f._executors.values())
    figures.update(
        seconds=seconds,
        rss=rss,
        kernels=stats.kernels,
        runtime_rows=len(runtime_rows),
        evictions=stats.evictions - evictions0,
        evicted_with_rows=[i for i in evicted if table.bindings_of(BindingKey.runtime_fused(i))],
        evicted_with_recipe=[i for i in evicted if i in set(session.recipes.ids())],
        recipes=len(session.recipes),
        recipes_bound=len(bound_ids & set(session.recipes.ids())),
        live_code=code.live,
        loaded_code=code.loaded - code0.loaded,
        loads_after_all_shapes=code.loaded - loads0,
        freed_code=code.freed - code0.freed,
        executors=len(executors),
        traces=f.stats.traces,
        plans_cached=sum(len(e._plans) for e in executors),
        optimized_cached=sum(len(e._optimized) for e in executors),
        fast_paths_kept=sum(len(e._fast_paths) for e in executors),
        compile_records=sum(len(e.compiler.records) for e in executors),
        recyclers=sum(len(p.recyclers) for e in executors for p in e._plans.values()),
        thunks=len(session.slot("thunks", dict)),
        recipes_unbound=session_mod.RECIPES_UNBOUND,
        recipes_forgotten=session.recipes.forgotten_total,
        generation=session.generation,
    )
    return figures


TINY_IR = """define void @tiny(ptr %p) {
entry:
  store i64 7, ptr %p
  ret void
}
"""


def churn(loads: int, per_engine: int) -> dict:
    """Load and free one tiny object `loads` times (a few alive at once, as under a kernel
    budget), each engine linking at most `per_engine` libraries: RSS kept per load."""
    import llvmlite.binding as llvm

    from fusebind.runtime import loader

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    code = llvm.Target.from_default_triple().create_target_machine().emit_object(llvm.parse_assembly(TINY_IR))
    saved, loader.LIBRARIES_PER_ENGINE = loader.LIBRARIES_PER_ENGINE, per_engine
    held: list = []
    engines_before = loader.loaded_code_stats().engines  # the soaks' kernels still bound hold theirs

    def cycle(n: int) -> None:
        for _ in range(n):
            held.append(loader.load_object(code, "tiny"))
            if len(held) > 4:
                held.pop(0)

    try:
        cycle(200)  # warm up the allocator and the first engines
        gc.collect()
        start = rss_kib()
        t0 = time.perf_counter()
        cycle(loads)
        seconds = time.perf_counter() - t0
        held.clear()
        gc.collect()
        return {"mode": "churn", "loads": loads, "per_engine": per_engine,
                "kib_per_load": (rss_kib() - start) / loads, "ms_per_load": seconds / loads * 1e3,
                "engines": loader.loaded_code_stats().engines, "engines_before": engines_before}
    finally:
        loader.LIBRARIES_PER_ENGINE = saved


if __name__ == "__main__":
    # each argument one run, in order in this process: a soak `mode:shapes:calls:budget`, or
    # `churn:loads:libraries_per_engine`
    for spec in sys.argv[1:]:
        mode, *numbers = spec.split(":")
        figures = churn(*map(int, numbers)) if mode == "churn" else main(mode, *map(int, numbers))
        print(json.dumps(figures), flush=True)
