"""Module-level functions test_pickle.py pickles by reference (its child process imports this
module by name, as a worker imports a user's module)."""

import numpy as np

import fusebind as fb


@fb.jit
def row_tanh(x, y):
    """One fused region (arm-0 static kernels before it compiles)."""
    return np.tanh(x * y + 1.0).sum(axis=-1)


@fb.jit
def shifted(x):
    """Automatic dynamic dims: a second size of axis 0 makes that dim dynamic."""
    return np.exp(x - 0.5) * 2.0


def plain(x):
    """A plain module-level function: `fb.jit(plain)` is pickled by value (its function by reference)."""
    return np.sqrt(x * x + 1.0)
