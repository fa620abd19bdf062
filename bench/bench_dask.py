"""fusebind.dask against plain dask.array on one pipeline: normalise rows, GELU, reduce.

Run:  python -m bench.bench_dask [--gib 4] [--cols 1024] [--chunk-mib 64] [--repeat 2]
                                 [--scheduler cluster|sync] [--write FILE]

Owns: the pipeline (`pipeline`: per row x - mean, / sqrt(var + 1e-5), the tanh GELU, then the sum
over rows: one float32 value per column), run on `--gib` GiB of float32 standard normals made by
`dask.array.random` inside the workers (the same graph for both versions), on a
`distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True)` (or the synchronous
scheduler, `--scheduler sync`, for the smoke test). Both versions are checked against each other
before anything is reported. Each repetition runs plain dask, then fusebind.dask, alternating.

Measured per version: the build (tracing, the graph, and for fusebind the kernels' compilation,
on a fresh object cache), the compute (`client.compute(...).result()`), the tasks, and the bytes
written: the `nbytes` of every task result the scheduler records as it enters worker memory (a
scheduler plugin; a dask callback on the local schedulers). That is what each task hands to the
next through the worker's memory; temporaries inside one task (the per-op arrays of plain dask's
fused blockwise tasks) are not task results and are not counted, so plain dask's memory traffic is
higher than its count. fusebind.dask's one kernel per chunk is the only reader of a generated
chunk, so dask fuses the generation into that task and the input chunks are never task results;
plain dask's graph reads each chunk in several tasks (mean, variance, the rest), so it keeps them.

`--write FILE` replaces the block between `<!-- dask:begin -->` and `<!-- dask:end -->`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

if __package__ in (None, ""):  # `python bench/bench_dask.py`: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

BEGIN, END = "<!-- dask:begin -->", "<!-- dask:end -->"
PLUGIN = "bench-dask-bytes-written"


def pipeline(x: Any) -> Any:
    """Normalise each row, the tanh GELU, the sum over rows."""
    m = x.mean(axis=1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=1, keepdims=True)
    y = (x - m) / np.sqrt(v + 1e-5)
    g = 0.5 * y * (1 + np.tanh(0.7978845608 * (y + 0.044715 * y ** 3)))
    return g.sum(axis=0)


def _plugin_class() -> Any:
    from distributed.diagnostics.plugin import SchedulerPlugin

    class BytesWritten(SchedulerPlugin):
        """Sums the nbytes of every task result the scheduler sees enter memory."""

        name = PLUGIN

        def __init__(self) -> None:
            self.total = 0
            self.tasks = 0

        async def start(self, scheduler: Any) -> None:
            self.scheduler = scheduler

        def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
            if finish == "memory":
                ts = self.scheduler.tasks.get(key)
                nbytes = getattr(ts, "nbytes", -1) if ts is not None else -1
                self.total += max(int(nbytes), 0)
                self.tasks += 1

    return BytesWritten


def _read_plugin(dask_scheduler: Any = None, reset: bool = False) -> tuple[int, int]:
    plugin = dask_scheduler.plugins[PLUGIN]
    out = (plugin.total, plugin.tasks)
    if reset:
        plugin.total = plugin.tasks = 0
    return out


class _LocalBytes:
    """The same count on the local schedulers: a dask callback after every task."""

    def __init__(self) -> None:
        from dask.callbacks import Callback
        from dask.sizeof import sizeof

        outer = self
        self.total = self.tasks = 0

        class Count(Callback):
            def _posttask(self, key: Any, result: Any, dsk: Any, state: Any, worker_id: Any) -> None:
                outer.total += int(sizeof(result))
                outer.tasks += 1

        self.callback = Count()


def run_once(version: str, x: Any, client: Any, fb_fn: Any) -> dict[str, Any]:
    """Build and compute one version; its times, tasks, bytes written and result."""
    import dask

    t0 = time.perf_counter()
    out = fb_fn(x) if version == "fusebind.dask" else pipeline(x)
    built = time.perf_counter() - t0
    tasks = len(dict(out.__dask_graph__()))
    if client is not None:
        client.run_on_scheduler(_read_plugin, reset=True)
        t0 = time.perf_counter()
        result = client.compute(out).result()
        seconds = time.perf_counter() - t0
        written, ran = client.run_on_scheduler(_read_plugin)
    else:
        local = _LocalBytes()
        t0 = time.perf_counter()
        with local.callback, dask.config.set(scheduler="synchronous"):
            result = out.compute()
        seconds = time.perf_counter() - t0
        written, ran = local.total, local.tasks
    return {"version": version, "build": built, "compute": seconds, "tasks": tasks, "ran": ran,
            "written": written, "result": np.asarray(result)}


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _gib(n: float) -> str:
    return f"{n / 2 ** 30:.2f} GiB" if n >= 2 ** 28 else f"{n / 2 ** 20:.1f} MiB"


def bench(gib: float, cols: int, chunk_mib: float, repeat: int, scheduler: str) -> tuple[str, list[dict[str, Any]]]:
    import dask.array as da

    import fusebind.dask as fbd
    from bench.timing import fmt_time, markdown_table

    rows = int(gib * 2 ** 30 / 4 / cols)
    chunk_rows = max(1, int(chunk_mib * 2 ** 20 / 4 / cols))
    client = cluster = None
    if scheduler == "cluster":
        import distributed

        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=40)
        client = distributed.Client(cluster)
        client.register_plugin(_plugin_class()())
    try:
        x = da.random.default_rng(0).standard_normal((rows, cols), dtype=np.float32, chunks=(chunk_rows, cols))
        fb_fn = fbd.jit(pipeline)
        runs: list[dict[str, Any]] = []
        for _ in range(repeat):
            for version in ("dask.array", "fusebind.dask"):
                runs.append(run_once(version, x, client, fb_fn))
        plain = [r for r in runs if r["version"] == "dask.array"]
        fused = [r for r in runs if r["version"] == "fusebind.dask"]
        ref = plain[0]["result"]
        scale = float(np.abs(ref).max()) or 1.0
        for r in runs:  # both versions agree before anything is reported
            if r["result"].shape != ref.shape or r["result"].dtype != ref.dtype or \
                    not np.allclose(r["result"], ref, rtol=1e-4, atol=1e-4 * scale):
                raise SystemExit(f"bench_dask: {r['version']} differs from dask.array: max |diff| "
                                 f"{float(np.abs(r['result'] - ref).max())} (scale {scale})")
        explain = fb_fn.explain(x)
    finally:
        if client is not None:
            client.close()
            cluster.close()
    table = []
    for group in (plain, fused):
        best = min(r["compute"] for r in group)
        table.append((group[0]["version"], fmt_time(best), ", ".join(fmt_time(r["compute"]) for r in group),
                      fmt_time(group[0]["build"]), group[0]["tasks"], _gib(group[0]["written"])))
    speed = min(r["compute"] for r in plain) / min(r["compute"] for r in fused)
    text = "\n".join([
        f"- data: {rows} x {cols} float32 ({_gib(rows * cols * 4)}), chunks of {chunk_rows} rows "
        f"({_gib(chunk_rows * cols * 4)}, {-(-rows // chunk_rows)} chunks), made by dask.array.random in the tasks",
        f"- dask {_version('dask')}, distributed {_version('distributed')}",
        f"- scheduler: {'LocalCluster(n_workers=2, threads_per_worker=1, processes=True)' if scheduler == 'cluster' else 'synchronous'}",
        f"- fusebind.dask is {speed:.2f}x plain dask.array's compute time (best of {repeat})",
        "",
        markdown_table(["version", "compute (best)", "compute (each run)", "build (first run)", "tasks",
                        "bytes written (task results)"], table),
        "",
        "fusebind.dask's plan (`explain()`):",
        "",
        "```",
        explain,
        "```",
    ])
    return text, runs


def _header(text: str) -> str:
    """bench.timing's environment header without its child-process line (this bench runs no child)."""
    return "\n".join(line for line in text.splitlines() if not line.startswith("- environment:"))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_dask", description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=4.0, help="input size in GiB of float32 (default 4)")
    ap.add_argument("--cols", type=int, default=1024, help="row length (default 1024)")
    ap.add_argument("--chunk-mib", type=float, default=64.0, help="chunk size in MiB (default 64)")
    ap.add_argument("--repeat", type=int, default=2, help="repetitions of each version (default 2)")
    ap.add_argument("--scheduler", choices=("cluster", "sync"), default="cluster")
    ap.add_argument("--write", metavar="FILE", help="replace the dask block of FILE (bench/RESULTS.md)")
    args = ap.parse_args(argv)
    # a fresh object cache: the build column includes compiling the kernels (workers inherit it)
    os.environ["FUSEBIND_CACHE_DIR"] = tempfile.mkdtemp(prefix="fusebind-bench-dask-")
    command = "python -m bench.bench_dask " + " ".join(argv if argv is not None else sys.argv[1:])
    text, _ = bench(args.gib, args.cols, args.chunk_mib, args.repeat, args.scheduler)
    from bench.timing import environment_header

    block = "\n".join(["## Dask (bench/bench_dask.py)", "",
                       "normalise rows, GELU, reduce (bench/bench_dask.py `pipeline`): fusebind.dask against plain "
                       "dask.array. Bytes written: the nbytes of every task result the scheduler records as it "
                       "enters worker memory; temporaries inside a task (plain dask's per-op arrays inside its "
                       "fused blockwise tasks) are not task results and are not counted. fusebind.dask's kernel is the only "
                       "reader of a generated chunk, so dask fuses the generation into that task and the input "
                       "chunks are never task results; plain dask reads each chunk in several tasks and keeps them.",
                       "",
                       _header(environment_header(command.strip(), {})), "", text])
    print(block)
    if args.write:
        from bench.bench_onnx import write_block

        write_block(Path(args.write), block, (BEGIN, END))
        print(f"\nwrote the dask block of {args.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
