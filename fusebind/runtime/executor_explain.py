"""`Executor.explain`'s text: regions, ids, costs, chosen arms, gate decisions, pending
regions and their compile state, index-map prologues, notes (format="dot": explain_dot.py).
Split from executor.py (one job each): it reads the executor (`self` here) and its plan, and
changes nothing but what planning does.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fusebind.dialect.errors import FusebindValueError
from fusebind.runtime.arguments import format_array_type
from fusebind.runtime.arms import describe_decisions
from fusebind.runtime.specialize import describe_dynamic


def explain(self: Any, arrays: Sequence[np.ndarray], format: str = "text") -> str:
    """Regions, ids, costs, chosen arms and why, for these arguments: text
    for a person, or (`format="dot"`) a Graphviz picture (explain_dot.py)."""
    if format == "dot":
        from fusebind.runtime.explain_dot import dot_of

        return dot_of(self, arrays)
    if format != "text":
        raise FusebindValueError(f"explain(format={format!r}): the formats are 'text' and 'dot'")
    plan = self.plan_for(arrays)
    arrays = [np.asarray(a) for a in arrays]
    params = ", ".join(f"{n}: {format_array_type(a.dtype, a.shape)}" for n, a in zip(self.arg_names, arrays))
    lines = [f"fusebind plan for '{self.name}'({params}) on {self.options.backend!r}, "
             f"table generation {plan.generation}",
             (plan.machine or self.machine).describe()]
    if self.dynamic:
        lines.append(describe_dynamic(self.func, self.arg_names))
    if not plan.decisions:
        lines.append("no fused regions: every op runs as a primitive")
    prologues = _prologues(self, arrays, plan.generation)
    for d in plan.decisions:
        first, *rest = describe_decisions([d])
        lines += [first, *_take(prologues, d.name), *rest]
    for d in self.decisions:
        if getattr(d, "verdict", "fused") != "fused":
            lines.append("gate/fusion: " + d.remark().removeprefix("remark: "))
    for name in plan.pending:
        lines.append(f"region @{name}: not fused yet, its ops run as primitives (counted as arm 0): "
                     + _compile_state(self, name))
        lines += _take(prologues, name)
    for canonical, record in self.compiler.records.items():
        if record.error:
            lines.append(f"compile of @{record.name} failed: {record.error}")
        elif record.fused_id:
            how = "loaded from the object cache" if record.from_cache else "compiled"
            lines.append(f"kernel of @{record.name}: {how} in {record.seconds * 1e3:.1f} ms, "
                         f"bound for id {record.fused_id}")
    lines += [f"note: {n}" for n in plan.notes]
    return "\n".join(lines)

def _prologues(self: Any, arrays: Sequence[np.ndarray], generation: int) -> dict[str, list[list[str]]]:
    """Per fused region name (a list: one entry per region of that name, in order), its
    index-map prologues (ops whose `INDEX_MAP` fact is set: slices, gathers, concats, read in
    place by their consumer) as `  prologue: <op.describe(operand names)> (index map, no copy)`.
    An operand is named by the argument it is, else by the op that makes it: an index map by
    its own phrase (a chain reads `slice (slice x[1:, :])[::-1, :]`), another op by its KIND
    and operands (`(reshape of labels)`, `(constant)`)."""
    from fusebind.dialect.fused import RegionOp

    shapes = tuple(a.shape for a in arrays)
    hit = self._optimized.get(shapes)  # the function the plan (of `generation`) was built from
    func = hit[1] if hit is not None and hit[0] == generation else self.optimized_func(self.session.table, shapes)
    names = {id(a): n for a, n in zip(func.body.blocks[0].args, self.arg_names)}
    for region in func.walk():  # a region's block argument stands for its operand
        if isinstance(region, RegionOp):
            names.update({id(a): v for a, v in zip(region.body.blocks[0].args, region.operands)})

    def name_of(value: Any, depth: int = 0) -> str:
        named = names.get(id(value))
        if named is not None:
            return named if isinstance(named, str) else name_of(named, depth)
        owner = getattr(value, "owner", None)
        if getattr(owner, "INDEX_MAP", False):
            return f"({owner.describe([name_of(v, depth) for v in owner.operands])})"
        kind = getattr(owner, "KIND", getattr(owner, "name", "?"))
        if not getattr(owner, "operands", ()):
            return f"({kind})"
        if depth:  # one level of other ops is enough to say where a value comes from
            return f"({kind} result)"
        return f"({kind} of {', '.join(name_of(v, depth + 1) for v in owner.operands)})"

    found: dict[str, list[list[str]]] = {}
    for region in func.walk():
        if isinstance(region, RegionOp):
            found.setdefault(region.region_name, []).append([
                f"  prologue: {op.describe([name_of(v) for v in op.operands])} (index map, no copy)"
                for op in region.body.blocks[0].ops if getattr(op, "INDEX_MAP", False)])
    return found


def _take(prologues: dict[str, list[list[str]]], name: str) -> list[str]:
    """The prologue lines of the next region called `name` (none when there is no such region)."""
    queue = prologues.get(name)
    return queue.pop(0) if queue else []


def _compile_state(self: Any, name: str) -> str:
    """Where the kernel of the pending region `name` is (for `explain`)."""
    records = [r for r in self.compiler.records.values() if r.name == name]
    if any(r.error for r in records):
        return "its compile failed (see below)"
    if records and not any(r.fused_id for r in records):
        return ("compiling in the background; the next call after adoption runs it fused"
                if self.compiler.background else "compiling")
    return "queued for compilation"
