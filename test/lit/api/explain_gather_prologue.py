# RUN: %python %s | filecheck %s
# Cross-entropy with integer labels: take_along_axis by the traced labels feeds the log-sum-exp
# region as an index map; explain() names the gather as a prologue of that region.
import tempfile
from pathlib import Path

import numpy as np

import fusebind as fb
from fusebind.lowering import ObjectCache

with tempfile.TemporaryDirectory() as d:
    @fb.jit(cache=ObjectCache(Path(d)))
    def picked(logits, labels):
        return np.take_along_axis(logits, labels[:, None], axis=1) - logits.max(axis=1, keepdims=True)

    logits, labels = np.ones((4, 10), np.float32), np.array([1, 0, 9, -1])
    picked(logits, labels)
    print(picked.optimized(logits, labels))
    print(picked.explain(logits, labels))

# CHECK-LABEL: func.func @picked
# CHECK: fused.region @{{[a-z_0-9]+}} id {{[0-9]+}}
# CHECK: prim.take_along
# CHECK: fused.yield
# CHECK: fusebind plan for 'picked'(logits: float32[4,10], labels: int64[4]) on 'cpu'
# CHECK: region @{{[a-z_0-9]+}} (FusedOpId {{[0-9]+}}): {{[0-9]+}} ops [{{.*}}prim.take_along{{.*}}]
# CHECK-NEXT: prologue: take_along logits, (reshape of labels) axis 1 in_bounds (index map, no copy)
# CHECK: chosen: fused
