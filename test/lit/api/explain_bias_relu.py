# RUN: %python %s | filecheck %s
# A bias + relu chain: the optimizer fuses it once the kernel is adopted (sync JIT).
import tempfile
from pathlib import Path

import numpy as np

import fusebind as fb
from fusebind.lowering import ObjectCache

with tempfile.TemporaryDirectory() as d:
    @fb.jit(cache=ObjectCache(Path(d)))
    def f(x, b):
        return fb.relu(x + b)

    x, b = np.ones((4, 8), np.float32), np.ones(8, np.float32)
    print(f.optimized(x, b))
    print(f.explain(x, b))

# CHECK-LABEL: func.func @f
# CHECK: fused.region @bias_relu id 4 
# CHECK-NEXT: ^bb0
# CHECK-NEXT: prim.add
# CHECK-NEXT: prim.relu
# CHECK-NEXT: fused.yield
# CHECK: func.return
# CHECK: fusebind plan for 'f'(x: float32[4,8], b: float32[8]) on 'cpu'
# CHECK: region @bias_relu (FusedOpId 4): 2 ops [prim.add, prim.relu]
# CHECK-NEXT: arm 0 (primitives): {{.*}} us
# CHECK-NEXT: fused arm: {{.*}} us
# CHECK-NEXT: kernel: Static(fused.bias_relu) (f32, f32, f32) on 'cpu', row 0 of 1: llvm:{{[0-9a-f]+}}, {{.*}} -- the only row that fits
# CHECK-NEXT: chosen: fused Static(fused.bias_relu) row 0 (llvm:{{[0-9a-f]+}}) -- fused arm is priced and cheaper than its primitives
