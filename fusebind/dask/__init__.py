"""fusebind.dask: fused kernels over dask arrays (the `dask` extra: dask[array], distributed).

`fusebind.dask.jit(fn)` takes dask arrays and returns dask arrays: the function is traced once on
the global shapes (no data), its elementwise and row-wise work runs as one fused kernel per chunk,
reductions along chunked axes as a tree (a fused partial per chunk, then dask.array.reduction),
matmul as dask's blocked matmul with the fused epilogue on each output block. `explain()` says
which stage runs what and where a rechunk happens and why. docs/DASK.md has the whole story.

`process_compiles()`: kernels compiled in this process by fusebind.dask's block kernels (read it
on a worker with `client.run` to see that workers compile nothing).
"""

from __future__ import annotations

from fusebind.dask.graph import DaskJitFunction, jit
from fusebind.dask.kernels import BlockKernel, process_compiles

__all__ = ["BlockKernel", "DaskJitFunction", "jit", "process_compiles"]
