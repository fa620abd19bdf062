"""Concurrency under load, executor side: threads calling jitted functions
while background compiles adopt kernels, and processes sharing one cache
directory while each runs jitted functions.

Bounded runs under a watchdog (a hang fails the test); every value is checked
against numpy; at the end the table holds exactly one runtime-fused id per
distinct recipe and one row per (id, dtypes) — nothing lost, nothing doubled.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable

import numpy as np

from conftest import run_threads, scaled

HERE = Path(__file__).resolve().parent
WATCHDOG_S = 300.0

#: (name, numpy reference, fb body) — the functions the threads share
FUNCTIONS: list[tuple[str, Callable[..., Any], str]] = [
    ("muladd", lambda x, y: x * y + x, "x * y + x"),
    ("tanhsub", lambda x, y: np.tanh(x) - y, "fb.tanh(x) - y"),
    ("relu2", lambda x, y: np.maximum(x * 2.0, 0).astype(x.dtype) + y, "fb.relu(x * 2.0) + y"),
    ("rowcenter", lambda x, y: x - x.sum(axis=-1, keepdims=True) + y, "x - x.sum(axis=-1, keepdims=True) + y"),
]
SHAPES = [(8, 16), (3, 300), (64, 64)]


def make_functions(background: bool) -> list[tuple[str, Callable[..., Any], Any]]:
    import fusebind as fb

    out = []
    for name, ref, body in FUNCTIONS:
        space: dict[str, Any] = {"fb": fb}
        exec(f"def {name}(x, y):\n    return {body}\n", space)  # noqa: S102 - fixed source above
        out.append((name, ref, fb.jit(space[name], background=background)))
    return out


def test_threads_calling_jitted_functions_while_kernels_are_adopted(isolated_state: None) -> None:
    from fusebind.runtime.bindings import global_bindings

    funcs = make_functions(background=True)
    iterations = scaled(30, 400)
    checked: list[int] = []

    def worker(me: int) -> None:
        rng = np.random.default_rng(me)
        for i in range(iterations):
            name, ref, f = funcs[(me + i) % len(funcs)]
            shape = SHAPES[(me * 7 + i) % len(SHAPES)]
            dtype = np.float32 if (me + i) % 3 else np.float64
            x, y = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
            got = f(x, y)
            eps = float(np.finfo(dtype).eps)
            np.testing.assert_allclose(got, ref(x, y), rtol=64 * eps * shape[1], atol=64 * eps * shape[1],
                                       err_msg=f"{name} {shape} {dtype.__name__}")
            checked.append(1)

    errors = run_threads([lambda m=m: worker(m) for m in range(8)], WATCHDOG_S)
    assert not errors, errors[:3]
    assert len(checked) == 8 * iterations
    for _, _, f in funcs:
        assert f.wait_compiled(WATCHDOG_S)
    # Registrations: one runtime id per distinct recipe, one row per (id, dtypes, kernel source): a
    # dynamic-dim kernel is bound beside the static one (DYNAMIC-SHAPES.md), never twice; nothing failed.
    from fusebind.runtime.bindings import global_recipes
    from fusebind.runtime.resolve import row_is_dynamic

    table = global_bindings()
    rows = [(k, d, row.source) for k, d, _b, row in table.rows() if k.is_runtime]
    assert len(rows) == len(set(rows)), f"duplicated rows: {len(rows)} rows for {len(set(rows))} sources"
    per_key = {}
    for k, d, _b, row in table.rows():
        if k.is_runtime:
            per_key.setdefault((k, d), []).append(row_is_dynamic(row))
    assert all(len(v) <= 2 and len(set(v)) == len(v) for v in per_key.values()), per_key  # <= one static, one dynamic
    keys = set(per_key)
    ids = {k.fused_id for k, _ in keys}
    assert ids == set(global_recipes().ids()), (sorted(ids), sorted(global_recipes().ids()))
    for _, _, f in funcs:
        for ex in f._executors.values():
            failed = [r.error for r in ex.compiler.records.values() if r.error]
            assert not failed, failed
    # every fused signature ran its kernel at least once after adoption: call again, all fused
    fused_after = 0
    for name, ref, f in funcs:
        for shape in SHAPES:
            x = np.ones(shape, np.float32)
            np.testing.assert_allclose(f(x, x), ref(x, x), rtol=1e-5)
        fused_after += f.stats.fused_calls
    assert fused_after > 0


PROCESS_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import fusebind as fb
    me, iterations = int(sys.argv[1]), int(sys.argv[2])
    fns = {
        "muladd": (lambda x, y: x * y + x, fb.jit(lambda x, y: x * y + x)),
        "tanhsub": (lambda x, y: np.tanh(x) - y, fb.jit(lambda x, y: fb.tanh(x) - y)),
        "mine": (lambda x, y: x * (2.0 + me) + y, fb.jit(lambda x, y: x * (2.0 + me) + y)),
    }
    rng = np.random.default_rng(me)
    bad = 0
    for i in range(iterations):
        for name, (ref, f) in fns.items():
            x, y = (rng.standard_normal((16, 64)).astype(np.float32) for _ in range(2))
            if not np.allclose(f(x, y), ref(x, y), rtol=1e-5, atol=1e-6):
                bad += 1
    print(json.dumps({"bad": bad, "compiles": sum(f.stats.compiles + f.stats.object_cache_hits for _, f in fns.values()),
                      "fused": sum(f.stats.fused_calls for _, f in fns.values())}))
""")


def test_processes_share_one_cache_while_running_jitted_functions(tmp_path: Path) -> None:
    import os

    procs_n = scaled(2, 4)  # (two racing writers per kernel already; each process is ~3 s of CPU)
    iterations = scaled(20, 200)
    env = dict(os.environ, FUSEBIND_CACHE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", PROCESS_SCRIPT, str(me), str(iterations)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for me in range(procs_n)]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=WATCHDOG_S)
        assert p.returncode == 0, err[-2000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["bad"] == 0 for r in reports), reports
    assert all(r["compiles"] == 3 and r["fused"] > 0 for r in reports), reports
    # Every entry is complete (the cache also holds the static prim kernels), no temp file is left,
    # and a later process running the same functions finds everything: no new entry.
    from fusebind.lowering.cache import _decode

    entries = sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".o")
    assert all(_decode((tmp_path / p).read_bytes()) is not None for p in entries)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
    again = subprocess.run([sys.executable, "-c", PROCESS_SCRIPT, "0", "2"], env=env, capture_output=True, text=True,
                           timeout=WATCHDOG_S)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout.strip().splitlines()[-1])["bad"] == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".o") == entries
