"""Arm 0 as IR: inline a `fused.region` into its parent block (its primitive body).

The one implementation behind `strip-fused` (compiler/passes.py), `decompose-fused`
(lowering/passes.py) and the runtime's arm-0 fallback, re-exported by
`fusebind.lowering` as `inline_region`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class InlineResult:
    """Outcome of `inline_region`: whether it inlined, and why not if it did not."""

    inlined: bool
    diagnostic: str | None = None


def inline_region(region: Any) -> InlineResult:
    """Arm 0: replace `region` (in its parent block) by its primitive body.

    Total: a region it cannot inline (no parent block, wrong arity, a body that
    is not a single block ending in a yield) is left unchanged and the result
    carries a diagnostic saying why. It raises only for a bug (every malformed
    input it can be given is refused above by name).
    """
    name = getattr(region, "name", type(region).__name__)
    if name != "fused.region":
        return InlineResult(False, f"inline_region: expected a fused.region op, got {name}")
    parent = region.parent_block()
    if parent is None:
        return InlineResult(False, "inline_region: the region is detached (no parent block); insert it first")
    if len(region.regions) != 1 or len(region.regions[0].blocks) != 1:
        return InlineResult(False, "inline_region: fused.region must have exactly one single-block region")
    block = region.regions[0].blocks[0]
    term = block.last_op
    if term is None or term.name != "fused.yield":
        return InlineResult(False, "inline_region: the body does not end in fused.yield")
    if len(block.args) != len(region.operands):
        return InlineResult(False, f"inline_region: {len(region.operands)} operands but "
                            f"{len(block.args)} block arguments")
    if len(term.operands) != len(region.results):
        return InlineResult(False, f"inline_region: yield has {len(term.operands)} values, "
                            f"the region declares {len(region.results)} results")
    mapping: dict[Any, Any] = dict(zip(block.args, region.operands))
    clones = []
    for op in block.ops:
        if op is term:
            break
        clones.append(op.clone(value_mapper=mapping))
    # Only mutate once every clone exists: a failure above leaves the IR unchanged.
    for clone in clones:
        parent.insert_op_before(clone, region)
    for result, value in zip(region.results, term.operands):
        result.replace_all_uses_with(mapping.get(value, value))
    parent.erase_op(region)
    return InlineResult(True, None)
