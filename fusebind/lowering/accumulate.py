"""Accurate float sums: `reduce_sum` and `reduce_mean` as blocked accumulations.

Owns: `is_blocked` (which reductions are emitted here), `blocked_sum` and
`blocked_map_sum` (the emission; the second also stores the summed row, as
`map_reduce`), the block sizes, the partials and their folds; the IR plumbing they share
(slices, loops, fills) is `accumulate_ir.py`'s. The bound and its derivation: docs/REDUCTIONS.md.

Why: one `linalg.generic` reduction becomes one loop, and LLVM's vectorizer gives it
VF x IC lane accumulators that each add n / (VF * IC) values in sequence: the error
grew like n/32 ulps (2.5e-3 relative at 2^24 float32; numpy's pairwise sum: 1e-7).

For the reduced axes A of the iteration space S and k = max(A):
- an `scf.for` over every other reduced axis (size-1 slices there): each index of those
  axes is a partial sum of its own;
- along k, when k is the innermost axis and the body vectorizes ("vector" mode): blocks
  in which no lane accumulator adds more than LANE_CHAIN (16) values whatever the
  interleave count IC LLVM picks (16 * VF elements); light bodies, where IC is the
  maximum 4, get 4 times longer blocks, and for f32 partials LIGHT_LANE_CHAIN (32) values
  per lane (32 * VF * 4: 1024 float32 on AVX2); then the rest
  that is a multiple of 4 * VF (so LLVM's vector loop leaves no scalar remainder to chain
  onto a lane); then the last < 4 * VF elements: float32 sums them in f64, float64 in
  blocks of 8;
- otherwise ("chain" mode: k is not innermost, e.g. column sums vectorized across the
  output, or a body with a scalar libm call): blocks of 16 indices along k, 32 from a
  reduced length of 512 and 64 from 2^17 (CHAIN_BLOCKS; f64 partials half that);
- each block sums into a fresh partial (f32 for f16/f32 results, f64 for f64), folded
  into the total: f32 partials by an f64 add (2^-53 per fold), f64 partials by Neumaier's
  compensated add (total W, compensation C).
Elementwise producers nothing else uses are inlined into each block (`exprs.Expr`), so a
block slices the leaves it reads, never a temporary of the whole operand. A one-value
result (a full sum, one per row) keeps its total in f64 scalars and is built with
`tensor.from_elements`: linalg's fusion cannot then pull the fold, the 1/n and the cast
into the loop that consumes it (that made layernorm's `x - mean` loop scalar).
Must not: run MLIR; change integer sums or max/min/prod (exact or order-independent
already; they stay in `emitter.py`); import `emit`, `emitter` or `rowwise`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from fusebind.dialect.types import ELEMENTS
from fusebind.lowering.accumulate_ir import AccumulationIR, State
from fusebind.lowering.exprs import Expr, build, leaves
from fusebind.lowering.linalg_types import (ELEMENT_BYTES, Dim, Value, element_name, ints, op_attr, op_kind, storage,
                                            ttype)
from fusebind.lowering.scalar_text import ScalarEmitError, TextScalarBuilder, is_float

#: Indices per partial in chain mode (a partial adds them in sequence), by the least n (the
#: reduced length) that allows them: (n at least, f32 partials, f64 partials). A chain of c
#: values costs c - 1 roundings, +1 for the final one (+2 for the compensated f64 total),
#: within 4 log2(n) (docs/REDUCTIONS.md).
CHAIN_BLOCKS = ((1 << 17, 64, 32), (1 << 9, 32, 16), (0, 16, 8))
#: Values one lane accumulator adds per block in vector mode, whatever LLVM's interleave
#: count (IC >= 1): blocks of 16 * VF elements.
LANE_CHAIN = 16
#: The same for light bodies with f32 partials, where IC = MAX_INTERLEAVE: blocks of
#: 32 * VF * 4 elements (1024 float32 on AVX2). f64 partials keep LANE_CHAIN (their
#: compensated fold costs two roundings more). Each keeps the rounding count within the
#: bound at every n (docs/REDUCTIONS.md).
LIGHT_LANE_CHAIN = 32
#: Scalar ops (no calls) in a "light" body: LLVM keeps MAX_INTERLEAVE accumulators for it
#: (its interleave count for a vectorized reduction is limited by register pressure only),
#: so its blocks can be MAX_INTERLEAVE times longer at the same chain length per lane.
LIGHT_BODY_OPS = 3
#: Static blocks emitted one after another instead of in an `scf.for` (light bodies only:
#: the loop's exit and re-entry cost more than the straight-line code).
STRAIGHT_BLOCKS = 4
#: The most vectors LLVM's x86 loop vectorizer interleaves (X86TTIImpl::getMaxInterleaveFactor).
MAX_INTERLEAVE = 4
#: `math` ops LLVM vectorizes without a vector math library; any other `math.*` is a scalar libm call.
VECTOR_MATH = frozenset({"sqrt", "rsqrt", "absf", "absi", "fma", "floor", "ceil", "round", "roundeven", "trunc",
                         "copysign"})


def is_blocked(op: Any) -> bool:
    """A float sum or mean over at least one axis: emitted by `blocked_sum`."""
    if op_kind(op) not in ("reduce_sum", "reduce_mean") or len(op.results) != 1 or not op.operands:
        return False
    try:
        if not is_float(element_name(op.results[0].type)):
            return False
    except ScalarEmitError:
        return False
    rank = len(op.operands[0].type.get_shape()) if hasattr(op.operands[0].type, "get_shape") else 0
    attr = op_attr(op, "axes")
    return rank > 0 and (attr is None or bool(ints(attr)))


def _scalar_call(line: str) -> bool:
    """A body line that LLVM cannot vectorize: a `math.*` op it lowers to a libm call."""
    rhs = line.partition(" = ")[2]
    return rhs.startswith("math.") and rhs[5:].split(" ", 1)[0] not in VECTOR_MATH


def vector_lanes(elem: str) -> int:
    """Lanes of one vector register of `elem` on this host (512-bit with AVX-512: codegen.py)."""
    from fusebind.lowering.codegen import host_target

    return (64 if host_target().has_avx512 else 32) // ELEMENT_BYTES[elem]


#: narrow floats (f16, bf16) are summed in f32 partials, and an inlined expression over them computes
#: in f32 too (`_widened`): one rounding, where the kernel returns the value (emit_dispatch.emit_op)
_NARROW = frozenset(n for n, e in ELEMENTS.items() if e.kind == "float" and e.bits < 32)


def _widened(src: "Expr | Value") -> "Expr | Value":
    """`src` with every narrow-float Expr computed in f32 (its leaves are widened where they are
    loaded: Emitter._bind_args), so no op of the sum's operand rounds to the narrow type."""
    if isinstance(src, Value):
        return src
    return replace(src, args=tuple(_widened(a) for a in src.args), elem="f32" if src.elem in _NARROW else src.elem)


def blocked_sum(em: Any, op: Any, src: "Expr | Value", out_elem: str, axis_shift: int = 0) -> Value:
    """Emit the float sum/mean `op` of `src` (an Expr or an emitted value); its result.
    `axis_shift`: leading dims `src` lacks relative to the op's operand (row-wise emission)."""
    return _Blocked(em, op, src, out_elem, axis_shift, mapped=False).emit()[1]


def blocked_map_sum(em: Any, op: Any, src: Expr, out_elem: str, axis_shift: int = 0) -> tuple[Value, Value]:
    """`blocked_sum` that also stores the value of `src` (as `map_reduce`: one pass over the
    row computes, stores and sums it). Returns (stored, reduced)."""
    stored, reduced = _Blocked(em, op, src, out_elem, axis_shift, mapped=True).emit()
    if stored is None:
        raise ScalarEmitError(f"{op.name}: the stored value of a map-reduce was not emitted")
    return stored, reduced


class _Blocked(AccumulationIR):
    """One blocked sum: its block sizes and partials, chosen at construction; `emit` writes it."""

    def __init__(self, em: Any, op: Any, src: "Expr | Value", out_elem: str, axis_shift: int, mapped: bool):
        src = _widened(src)
        self.em, self.src, self.out_elem, self.mapped = em, src, out_elem, mapped
        self.S: list[Dim] = list(src.shape)
        self.x = Value("", self.S, src.elem)
        self.r = em._reduction_plan(op, self.x, out_elem, axis_shift)
        self.rank = len(self.S)
        self.k = max(self.r.axes)
        self.outer = [a for a in self.r.axes if a != self.k]
        self.part_elem = "f64" if out_elem == "f64" else "f32"
        self.compensated = self.part_elem == "f64"
        self.leaves = list(leaves(src, {}).values())
        self.depth = 0  # scf.for / scf.if bodies being emitted around the current op (see `_fold`)
        # One value per output (a full reduction, one per row): the total is carried as f64
        # scalars and the result built with tensor.from_elements, so linalg's fusion cannot
        # pull the fold, the 1/n and the cast into the loop that consumes the result.
        self.scalar = all(d == 1 for d in self.r.out_shape)
        self.w_t = "f64" if self.scalar else ttype(self.r.out_shape, "f64")
        self.e_t = ttype(self.S, src.elem)
        vf = vector_lanes(self.part_elem)
        body = self._trial_body()
        self.vector = self.k == self.rank - 1 and not any(_scalar_call(line) for line in body)
        self.light = self.vector and len(body) <= LIGHT_BODY_OPS and not any("call" in line for line in body)
        chain = LIGHT_LANE_CHAIN if self.part_elem == "f32" else LANE_CHAIN
        self.block = (chain * vf * MAX_INTERLEAVE if self.light else LANE_CHAIN * vf) if self.vector else 0
        self.grain = MAX_INTERLEAVE * vf

    def _trial_body(self) -> list[str]:
        """The scalar ops of the summed expression (a trial build, thrown away)."""
        b = TextScalarBuilder(self.em.fresh, self.em.fastmath)
        build(b, self.src, {v.name: b.bind(self.em.fresh("leaf"), v.elem) for v in self.leaves})
        return b.lines

    # -- driver ---------------------------------------------------------
    def emit(self) -> tuple[Value | None, Value]:
        em = self.em
        zero = self._zero_total()
        state: State = {"w": zero}
        if self.compensated:
            state["c"] = self._zero_total()
        if self.mapped:
            state["e"] = em.empty(self.S, self.src.elem)
        state = self._outer(0, {}, state)
        stored = Value(state["e"], list(self.S), self.src.elem) if self.mapped else None
        if self.scalar:
            return stored, self._scalar_result(state)
        total = Value(state["w"], list(self.r.out_shape), "f64")
        if self.compensated:
            total = em.elementwise(_Binary("neumaier", _neumaier_total),
                                   [total, Value(state["c"], list(self.r.out_shape), "f64")], "f64")
        if self.r.base == "mean":
            total = em._scale_by_count(total, self.x, self.r.axes)
        return stored, em._map_unary(total, lambda bb, v: _cast_result(bb, v, self.out_elem), self.out_elem)

    def _scalar_result(self, state: State) -> Value:
        """The result of a one-value sum from its scalar total: compensation, 1/n, cast."""
        em = self.em
        b = TextScalarBuilder(em.fresh)
        total = b.bind(state["w"], "f64")
        if self.compensated:
            total = _neumaier_total(b, total, b.bind(state["c"], "f64"))
        if self.r.base == "mean":
            total = b.mul(total, self._inverse_count(b))
        value = _cast_result(b, total, self.out_elem)
        em.lines.extend(b.lines)
        name = em.fresh("r")
        em.lines.append(f"{name} = tensor.from_elements {value} : {ttype(self.r.out_shape, self.out_elem)}")
        return Value(name, list(self.r.out_shape), self.out_elem)

    def _inverse_count(self, b: TextScalarBuilder) -> str:
        """1/n in f64 for the reduced element count n (NaN for n = 0, as numpy's mean)."""
        sizes = [self.S[a] for a in self.r.axes]
        if all(isinstance(d, int) for d in sizes):
            n = 1
            for d in sizes:
                n *= int(d)
            return b.constant(1.0 / n if n else float("nan"), "f64")
        count = self._index(1)
        for d in sizes:
            count = self._ix("muli", count, d)
            count = self._index(count)
        as_int = b._op(f"arith.index_cast {count} : index to i64", "i64")
        as_float = b._op(f"arith.sitofp {as_int} : i64 to f64", "f64")
        return b.div(b.constant(1.0, "f64"), as_float)

    def _outer(self, i: int, spec: dict[int, tuple[Dim, Dim]], state: State) -> State:
        if i == len(self.outer):
            return self._along_k(spec, state)
        j = self.outer[i]
        if self.S[j] == 1:
            return self._outer(i + 1, spec, state)
        return self._loop(0, self.S[j], 1, state, lambda iv, st: self._outer(i + 1, {**spec, j: (iv, 1)}, st))

    def _along_k(self, spec: dict[int, tuple[Dim, Dim]], state: State) -> State:
        n = self.S[self.k]
        if not self.vector:
            size = self._chain_block(n)
            if not isinstance(n, int):  # one loop; its last partial is the short one
                return self._blocks(spec, state, 0, n, size, ragged=True)
            main_end = self._ix("muli", self._ix("divui", n, size), size)
            state = self._blocks(spec, state, 0, main_end, size)
            return self._part_at(spec, state, main_end, self._ix("subi", n, main_end))
        tail = self._ix("remui", n, self.grain)
        tail_at = self._ix("subi", n, tail)
        if isinstance(n, int):
            main_end = (n // self.block) * self.block
            state = self._blocks(spec, state, 0, main_end, self.block)
            state = self._part_at(spec, state, main_end, tail_at - main_end)
        else:  # one loop (one copy of the body to compile): blocks, the last one shorter
            state = self._blocks(spec, state, 0, tail_at, self.block, ragged=True)
        if not self.compensated:
            return self._part_at(spec, state, tail_at, tail, wide=True)
        return self._blocks(spec, state, tail_at, n, 8, ragged=True)

    def _chain_block(self, n: Dim) -> Dim:
        """Chain mode's indices per partial for the reduced length `n` (chosen at run time when
        `n` is dynamic): longer chains only where the bound allows them."""
        col = 1 if self.part_elem == "f32" else 2
        if isinstance(n, int):
            return next(row[col] for row in CHAIN_BLOCKS if n >= row[0])
        size = self._index(CHAIN_BLOCKS[-1][col])
        for row in reversed(CHAIN_BLOCKS[:-1]):
            big = self.em.fresh("cb")
            self.em.lines.append(f"{big} = arith.cmpi uge, {n}, {self._index(row[0])} : index")
            pick = self.em.fresh("cb")
            self.em.lines.append(f"{pick} = arith.select {big}, {self._index(row[col])}, {size} : index")
            size = pick
        return size

    def _blocks(self, spec: dict[int, tuple[Dim, Dim]], state: State, lo: Dim, hi: Dim, size: Dim,
                ragged: bool = False) -> State:
        """Partials of `size` elements along k over [lo, hi): a multiple of `size` long, or with
        `ragged` any length, the last partial taking what is left (`min(size, hi - b)`)."""
        if isinstance(lo, int) and isinstance(hi, int) and isinstance(size, int):
            count = -(-(hi - lo) // size) if ragged else (hi - lo) // size
            if count <= 0:
                return state
            if count == 1 or (self.light and count <= STRAIGHT_BLOCKS):
                for i in range(count):
                    at = lo + i * size
                    state = self._part({**spec, self.k: (at, min(size, hi - at))}, state)
                return state

        def body(iv: str, st: State) -> State:
            length = self._ix("minui", size, self._ix("subi", hi, iv)) if ragged else size
            return self._part({**spec, self.k: (iv, length)}, st)

        return self._loop(lo, hi, size, state, body)

    def _part_at(self, spec: dict[int, tuple[Dim, Dim]], state: State, at: Dim, size: Dim,
                 wide: bool = False) -> State:
        """A partial of `size` elements at `at` along k; a dynamic size runs only when nonzero
        (an empty part still costs its setup: a few percent of a 1024-long row)."""
        if size == 0:
            return state
        if isinstance(size, int):
            return self._part({**spec, self.k: (at, size)}, state, wide)
        cond = self.em.fresh("nz")
        self.em.lines.append(f"{cond} = arith.cmpi ne, {size}, {self.em.index(0)} : index")
        return self._if(cond, state, lambda st: self._part({**spec, self.k: (at, size)}, st, wide))

    # -- one partial ----------------------------------------------------
    def _part(self, spec: dict[int, tuple[Dim, Dim]], state: State, wide: bool = False) -> State:
        """The slice `spec` of the sum: into a fresh partial folded into the total, or (`wide`)
        straight into the f64 total."""
        s_part = [spec[j][1] if j in spec else d for j, d in enumerate(self.S)]
        leaves = [self._slice(v, spec) for v in self.leaves]
        e_slice = self._slice(Value(state["e"], self.S, self.src.elem), spec) if self.mapped else None
        acc_elem = "f64" if wide else self.part_elem
        into_total = wide and not self.scalar
        acc_init = state["w"] if into_total else self._fill(0.0, acc_elem)
        stored, acc = self._generic(leaves, s_part, acc_init, acc_elem, e_slice)
        new = dict(state)
        if into_total:
            new["w"] = acc
        elif self.scalar:
            new.update(self._fold_scalar(state, acc, acc_elem))
        else:
            new.update(self._fold(state, acc))
        if e_slice is not None and stored is not None:
            new["e"] = self._insert(stored, e_slice, state["e"], spec)
        return new

    def _generic(self, leaves: list[Value], s_part: list[Dim], acc_init: str, acc_elem: str,
                 e_slice: Value | None) -> tuple[str | None, str]:
        em = self.em
        dims = ", ".join(f"d{j}" for j in range(self.rank))
        ident = f"affine_map<({dims}) -> ({dims})>"
        maps = [self._leaf_map(v, s_part) for v in leaves] + ([ident] if e_slice else []) + [self.r.out_map]
        b = TextScalarBuilder(em.fresh, em.fastmath)
        params, vals = em._bind_args(b, leaves)
        root = build(b, self.src, {v.name: val for v, val in zip(self.leaves, vals)})
        acc = b.bind(em.fresh("a"), acc_elem)
        combined = b.combine_reassoc("sum", acc, b.cast(root, acc_elem))
        em.called |= b.called
        acc_t = ttype(self.r.out_shape, acc_elem)
        outs, out_types, block_args, yields = [], [], [f"{p}: {storage(v.elem)}" for p, v in zip(params, leaves)], []
        if e_slice is not None:
            o = em.fresh("o")
            outs.append(e_slice.name)
            out_types.append(ttype(e_slice.shape, e_slice.elem))
            block_args.append(f"{o}: {storage(e_slice.elem)}")
            yields.append((root, storage(e_slice.elem)))
        outs.append(acc_init)
        out_types.append(acc_t)
        block_args.append(f"{acc}: {storage(acc_elem)}")
        yields.append((combined, storage(acc_elem)))
        names = [em.fresh("r") for _ in outs]
        iters = ", ".join(f'"{i}"' for i in self.r.iters)
        em.lines.append(f"{', '.join(names)} = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
                        f"iterator_types = [{iters}]}} ins({', '.join(v.name for v in leaves)} : "
                        f"{', '.join(ttype(v.shape, v.elem) for v in leaves)}) "
                        f"outs({', '.join(outs)} : {', '.join(out_types)}) {{")
        em.lines.append(f"^bb0({', '.join(block_args)}):")
        em.lines.extend("  " + line for line in b.lines)
        em.lines.append(f"  linalg.yield {', '.join(y for y, _ in yields)} : {', '.join(t for _, t in yields)}")
        result_types = ", ".join(out_types)
        em.lines.append(f"}} -> ({result_types})" if len(outs) > 1 else f"}} -> {result_types}")
        return (names[0] if e_slice is not None else None), names[-1]

    def _leaf_map(self, v: Value, s_part: list[Dim]) -> str:
        off = self.rank - len(v.shape)
        dims = ", ".join(f"d{j}" for j in range(self.rank))
        res = ["0" if (d == 1 and s_part[i + off] != 1) else f"d{i + off}" for i, d in enumerate(v.shape)]
        return f"affine_map<({dims}) -> ({', '.join(res)})>"

    def _fold(self, state: State, partial: str) -> State:
        """Fold a partial (out-shaped, `part_elem`) into the total: in place (reading its `outs`,
        the iter_arg, as bufferization needs for the yield) inside a loop or `scf.if` body; pure
        at the top level, where fusion takes it with the cast into the sum's consumer. Fused
        into one that broadcasts the sum (`x - x.sum(0, keepdims=True)`), an in-place fold runs
        once per broadcast row: row i got i extra partials (`pipeline.fusion_hazards`)."""
        rank = len(self.r.out_shape)
        dims = ", ".join(f"d{j}" for j in range(rank))
        ident = f"affine_map<({dims}) -> ({dims})>"
        p_t = ttype(self.r.out_shape, self.part_elem)
        em = self.em
        p, s, c = em.fresh("p"), em.fresh("s"), em.fresh("c")
        b = TextScalarBuilder(em.fresh)
        b.bind(p, self.part_elem)
        b.bind(s, "f64")
        totals = [state["w"], state["c"]] if self.compensated else [state["w"]]
        if not self.compensated:
            yields = [b.add(s, b.cast(p, "f64"))]
        else:
            yields = list(_neumaier_step(b, s, b.bind(c, "f64"), p))
        in_place = self.depth > 0
        total_args = [f"{s}: f64", f"{c}: f64"][:len(totals)]
        if in_place:
            ins, outs, args = [partial], totals, total_args
        else:
            ins, outs = [partial, *totals], [em.empty(self.r.out_shape, "f64") for _ in totals]
            args = total_args + [f"{em.fresh('o')}: f64" for _ in totals]
        names = [em.fresh("r") for _ in outs]
        iters = ", ".join(['"parallel"'] * rank)
        w_types = ", ".join([self.w_t] * len(outs))
        in_types = ", ".join([p_t] + [self.w_t] * (len(ins) - 1))
        em.lines.append(f"{', '.join(names)} = linalg.generic {{indexing_maps = [{', '.join([ident] * (len(ins) + len(outs)))}], "
                        f"iterator_types = [{iters}]}} ins({', '.join(ins)} : {in_types}) outs({', '.join(outs)} : {w_types}) {{")
        em.lines.append(f"^bb0({p}: {self.part_elem}, {', '.join(args)}):")
        em.lines.extend("  " + line for line in b.lines)
        em.lines.append(f"  linalg.yield {', '.join(yields)} : {', '.join(['f64'] * len(yields))}")
        em.lines.append(f"}} -> ({w_types})" if len(outs) > 1 else f"}} -> {w_types}")
        return dict(zip(["w", "c"], names))

    def _fold_scalar(self, state: State, partial: str, elem: str) -> State:
        """Fold the one-element partial tensor `partial` (of `elem`) into the scalar total."""
        em = self.em
        b = TextScalarBuilder(em.fresh)
        zeros = ", ".join(em.index(0) for _ in self.r.out_shape)
        p = b._op(f"tensor.extract {partial}[{zeros}] : {ttype(self.r.out_shape, elem)}", elem)
        s = b.bind(state["w"], "f64")
        if not self.compensated:
            new = {"w": b.add(s, b.cast(p, "f64"))}
        else:
            t, c = _neumaier_step(b, s, b.bind(state["c"], "f64"), p)
            new = {"w": t, "c": c}
        em.lines.extend(b.lines)
        return new


def _neumaier_step(b: TextScalarBuilder, s: str, c: str, p: str) -> tuple[str, str]:
    """Neumaier's compensated add of `p` (f64) to the total `s` with compensation `c`:
    t = s + p; c += (|s| >= |p|) ? (s - t) + p : (p - t) + s. No fastmath flags: LLVM must
    not reassociate these (it would fold the correction to 0)."""
    t = b.add(s, p)
    big = b._op(f"arith.cmpf oge, {b.abs(s)}, {b.abs(p)} : f64", "i1")
    lost = b._op(f"arith.select {big}, {b.add(b.sub(s, t), p)}, {b.add(b.sub(p, t), s)} : f64", "f64")
    return t, b.add(c, lost)


def _neumaier_total(b: TextScalarBuilder, s: str, c: str) -> str:
    """s + c, except where c is 0 (keeps the sign of a zero s) or s is infinite (c is then NaN)."""
    zero, inf = b.constant(0.0, "f64"), b.constant(float("inf"), "f64")
    exact = b._op(f"arith.cmpf oeq, {c}, {zero} : f64", "i1")
    infinite = b._op(f"arith.cmpf oeq, {b.abs(s)}, {inf} : f64", "i1")
    keep = b._op(f"arith.ori {exact}, {infinite} : i1", "i1")
    return b._op(f"arith.select {keep}, {s}, {b.add(s, c)} : f64", "f64")


def _cast_result(b: TextScalarBuilder, v: str, out_elem: str) -> str:
    """The f64 total as the result type (f16 through f32: f64 -> f16 is a compiler-rt call on x86)."""
    if out_elem == "f16":
        return b.cast(b.cast(v, "f32"), "f16")
    return b.cast(v, out_elem)


@dataclass(frozen=True)
class _Binary:
    """An elementwise op given by its scalar body (for `Emitter.elementwise`)."""

    name: str
    body: Callable[[TextScalarBuilder, str, str], str]

    def scalar_body(self, b: TextScalarBuilder, x: str, y: str) -> str:
        return self.body(b, x, y)
