"""torch.compile(backend="fusebind") against Inductor (torch.compile's default) and eager torch.

Run:  python -m bench.bench_torch [--quick] [--threads 1,all] [--write FILE]

Owns: the three modules of test/torch (an MLP, a multi-head attention block, a small CNN, at bench
sizes), their timing and the markdown (with `--write`, the block between `<!-- torch:begin -->` and
`<!-- torch:end -->` in FILE). Each threads setting runs in a child process: `1` = pinned to one core
(os.sched_setaffinity, torch.set_num_threads(1), OPENBLAS_NUM_THREADS=1), `all` = every core of the
affinity set. In the child, every module is compiled both ways under `torch.no_grad()` in `eval()`;
the first call of each (dynamo + the backend's compile; fusebind on an empty object cache, a fresh
FUSEBIND_CACHE_DIR; Inductor on whatever its own cache holds) is timed apart; both outputs are
checked against eager torch (torch.testing.assert_close at rtol 1e-3, atol 1e-4, as bench_onnx's
transformers: a mismatch is an error, never a row), then the three are timed in interleaved rounds
(order rotated, warm-up excluded): min and median per call. Inductor needs a C++ compiler; if it fails its cells say why.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

if __package__ in (None, ""):  # `python bench/bench_torch.py`: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.timing import environment_header, fmt_ratio, fmt_time, markdown_table, measure_interleaved

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- torch:begin -->", "<!-- torch:end -->"
REMOVED_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def modules(quick: bool) -> dict[str, tuple[Any, tuple[Any, ...], str]]:
    """name -> (module in eval(), inputs, description)."""
    import torch
    nn = torch.nn
    torch.manual_seed(0)
    b, d, hid, seq, img = (8, 64, 256, 16, 16) if quick else (64, 256, 1024, 64, 32)

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.l1, self.l2 = nn.Linear(d, hid), nn.Linear(hid, d)

        def forward(self, x: Any) -> Any:
            return self.l2(nn.functional.gelu(self.l1(x)))

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(d, 8, batch_first=True)
            self.ln = nn.LayerNorm(d)

        def forward(self, x: Any) -> Any:
            y, _ = self.attn(x, x, x, need_weights=False)
            return self.ln(x + y)

    class CNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32)
            self.fc = nn.Linear(32 * (img // 2) ** 2, 10)

        def forward(self, x: Any) -> Any:
            x = nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
            return self.fc(x.flatten(1))

    cnn = CNN().eval()
    with torch.no_grad():
        cnn.bn.running_mean.uniform_(-1, 1)
        cnn.bn.running_var.uniform_(0.5, 2)
    batch = b // 8 if not quick else 2
    return {
        "mlp": (MLP().eval(), (torch.randn(b, d),), f"Linear({d},{hid}) GELU Linear({hid},{d}), batch {b}"),
        "attention": (Attention().eval(), (torch.randn(batch, seq, d),),
                      f"MultiheadAttention({d}, 8 heads) + residual + LayerNorm, ({batch}, {seq}, {d})"),
        "cnn": (cnn, (torch.randn(batch, 3, img, img),),
                f"Conv2d(3,32,3) BatchNorm ReLU MaxPool2d Linear, ({batch}, 3, {img}, {img})"),
    }


def child(threads: int, quick: bool) -> dict[str, Any]:
    import torch
    torch.set_num_threads(threads)
    rows, errors = [], []
    for name, (m, xs, _) in modules(quick).items():
        row: dict[str, Any] = {"model": name, "threads": threads}
        fns: dict[str, Any] = {"eager": lambda m=m, xs=xs: m(*xs)}
        with torch.no_grad():
            ref = m(*xs)
            for backend in ("fusebind", "inductor"):
                torch._dynamo.reset()
                try:
                    f = torch.compile(m, backend=backend)
                    t0 = time.perf_counter()
                    got = f(*xs)
                    row[f"{backend}_first"] = time.perf_counter() - t0
                    torch.testing.assert_close(got, ref, rtol=1e-3, atol=1e-4)
                    fns[backend] = lambda f=f, xs=xs: f(*xs)
                except Exception as exc:  # a failed backend is reported in its cells and in the errors
                    row[f"{backend}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    errors.append(f"{name} {backend}: {row[f'{backend}_error']}")
            timings = measure_interleaved(fns, budget_s=1.0 if quick else 4.0, lo=5, hi=60)
        for k, t in timings.items():
            row[f"{k}_min"], row[f"{k}_median"] = t.min, t.median
        rows.append(row)
    return {"rows": rows, "errors": errors, "torch": torch.__version__}


def _all_cores() -> int:
    return len(os.sched_getaffinity(0))


def _run_child(threads: str, quick: bool) -> dict[str, Any]:
    pin = threads == "1"
    n = 1 if pin else _all_cores()
    core = min(os.sched_getaffinity(0))
    env = {k: v for k, v in os.environ.items() if k not in REMOVED_ENV}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["FUSEBIND_CACHE_DIR"] = tempfile.mkdtemp(prefix="fusebind-bench-torch-")
    if pin:
        env.update({"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    try:
        proc = subprocess.run([sys.executable, "-m", "bench.bench_torch", "--child", "--nthreads", str(n),
                               *(["--quick"] if quick else [])], capture_output=True, text=True, env=env,
                              cwd=str(ROOT), timeout=3600,
                              preexec_fn=(lambda: os.sched_setaffinity(0, {core})) if pin else None)
    finally:
        shutil.rmtree(env["FUSEBIND_CACHE_DIR"], ignore_errors=True)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}): {proc.stderr.strip()[-1500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(rows: Sequence[dict[str, Any]]) -> str:
    out = []
    for r in rows:
        where = "1 (1 pinned core)" if r["threads"] == 1 else f"{r['threads']} ({r['threads']} cores)"

        def cell(k: str) -> str:
            if f"{k}_error" in r:
                return "failed: " + r[f"{k}_error"][:80]
            return f"{fmt_time(r.get(f'{k}_min'))} / {fmt_time(r.get(f'{k}_median'))}"
        ratio = lambda k: fmt_ratio(r[f"{k}_min"] / r["fusebind_min"]) if f"{k}_min" in r and "fusebind_min" in r else "—"  # noqa: E731
        out.append((r["model"], where, cell("fusebind"), cell("inductor"), cell("eager"), ratio("inductor"),
                    ratio("eager"), f"{fmt_time(r.get('fusebind_first'))} / {fmt_time(r.get('inductor_first'))}"))
    return markdown_table(["module", "threads", "fusebind min / median", "Inductor min / median",
                           "eager min / median", "Inductor ÷ fusebind (min)", "eager ÷ fusebind (min)",
                           "first call: fusebind / Inductor"], out)


def write_block(path: Path, block: str) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    new = f"{BEGIN}\n{block.rstrip()}\n{END}"
    if BEGIN in text and END in text and text.index(BEGIN) < text.index(END):
        head, rest = text.split(BEGIN, 1)
        text = head + new + rest.split(END, 1)[1]
    else:
        text = (text.rstrip() + "\n\n" if text.strip() else "") + new + "\n"
    path.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_torch", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, few rounds (the smoke test)")
    ap.add_argument("--threads", default="1,all", help="comma-separated, of: 1 (one pinned core), all")
    ap.add_argument("--write", metavar="FILE", help="replace the block between the torch markers in FILE")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--nthreads", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.nthreads, args.quick)))
        return 0
    threads = [t.strip() for t in args.threads.split(",") if t.strip()]
    if any(t not in ("1", "all") for t in threads):
        ap.error(f"threads: 1 or all, got {threads}")
    t_start = time.perf_counter()
    rows, errors, version = [], [], "?"
    for t in threads:
        print(f"timing at {t} thread(s) …", file=sys.stderr, flush=True)
        res = _run_child(t, args.quick)
        rows += res["rows"]
        errors += res["errors"]
        version = res["torch"]
    shown = " ".join(["python -m bench.bench_torch", *(sys.argv[1:] if argv is None else argv)])
    desc = ", ".join(f"**{k}**: {v[2]}" for k, v in modules(args.quick).items())
    md = [f"## torch.compile backend (bench/bench_torch.py, {'quick' if args.quick else 'full'} run)", "",
          environment_header(shown, {k: os.environ.get(k) for k in REMOVED_ENV}), f"- torch {version} (CPU build)", "",
          "`torch.compile(m, backend=\"fusebind\")` against `torch.compile(m)` (Inductor) and eager `m`, float32, "
          "under torch.no_grad() in eval(). Each threads row is a child process: `1` = pinned to one core "
          "(os.sched_setaffinity, torch.set_num_threads(1), OPENBLAS_NUM_THREADS=1); the other = every core. "
          "Both compiled outputs are checked against eager first (assert_close rtol 1e-3, atol 1e-4). Per call: "
          "interleaved rounds, order rotated, warm-up excluded; min / median. X ÷ fusebind > 1: fusebind is "
          "faster. First call = dynamo + the backend's compile + the call (fusebind on an empty object cache; "
          "Inductor with its own on-disk cache as found).", "", desc + ".", "", table(rows), "",
          f"Run took {time.perf_counter() - t_start:.0f} s."]
    if errors:
        md += ["", "**Errors (not rows):**", ""] + [f"- {e}" for e in errors]
    text = "\n".join(md)
    print(text)
    if args.write:
        write_block(Path(args.write), text)
    return 1 if any("fusebind" in e for e in errors) else 0


if __name__ == "__main__":
    sys.exit(main())
