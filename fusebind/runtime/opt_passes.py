"""Plugin module the `fusebind-opt` driver imports by name: registers the
runtime's passes (`fuse-jit`, which compiles and adopts kernels) from `jit.py`."""

from fusebind.runtime import jit as _jit  # noqa: F401  (import registers the passes)
