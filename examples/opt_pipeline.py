"""The `fusebind-opt` tool, one pipeline at a time, on examples/chain.mlir.

Each step runs `fusebind-opt FILE -p PIPELINE` and shows the head of its output:
1. `fuse{gate=all remarks=true}`: wrap fusable subgraphs in `fused.region`
   (gate=all assumes every kernel is bound; remarks say what fused and why;
   as in MLIR, options are separated by spaces, a comma separates passes).
2. `fuse{gate=all},annotate-cost`: stamp each region's Layer-1 cost.
3. `fuse{gate=all},lower-to-linalg`: each region as upstream MLIR
   (linalg.generic on tensors, bufferization at the boundary).
4. `fuse{gate=all},lower-to-llvm`: each region as LLVM IR, through the
   upstream pass pipeline.

Run: python examples/opt_pipeline.py [FILE]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FILE = Path(__file__).with_name("chain.mlir")
PIPELINES = [
    ("fuse: capability-gated fusion", "fuse{gate=all remarks=true}"),
    ("annotate-cost: Layer-1 costs", "fuse{gate=all},annotate-cost"),
    ("lower-to-linalg: upstream MLIR", "fuse{gate=all},lower-to-linalg"),
    ("lower-to-llvm: LLVM IR", "fuse{gate=all},lower-to-llvm"),
]
HEAD = 14


def fusebind_opt(*args: str) -> subprocess.CompletedProcess[str]:
    """Run `fusebind-opt` with this interpreter (no PATH lookup needed)."""
    code = "import sys; from fusebind.tools.opt import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)


def main() -> int:
    path = str(Path(sys.argv[1]) if len(sys.argv) > 1 else FILE)
    for title, pipeline in PIPELINES:
        proc = fusebind_opt(path, "-p", pipeline)
        print(f"=== {title}\n$ fusebind-opt {path} -p '{pipeline}'")
        if proc.returncode != 0:
            print(proc.stderr.strip())
            return proc.returncode
        lines = proc.stdout.splitlines()
        print("\n".join(lines[:HEAD]) + (f"\n... ({len(lines) - HEAD} more lines)" if len(lines) > HEAD else ""))
        remarks = [line for line in proc.stderr.splitlines() if line.startswith("remark:")]
        for line in remarks:
            print(line)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
