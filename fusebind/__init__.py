"""fusebind: capability-gated fusion of tensor programs.

Public API is re-exported here as the packages land (see README.md).
"""

__version__ = "0.1.0"
