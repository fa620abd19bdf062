"""Plugin module the `fusebind-opt` driver imports by name: registers the
compiler's fusion passes (`fuse`) defined in `fusion_passes.py`."""

from fusebind.compiler import fusion_passes as _fusion_passes  # noqa: F401  (import registers the passes)
