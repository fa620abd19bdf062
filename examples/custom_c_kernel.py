"""Bind a hand-written C kernel for a fused region, and run it through fusebind.

1. Ask the optimizer which region it wants for `relu(x + bias)` (with no
   kernel bound it is gated, and lands on the work order).
2. Write a C kernel for that region following the kernel ABI
   (docs/KERNEL-ABI.md: one pointer per memref descriptor, inputs then
   outputs, strides in elements) and build it with `cc -O2 -shared -fPIC`.
3. Load it (`Kernel.from_library`) and adopt it for the region
   (`adopt_runtime_fused`), priced with the region's Layer-1 cost.
4. Compile the program with `fusebind.compile`: the gate now sees the kernel,
   the region fuses under the adopted id, and the executor calls the C code.
   The result is checked against numpy.

Run: python examples/custom_c_kernel.py   (needs a C compiler, `cc`)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import fusebind as fb
from fusebind.compiler.context import OptimizationContext
from fusebind.compiler.cost import MachineModel, compose_region_cost
from fusebind.compiler.optimize import optimize_graph
from fusebind.dialect import parse_module
from fusebind.runtime import DType, Kernel, KernelSignature, adopt_runtime_fused, lookup_runtime_kernel

ROWS, COLS = 512, 256
PROGRAM = f"""
func.func @bias_relu(%x: tensor<{ROWS}x{COLS}xf32>, %bias: tensor<{COLS}xf32>) -> tensor<{ROWS}x{COLS}xf32> {{
  %0 = prim.add %x, %bias : (tensor<{ROWS}x{COLS}xf32>, tensor<{COLS}xf32>) -> tensor<{ROWS}x{COLS}xf32>
  %1 = prim.relu %0 : tensor<{ROWS}x{COLS}xf32> -> tensor<{ROWS}x{COLS}xf32>
  func.return %1 : tensor<{ROWS}x{COLS}xf32>
}}
"""

C_SOURCE = r"""
#include <stdint.h>
/* MLIR C-interface ranked memref descriptors (docs/KERNEL-ABI.md). */
typedef struct { float *allocated, *aligned; int64_t offset, sizes[1], strides[1]; } memref1f;
typedef struct { float *allocated, *aligned; int64_t offset, sizes[2], strides[2]; } memref2f;

/* out[i, j] = max(x[i, j] + bias[j], 0) */
void bias_relu_c(memref2f *x, memref1f *bias, memref2f *out) {
  for (int64_t i = 0; i < out->sizes[0]; ++i)
    for (int64_t j = 0; j < out->sizes[1]; ++j) {
      float v = x->aligned[x->offset + i * x->strides[0] + j * x->strides[1]]
              + bias->aligned[bias->offset + j * bias->strides[0]];
      out->aligned[out->offset + i * out->strides[0] + j * out->strides[1]] = v > 0.0f ? v : 0.0f;
    }
}
"""


def build_library(workdir: Path) -> Path:
    """Compile C_SOURCE into a shared library in `workdir`."""
    cc = shutil.which("cc")
    if cc is None:
        sys.exit("custom_c_kernel: no C compiler `cc` on PATH; install one (e.g. gcc) to run this example")
    src, lib = workdir / "bias_relu.c", workdir / "libbias_relu.so"
    src.write_text(C_SOURCE)
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


def main() -> int:
    module = parse_module(PROGRAM)
    # 1. The region the optimizer would fuse if a kernel were bound for it.
    wanted = optimize_graph(module, OptimizationContext.gate_none()).work_order
    item = next(w for w in wanted if w.name == "bias_relu")
    print(f"optimizer work order: @{item.name} id {item.fused_id}, dtypes {item.dtypes}, "
          f"{len(list(item.region.body.blocks[0].ops)) - 1} ops")

    with tempfile.TemporaryDirectory(prefix="fusebind-c-kernel-") as tmp:
        # 2-3. Build, load and adopt the C kernel.
        lib = build_library(Path(tmp))
        signature = KernelSignature(((DType.F32, 2), (DType.F32, 1)), ((DType.F32, 2),))
        kernel = Kernel.from_library(lib, "bias_relu_c", signature=signature)
        cost = compose_region_cost(item.region, MachineModel.default())
        fused_id = adopt_runtime_fused("bias_relu", item.region, kernel, item.dtypes, "cpu", cost=cost)
        binding = lookup_runtime_kernel(fused_id, "cpu")
        print(f"adopted RuntimeFused({fused_id}) dtypes ({', '.join(d.value for d in binding.dtypes)}) "
              f"source {binding.kernel.source.replace(tmp, '<tmp>')}")

        # 4. Run the program; the plan resolves the region to the C kernel.
        fn = fb.compile(PROGRAM, entry="bias_relu")
        rng = np.random.default_rng(0)
        x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
        bias = rng.standard_normal(COLS).astype(np.float32)
        y = fn(x, bias)
        expected = np.maximum(x + bias, np.float32(0))
        print(fn.explain(x, bias))
        ok = np.array_equal(y, expected)
        print(f"fused calls: {fn.stats.arms.fused_calls}; result equals numpy: {ok}")
        return 0 if ok and fn.stats.arms.fused_calls == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
