# RUN: %python %s | filecheck %s
# Slices (basic indexing, x[::-1], np.split) fuse into their consumer's region as index maps:
# the optimized IR holds the prim.slice ops inside fused.region, and explain() names each one as
# a prologue of that region, worded as numpy's subscript of the argument it reads.
import tempfile
from pathlib import Path

import numpy as np

import fusebind as fb
from fusebind.lowering import ObjectCache

with tempfile.TemporaryDirectory() as d:
    @fb.jit(cache=ObjectCache(Path(d)))
    def rot(x, c):
        a, b = np.split(x, 2, axis=-1)
        return a * c + b[::-1]

    x, c = np.ones((4, 8), np.float32), np.ones((4, 4), np.float32)
    rot(x, c)
    print(rot.optimized(x, c))
    print(rot.explain(x, c))

# CHECK-LABEL: func.func @rot
# CHECK: fused.region @{{[a-z_0-9]+}} id {{[0-9]+}} (%x, %c)
# CHECK-NEXT: ^bb0
# CHECK-NEXT: prim.slice %x_1 {starts = [0, 0], limits = [4, 4], strides = [1, 1]}
# CHECK-NEXT: prim.slice %x_1 {starts = [0, 4], limits = [4, 8], strides = [1, 1]}
# CHECK-NEXT: prim.mul
# CHECK-NEXT: prim.slice %{{[0-9a-z_]+}} {starts = [3, 0], limits = [-1, 4], strides = [-1, 1]}
# CHECK-NEXT: prim.add
# CHECK-NEXT: fused.yield
# CHECK: fusebind plan for 'rot'(x: float32[4,8], c: float32[4,4]) on 'cpu'
# CHECK: region @{{[a-z_0-9]+}} (FusedOpId {{[0-9]+}}): 5 ops [prim.slice, prim.slice, prim.mul, prim.slice, prim.add]
# CHECK-NEXT: prologue: slice x[:, :4] (index map, no copy)
# CHECK-NEXT: prologue: slice x[:, 4:] (index map, no copy)
# CHECK-NEXT: prologue: slice (slice x[:, 4:])[::-1, :] (index map, no copy)
# CHECK-NEXT: arm 0 (primitives):
# CHECK: chosen: fused
