"""The plan of an executor as a Graphviz (DOT) picture: `Executor.explain(arrays, format="dot")`.

Owns `dot_of(executor, arrays)`. Being written (issue 18, "Pictures").
"""

from __future__ import annotations

from typing import Any, Sequence


def dot_of(executor: Any, arrays: Sequence[Any]) -> str:
    """The DOT text of `executor`'s plan for `arrays`."""
    raise NotImplementedError("explain(format='dot') is being written (issue 18)")
