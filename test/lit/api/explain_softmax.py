# RUN: %python %s | filecheck %s
# softmax over rows: max, exp, sum, div; `.mlir()` shows the trace, `.explain()` the arms.
import tempfile
from pathlib import Path

import numpy as np

import fusebind as fb
from fusebind.lowering import ObjectCache

with tempfile.TemporaryDirectory() as d:
    @fb.jit(cache=ObjectCache(Path(d)))
    def sm(x):
        return fb.softmax(x, axis=-1)

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    print(sm.mlir(x))
    print(sm.optimized(x))
    print(sm.explain(x))
    y = sm(x)
    e = np.exp(x - x.max(-1, keepdims=True))
    print("matches numpy:", bool(np.allclose(y, e / e.sum(-1, keepdims=True), rtol=1e-5)))

# CHECK-LABEL: func.func @sm
# CHECK: prim.reduce_max
# CHECK: prim.sub
# CHECK: prim.exp
# CHECK: prim.reduce_sum
# CHECK: prim.div
# CHECK-LABEL: func.func @sm
# CHECK: fused.region
# CHECK: fusebind plan for 'sm'(x: float32[3,4]) on 'cpu'
# CHECK: region @
# CHECK: chosen:
# CHECK: matches numpy: True
