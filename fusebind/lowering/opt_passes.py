"""Plugin module the `fusebind-opt` driver imports by name: registers the
lowering passes defined in `passes.py`."""

from fusebind.lowering import passes as _passes  # noqa: F401  (import registers the passes)
