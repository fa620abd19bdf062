"""The IR plumbing of a blocked float sum (`accumulate.py`): index arithmetic, fills, slices, loops.

Owns: `AccumulationIR`, the base of `accumulate._Blocked`, with what every step of a blocked sum
emits the same way: `_ix` (index arithmetic, folded when both sides are static) and `_index`; the
zero total and `linalg.fill`ed partials (`_zero_total`, `_fill`); `tensor.extract_slice` /
`tensor.insert_slice` of a value at the block being summed (`_slice`, `_insert`); and `scf.for` /
`scf.if` carrying the sum's state (`_loop`, `_if`, `_nested`, which counts the nesting depth that
`_fold` reads). A `State` maps "w" (the total), "c" (its compensation) and "e" (the stored value of
a map-reduce) to SSA names.
Must not: choose block sizes, partial types or folds (that is `accumulate.py`); import `emit`,
`emitter` or `rowwise`; import `mlir`.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from fusebind.lowering.linalg_types import Dim, Value, storage, ttype
from fusebind.lowering.scalar_text import TextScalarBuilder

State = dict[str, str]  # "w" total, "c" compensation (f64 partials), "e" stored value


class AccumulationIR:
    """Emission helpers over the iteration space `S` of one blocked sum (set by the subclass)."""

    em: Any  # the Emitter whose lines and names this appends to
    S: list[Dim]  # the iteration space (the summed value's dims)
    rank: int
    r: Any  # the reduction plan (`Emitter._reduction_plan`): out_shape, axes, maps
    scalar: bool  # one value per output: the total is f64 scalars, not a tensor
    w_t: str  # the type of the total ("f64" or an f64 tensor type)
    e_t: str  # the type of the stored value of a map-reduce
    depth: int  # scf.for / scf.if bodies open around the current op

    def _zero_total(self) -> str:
        if not self.scalar:
            return self._fill(0.0, "f64")
        b = TextScalarBuilder(self.em.fresh)
        zero = b.constant(0.0, "f64")
        self.em.lines.extend(b.lines)
        return zero

    def _fill(self, value: float, elem: str) -> str:
        em = self.em
        b = TextScalarBuilder(em.fresh)
        init = b.constant(value, elem)
        em.lines.extend(b.lines)
        empty = em.empty(self.r.out_shape, elem)
        filled = em.fresh("f")
        t = ttype(self.r.out_shape, elem)
        em.lines.append(f"{filled} = linalg.fill ins({init} : {storage(elem)}) outs({empty} : {t}) -> {t}")
        return filled

    def _slice(self, v: Value, spec: dict[int, tuple[Dim, Dim]]) -> Value:
        """`v` (aligned to the iteration space from the right) at the slices `spec` of its
        dims; dims `v` broadcasts along are kept whole."""
        off = self.rank - len(v.shape)
        offsets: list[Dim] = []
        sizes: list[Dim] = []
        changed = False
        for i, d in enumerate(v.shape):
            j = i + off
            if j in spec and not (d == 1 and self.S[j] != 1) and spec[j] != (0, d):
                offsets.append(spec[j][0])
                sizes.append(spec[j][1])
                changed = True
            else:
                offsets.append(0)
                sizes.append(d)
        if not changed:
            return v
        name = self.em.fresh("sl")
        self.em.lines.append(f"{name} = tensor.extract_slice {v.name}[{_list(offsets)}] [{_list(sizes)}] "
                             f"[{_list([1] * len(sizes))}] : {ttype(v.shape, v.elem)} to {ttype(sizes, v.elem)}")
        return Value(name, sizes, v.elem)

    def _insert(self, part: str, part_v: Value, full: str, spec: dict[int, tuple[Dim, Dim]]) -> str:
        if part_v.name == full:  # the slice was the whole value
            return part
        offsets = [spec[j][0] if j in spec and spec[j] != (0, d) else 0 for j, d in enumerate(self.S)]
        name = self.em.fresh("ins")
        self.em.lines.append(f"{name} = tensor.insert_slice {part} into {full}[{_list(offsets)}] "
                             f"[{_list(part_v.shape)}] [{_list([1] * self.rank)}] : "
                             f"{ttype(part_v.shape, part_v.elem)} into {self.e_t}")
        return name

    def _ix(self, op: str, a: Dim, b: Dim) -> Dim:
        """Index arithmetic, folded when both sides are static."""
        if isinstance(a, int) and isinstance(b, int):
            return {"addi": int.__add__, "subi": int.__sub__, "muli": int.__mul__, "divui": int.__floordiv__,
                    "remui": int.__mod__, "minui": min}[op](a, b)
        name = self.em.fresh("n")
        self.em.lines.append(f"{name} = arith.{op} {self._index(a)}, {self._index(b)} : index")
        return name

    def _index(self, d: Dim) -> str:
        return self.em.index(d) if isinstance(d, int) else d

    def _if(self, cond: str, state: State, body: Callable[[State], State]) -> State:
        """`scf.if cond` whose then-branch is `body(state)`; else the state passes through."""
        em = self.em
        keys = list(state)
        types = [self.e_t if k == "e" else self.w_t for k in keys]
        res = em.fresh("if")
        head = f"{res}:{len(keys)}" if len(keys) > 1 else res
        em.lines.append(f"{head} = scf.if {cond} -> ({', '.join(types)}) {{")
        new = self._nested(body, dict(state))
        em.lines.append(f"scf.yield {', '.join(new[k] for k in keys)} : {', '.join(types)}")
        em.lines.append("} else {")
        em.lines.append(f"scf.yield {', '.join(state[k] for k in keys)} : {', '.join(types)}")
        em.lines.append("}")
        return {k: (f"{res}#{i}" if len(keys) > 1 else res) for i, k in enumerate(keys)}

    def _nested(self, body: Callable[[State], State], state: State) -> State:
        """`body(state)` emitted inside a loop or `scf.if` body (`_fold` updates in place there)."""
        self.depth += 1
        try:
            return body(state)
        finally:
            self.depth -= 1

    def _loop(self, lo: Dim, hi: Dim, step: Dim, state: State,
              body: Callable[[str, State], State]) -> State:
        """`scf.for` carrying `state`; `body(iv, state)` emits one iteration."""
        em = self.em
        keys = list(state)
        types = [self.e_t if k == "e" else self.w_t for k in keys]
        iv, res = em.fresh("b"), em.fresh("l")
        carried = {k: em.fresh("it") for k in keys}
        head = f"{res}:{len(keys)}" if len(keys) > 1 else res
        em.lines.append(f"{head} = scf.for {iv} = {self._index(lo)} to {self._index(hi)} step {self._index(step)} "
                        f"iter_args({', '.join(f'{carried[k]} = {state[k]}' for k in keys)}) "
                        f"-> ({', '.join(types)}) {{")
        new = self._nested(lambda st: body(iv, st), carried)
        em.lines.append(f"scf.yield {', '.join(new[k] for k in keys)} : {', '.join(types)}")
        em.lines.append("}")
        return {k: (f"{res}#{i}" if len(keys) > 1 else res) for i, k in enumerate(keys)}


def _list(items: Iterable[Dim]) -> str:
    return ", ".join(str(d) for d in items)
