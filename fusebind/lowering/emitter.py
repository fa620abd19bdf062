"""The op emitters: one prim op -> `linalg` text on tensors, appended to an `Emitter`.

Owns: `Emitter` (the lines of a kernel body, fresh SSA names, the `index` constants and the
fast-math functions called), with one method per op category: elementwise ops (their
`scalar_body`) as `linalg.generic` with broadcasting maps (`elementwise`, and `elementwise_into`,
which overwrites a dead operand); reductions as a fill + a reduction `linalg.generic`
(`reduction`, and `map_reduce`, an elementwise op and its reduction in one loop); `transpose`,
`reshape`, `broadcast_to`, `slice` (a subview, and a reversing map that fusion folds into its consumer),
`constant` and `matmul`. `emit_dispatch.emit_op` dispatches one op to its method (and float sums
and means to `accumulate.py`, blocked and accurate).

Must not: write a kernel's arguments or outputs, or check sizes (that is the driver, `emit.py`);
plan row-wise loops (`rowwise.py`); import `emit` or `rowwise`; import `mlir`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from fusebind.dialect.prim_structured import TransposeOp, reduced_shape
from fusebind.dialect.types import ELEMENTS
from fusebind.lowering import accumulate_arg
from fusebind.lowering.index_checks import emit_index_check
from fusebind.lowering.linalg_types import (Dim, Value, broadcast_dims, element_name, flag, ints, op_attr, op_kind,
                                            read_by_maps, shape_of, storage, ttype)
from fusebind.lowering.scalar_text import ScalarEmitError, TextScalarBuilder, is_float


#: The narrow floats (f16, bf16): stored narrow, computed in f32. A generic body widens a narrow
#: operand as it loads it (`arith.extf`, `_bind_args`); an elementwise op, reduction or matmul of
#: narrow result type computes an f32 tensor (`compute_elem`), so a fused chain rounds once, where its
#: value leaves the kernel (`emit_dispatch.emit_op` narrows a result the terminator returns, `arith.truncf`:
#: round to nearest even, as numpy and ml_dtypes do) or where an explicit `prim.cast` asks for it.
NARROW_FLOATS: frozenset[str] = frozenset(n for n, e in ELEMENTS.items() if e.kind == "float" and e.bits < 32)


def compute_elem(elem: str) -> str:
    """The element type a value of `elem` is computed in: f32 for a narrow float, else itself."""
    return "f32" if elem in NARROW_FLOATS else elem


@dataclass(frozen=True)
class _Reduction:
    """A reduction's accumulator (already filled) and loop structure."""

    base: str  # sum, mean, prod, max, min
    combine: str  # how two values combine (mean sums)
    acc_elem: str
    axes: list[int]
    out_shape: list[Dim]
    in_map: str
    out_map: str
    iters: list[str]
    filled: str


@dataclass
class Emitter:
    fastmath: Callable[[str, str], str | None] | None
    lines: list[str] = field(default_factory=list)
    counter: int = 0
    index_consts: dict[int, str] = field(default_factory=dict)
    called: set[tuple[str, str]] = field(default_factory=set)
    #: the error channel: each check `checked_index` emitted (code = position + 1) and the inputs
    #: its index is computed from (`sources`, set by the driver per op): the runtime's words
    checks: list[str] = field(default_factory=list)
    check_sources: list[tuple[int, ...]] = field(default_factory=list)
    sources: tuple[int, ...] = ()
    #: the f32 value of each narrowed result (name -> wide Value): its consumers in the kernel read
    #: the unrounded value, only the kernel's output is rounded
    wide: dict[str, Value] = field(default_factory=dict)

    def fresh(self, hint: str = "v") -> str:
        self.counter += 1
        return f"%{hint}{self.counter}"

    def index(self, k: int) -> str:
        if k not in self.index_consts:
            name = f"%idx{k}"
            self.index_consts[k] = name
        return self.index_consts[k]

    def checked_index(self, b: TextScalarBuilder, raw: str, size: Dim, what: str) -> str:
        """The kernel ABI's error channel (docs/KERNEL-ABI.md): `raw` (an i64 value of `b`) as an
        `index` in [0, size): a negative one counts from the end, as numpy's; one outside
        [-size, size) is clamped to 0 (the read stays in the array) and reported in the kernel's
        status memref, which the runtime turns into `fb.IndexOutOfBounds` after the call. `what`
        names the checked axis for that message ("axis 0 of prim.gather").
        Emitted: `scf.if bad` stores [code, raw, size] into `%status` only while its code is 0 (the
        first bad index in loop order); code k is the k-th entry of `checks`."""
        return emit_index_check(self, b, raw, size, what)

    def empty(self, shape: Sequence[Dim], elem: str) -> str:
        name = self.fresh("e")
        dyn = ", ".join(d for d in shape if isinstance(d, str))
        self.lines.append(f"{name} = tensor.empty({dyn}) : {ttype(shape, elem)}")
        return name

    # -- categories -----------------------------------------------------
    def elementwise(self, op: Any, args: list[Value], out_elem: str) -> Value:
        shape, maps, params, b, result = self._elementwise_body(op, args, out_elem)
        same = [Value(a.name, a.shape, out_elem) for a, p in zip(args, params)
                if p == b.same_bits(result) and list(a.shape) == list(shape)]
        if same:  # an identity (np.abs of unsigned, int64 -> uint64): canonicalization would make its
            # generic a memref.copy, which kernels do not link
            return same[0] if read_by_maps(op) else self._gather_copy(same[0])
        rank = len(shape)
        dims = ", ".join(f"d{j}" for j in range(rank))
        maps.append(f"affine_map<({dims}) -> ({dims})>")
        return self._generic(args, maps, ["parallel"] * rank, shape, out_elem, params, b, result, self.empty(shape, out_elem))

    def elementwise_into(self, op: Any, args: list[Value], out_elem: str, dest: int) -> Value:
        """`elementwise`, but the result overwrites `args[dest]` (its `outs` operand): no new
        row buffer, and bufferization writes in place when `args[dest]` is dead afterwards.
        `args[dest]` must have the result's shape and element type (not i1)."""
        shape, maps, params, b, result = self._elementwise_body(op, args, out_elem)
        rank = len(shape)
        dims = ", ".join(f"d{j}" for j in range(rank))
        keep = [a for k, a in enumerate(args) if k != dest]
        keep_maps = [m for k, m in enumerate(maps) if k != dest] + [f"affine_map<({dims}) -> ({dims})>"]
        keep_params = [p for k, p in enumerate(params) if k != dest] + [params[dest]]
        return self._generic(keep, keep_maps, ["parallel"] * rank, shape, out_elem, keep_params, b, result,
                             args[dest].name)

    def _elementwise_body(self, op: Any, args: list[Value],
                          out_elem: str) -> tuple[list[Dim], list[str], list[str], TextScalarBuilder, str]:
        """Shape, input maps, block parameters, builder and result value of an elementwise op."""
        shape = broadcast_dims([a.shape for a in args], op.name)  # the dialect's one rule, names as dynamic dims
        rank = len(shape)
        dims = ", ".join(f"d{j}" for j in range(rank))
        maps = []
        for a in args:
            off = rank - len(a.shape)
            res = [("0" if (d == 1 and shape[i + off] != 1) else f"d{i + off}") for i, d in enumerate(a.shape)]
            maps.append(f"affine_map<({dims}) -> ({', '.join(res)})>")
        b = TextScalarBuilder(self.fresh, self.fastmath)
        params, vals = self._bind_args(b, args)
        result = op.scalar_body(b, *vals)
        if b.elem(result) != out_elem:
            result = b.cast(result, out_elem)
        self.called |= b.called
        return shape, maps, params, b, result

    def _bind_args(self, b: TextScalarBuilder, args: list[Value]) -> tuple[list[str], list[str]]:
        """Block parameters (storage types) and the logical values the body computes on."""
        params, vals = [], []
        for a in args:
            p = self.fresh("x")
            params.append(p)
            if a.elem == "i1":
                b.bind(p, "i8")
                zero = b.constant(0, "i8")
                vals.append(b._op(f"arith.cmpi ne, {p}, {zero} : i8", "i1"))
            elif a.elem in NARROW_FLOATS:  # the load widens: arithmetic on narrow floats is in f32
                vals.append(b.cast(b.bind(p, a.elem), "f32"))
            else:
                vals.append(b.bind(p, a.elem))
        return params, vals

    def _generic(self, args: list[Value], maps: list[str], iters: list[str], shape: list[Dim], out_elem: str,
                 params: list[str], b: TextScalarBuilder, result: str, init: str) -> Value:
        out = self.fresh("r")
        acc = params[len(args)] if len(params) > len(args) else self.fresh("o")
        ins = ", ".join(a.name for a in args)
        in_types = ", ".join(ttype(a.shape, a.elem) for a in args)
        out_t = ttype(shape, out_elem)
        head = f"{out} = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{', '.join(repr(i).replace(chr(39), chr(34)) for i in iters)}]}}"
        head += f" ins({ins} : {in_types})" if args else ""
        block_args = ", ".join([f"{p}: {storage(a.elem)}" for p, a in zip(params, args)] +
                               [f"{acc}: {storage(out_elem)}"])
        if out_elem == "i1":
            result = b._op(f"arith.extui {result} : i1 to i8", "i8")
        elif out_elem in NARROW_FLOATS and b.elem(result) != out_elem:  # a widened load copied out
            result = b.cast(result, out_elem)
        self.lines.append(f"{head} outs({init} : {out_t}) {{")
        self.lines.append(f"^bb0({block_args}):")
        self.lines.extend("  " + line for line in b.lines)
        self.lines.append(f"  linalg.yield {result} : {storage(out_elem)}")
        self.lines.append(f"}} -> {out_t}")
        return Value(out, list(shape), out_elem)

    def reduction(self, op: Any, x: Value, out_elem: str, axis_shift: int = 0) -> Value:
        """axis_shift: leading dims `x` lacks relative to the op's own operand (row-wise emission)."""
        if not self._reduction_plan(op, x, out_elem, axis_shift).axes:
            # Nothing reduced (axes = [], or a 0-d operand): numpy gives the values, cast.
            # Not an all-parallel generic that reads its `outs`: fused into a consumer that
            # broadcasts it, that accumulates once per broadcast iteration (pipeline.fusion_hazards).
            return x if x.elem == out_elem else self._map_unary(x, lambda bb, v: bb.cast(v, out_elem), out_elem)
        r = self._reduction_setup(op, x, out_elem, axis_shift)
        b = TextScalarBuilder(self.fresh, self.fastmath)
        (xin,), (xv,) = self._bind_args(b, [x])
        acc = b.bind(self.fresh("a"), r.acc_elem)
        result = b.combine_reassoc(r.combine, acc, b.cast(xv, r.acc_elem))
        red = self._generic([x], [r.in_map, r.out_map], r.iters, r.out_shape, r.acc_elem, [xin, acc], b, result,
                            r.filled)
        return self._reduction_tail(r, red, x, out_elem)

    def map_reduce(self, eop: Any, args: list[Value], e_elem: str, rop: Any, r_elem: str,
                   axis_shift: int = 0) -> tuple[Value, Value]:
        """The elementwise op `eop` and the reduction `rop` of its result, in one loop: one
        `linalg.generic` with two outputs, the mapped value (stored) and the accumulator.
        Returns (mapped, reduced). For a value that is reduced and also used again
        (softmax's exp row): one pass over the row instead of a map pass and a sum pass."""
        if op_kind(rop) in accumulate_arg.KINDS:  # the map with pass 1 (max / min), then the index pass
            mapped, m = self.map_reduce(eop, args, e_elem, accumulate_arg.extreme(rop), e_elem, axis_shift)
            return mapped, accumulate_arg.first_index(self, rop, mapped, m, axis_shift)
        shape, maps, params, b, ev = self._elementwise_body(eop, args, e_elem)
        mapped = Value("", list(shape), e_elem)
        r = self._reduction_setup(rop, mapped, r_elem, axis_shift)
        rank = len(shape)
        dims = ", ".join(f"d{j}" for j in range(rank))
        e_empty = self.empty(shape, e_elem)
        o = self.fresh("o")
        acc = b.bind(self.fresh("a"), r.acc_elem)
        combined = b.combine_reassoc(r.combine, acc, b.cast(ev, r.acc_elem))
        e_name, r_name = self.fresh("r"), self.fresh("r")
        e_t, r_t = ttype(shape, e_elem), ttype(r.out_shape, r.acc_elem)
        all_maps = maps + [f"affine_map<({dims}) -> ({dims})>", r.out_map]
        iters = ", ".join(f'"{i}"' for i in r.iters)
        ins = ", ".join(a.name for a in args)
        in_types = ", ".join(ttype(a.shape, a.elem) for a in args)
        block_args = ", ".join([f"{p}: {storage(a.elem)}" for p, a in zip(params, args)] +
                               [f"{o}: {storage(e_elem)}", f"{acc}: {storage(r.acc_elem)}"])
        self.lines.append(f"{e_name}, {r_name} = linalg.generic {{indexing_maps = [{', '.join(all_maps)}], "
                          f"iterator_types = [{iters}]}} ins({ins} : {in_types}) "
                          f"outs({e_empty}, {r.filled} : {e_t}, {r_t}) {{")
        self.lines.append(f"^bb0({block_args}):")
        self.lines.extend("  " + line for line in b.lines)
        self.lines.append(f"  linalg.yield {ev}, {combined} : {storage(e_elem)}, {storage(r.acc_elem)}")
        self.lines.append(f"}} -> ({e_t}, {r_t})")
        mapped = Value(e_name, list(shape), e_elem)
        return mapped, self._reduction_tail(r, Value(r_name, list(r.out_shape), r.acc_elem), mapped, r_elem)

    def _reduction_setup(self, op: Any, x: Value, out_elem: str, axis_shift: int) -> "_Reduction":
        """Emit the filled accumulator of reduction `op` over `x`; return its maps and kinds."""
        r = self._reduction_plan(op, x, out_elem, axis_shift)
        init_b = TextScalarBuilder(self.fresh, self.fastmath)
        big = np.finfo(np.float64).max if is_float(r.acc_elem) else None
        if r.base in ("sum", "mean"):
            init = init_b.constant(0, r.acc_elem)
        elif r.base == "prod":
            init = init_b.constant(1, r.acc_elem)
        else:
            sign = -1 if r.base == "max" else 1
            if is_float(r.acc_elem):
                init = init_b.constant(sign * float("inf") if big is not None else 0, r.acc_elem)
            elif x.elem == "i1":
                init = init_b.constant(0 if r.base == "max" else 1, r.acc_elem)
            else:
                info = np.iinfo(np.dtype(r.acc_elem.replace("i", "int")))
                init = init_b.constant(info.min if r.base == "max" else info.max, r.acc_elem)
        self.lines.extend(init_b.lines)
        empty = self.empty(r.out_shape, r.acc_elem)
        filled = self.fresh("f")
        t_out = ttype(r.out_shape, r.acc_elem)
        self.lines.append(f"{filled} = linalg.fill ins({init} : {storage(r.acc_elem)}) outs({empty} : {t_out}) -> {t_out}")
        return _Reduction(r.base, r.combine, r.acc_elem, r.axes, r.out_shape, r.in_map, r.out_map, r.iters, filled)

    def _reduction_plan(self, op: Any, x: Value, out_elem: str, axis_shift: int) -> "_Reduction":
        """Axes, result shape, maps and iterators of reduction `op` over `x` (nothing emitted;
        `filled` is empty). Raises ScalarEmitError for a kind or element type with no lowering."""
        kind = op_kind(op)
        rank = len(x.shape)
        full = rank + axis_shift
        axes = sorted({a % full - axis_shift for a in ints(op_attr(op, "axes"))}) if full else []
        if not axes and op_attr(op, "axes") is None:
            axes = list(range(rank))
        keep = flag(op_attr(op, "keepdims")) if op_attr(op, "keepdims") is not None else False
        # bool max/min are any/all: accumulated in i1's storage type i8, from 0 (any) or 1 (all)
        acc_elem = out_elem if is_float(out_elem) else ("i8" if x.elem == "i1" else x.elem)
        out_shape_l: list[Dim] = list(reduced_shape(tuple(x.shape), axes, keep))  # type: ignore[arg-type]
        dims = ", ".join(f"d{j}" for j in range(rank))
        out_res = ", ".join("0" if j in axes else f"d{j}" for j in range(rank) if keep or j not in axes)
        maps = [f"affine_map<({dims}) -> ({dims})>", f"affine_map<({dims}) -> ({out_res})>"]
        iters = ["reduction" if j in axes else "parallel" for j in range(rank)]
        base = kind.removeprefix("reduce_")
        if base not in ("sum", "mean", "prod", "max", "min"):
            raise ScalarEmitError(f"{op.name}: reduction kind '{kind}' has no lowering; "
                                  "supported: reduce_sum, reduce_mean, reduce_prod, reduce_max, reduce_min")
        if x.elem == "i1" and base not in ("max", "min"):
            raise ScalarEmitError(f"{op.name}: only max/min reductions over i1 are lowered; cast to i32 first")
        return _Reduction(base, "sum" if base == "mean" else base, acc_elem, axes, out_shape_l, maps[0], maps[1],
                          iters, "")

    def _reduction_tail(self, r: "_Reduction", red: Value, x: Value, out_elem: str) -> Value:
        """mean's 1/n, then the cast to the result's element type."""
        if r.base == "mean":
            red = self._scale_by_count(red, x, r.axes)
        if red.elem != out_elem:
            red = self._map_unary(red, lambda bb, v: bb.cast(v, out_elem), out_elem)
        return red

    def _scale_by_count(self, red: Value, x: Value, axes: list[int]) -> Value:
        static = [x.shape[a] for a in axes]
        if all(isinstance(d, int) for d in static):
            n = int(np.prod(static)) if static else 1
            inv = (1.0 / n) if n else float("nan")
            return self._map_unary(red, lambda bb, v: bb.mul(v, bb.constant(inv, red.elem)), red.elem)
        count = self.index(1)
        for d in static:
            size = d if isinstance(d, str) else self.index(d)
            nxt = self.fresh("n")
            self.lines.append(f"{nxt} = arith.muli {count}, {size} : index")
            count = nxt
        as_int = self.fresh("n")
        self.lines.append(f"{as_int} = arith.index_cast {count} : index to i64")
        as_float = self.fresh("n")
        self.lines.append(f"{as_float} = arith.sitofp {as_int} : i64 to {red.elem}")
        inv = self.fresh("n")
        one = self.fresh("n")
        self.lines.append(f"{one} = arith.constant 1.0 : {red.elem}")
        self.lines.append(f"{inv} = arith.divf {one}, {as_float} : {red.elem}")
        return self._map_unary(red, lambda bb, v: bb.mul(v, bb.bind(inv, red.elem)), red.elem)

    def _map_unary(self, x: Value, body: Callable[[TextScalarBuilder, str], str], out_elem: str) -> Value:
        rank = len(x.shape)
        dims = ", ".join(f"d{j}" for j in range(rank))
        ident = f"affine_map<({dims}) -> ({dims})>"
        b = TextScalarBuilder(self.fresh, self.fastmath)
        (p,), (v,) = self._bind_args(b, [x])
        result = body(b, v)
        self.called |= b.called
        return self._generic([x], [ident, ident], ["parallel"] * rank, x.shape, out_elem, [p], b, result,
                             self.empty(x.shape, out_elem))

    def transpose(self, op: Any, x: Value, result_type: Any) -> Value:
        perm = ints(op_attr(op, "permutation", "perm"))
        if not perm:
            perm = list(reversed(range(len(x.shape))))
        shape = list(TransposeOp.infer_shape(tuple(x.shape), perm=perm))  # type: ignore[arg-type]
        out = self.fresh("r")
        empty = self.empty(shape, x.elem)
        t_in, t_out = ttype(x.shape, x.elem), ttype(shape, x.elem)
        self.lines.append(f"{out} = linalg.transpose ins({x.name} : {t_in}) outs({empty} : {t_out}) "
                          f"permutation = [{', '.join(map(str, perm))}]")
        return Value(out, shape, x.elem)

    def reshape(self, op: Any, x: Value, result_type: Any) -> Value:
        target = shape_of(result_type)
        if any(d is None for d in target) or any(isinstance(d, str) for d in x.shape):
            raise ScalarEmitError(f"{op.name}: reshape needs static shapes, got {x.shape} -> {target}; "
                                  "give the region static shapes for reshape")
        n = int(np.prod(x.shape)) if x.shape else 1
        cur = x
        if len(x.shape) != 1:
            flat = self.fresh("r")
            if x.shape:
                assoc = "[[" + ", ".join(str(i) for i in range(len(x.shape))) + "]]"
                self.lines.append(f"{flat} = tensor.collapse_shape {x.name} {assoc} : "
                                  f"{ttype(x.shape, x.elem)} into {ttype([n], x.elem)}")
            else:
                self.lines.append(f"{flat} = tensor.expand_shape {x.name} [] output_shape [1] : "
                                  f"{ttype([], x.elem)} into {ttype([1], x.elem)}")
            cur = Value(flat, [n], x.elem)
        if len(target) == 1:
            return cur
        out = self.fresh("r")
        if not target:
            self.lines.append(f"{out} = tensor.collapse_shape {cur.name} [] : {ttype(cur.shape, x.elem)} into "
                              f"{ttype([], x.elem)}")
        else:
            assoc = "[[" + ", ".join(str(i) for i in range(len(target))) + "]]"
            self.lines.append(f"{out} = tensor.expand_shape {cur.name} {assoc} output_shape "
                              f"[{', '.join(map(str, target))}] : {ttype(cur.shape, x.elem)} into "
                              f"{ttype(list(target), x.elem)}")
        return Value(out, [int(d) for d in target], x.elem)  # type: ignore[arg-type]

    def broadcast_to(self, op: Any, x: Value, result_type: Any) -> Value:
        target = shape_of(result_type)
        rank = len(target)
        off = rank - len(x.shape)
        shape: list[Dim] = []
        for j, d in enumerate(target):
            src = x.shape[j - off] if j >= off else 1
            if d is None:
                if isinstance(src, str):
                    shape.append(src)
                else:
                    raise ScalarEmitError(f"{op.name}: dynamic target dim {j} has no size source")
            else:
                shape.append(d)
        dims = ", ".join(f"d{j}" for j in range(rank))
        res = [("0" if (d == 1 and shape[i + off] != 1) else f"d{i + off}") for i, d in enumerate(x.shape)]
        maps = [f"affine_map<({dims}) -> ({', '.join(res)})>", f"affine_map<({dims}) -> ({dims})>"]
        b = TextScalarBuilder(self.fresh, self.fastmath)
        (p,), (v,) = self._bind_args(b, [x])
        return self._generic([x], maps, ["parallel"] * rank, shape, x.elem, [p], b, v, self.empty(shape, x.elem))

    def slice(self, op: Any, x: Value, result_type: Any) -> Value:
        """`prim.slice` as an index map, in two parts: the elements it reads, in forward order, as
        `tensor.extract_slice` (bufferization makes it a strided `memref.subview` of its operand: no
        copy, no loop), then a copy `linalg.generic` whose input map is `d -> (size - 1) - d` on a
        dim of 2+ elements that walks backwards and `d` elsewhere. That generic's result map is the
        identity, so upstream elementwise fusion folds the read into its consumer: no loop nest and
        no buffer of its own. (One generic with the map `d * stride + start` cannot say every
        slice: a `d`-only result expression makes linalg take the loop's range from the
        *operand's* dim.)

        With no reversed dim that copy is an identity generic, which canonicalization erases; that
        is the point when every user reads through indexing maps (`linalg_types.read_by_maps`). Otherwise (a
        result, a reshape, a transpose...) the strided subview would be copied by `memref.copy`,
        a call into MLIR's C runner library that kernels do not link; so the slice is then written
        to a contiguous tensor by an explicit loop (`_gather_copy`)."""
        starts, strides = ints(op_attr(op, "starts")), ints(op_attr(op, "strides"))
        limits = ints(op_attr(op, "limits"))
        sizes = [len(range(s, lim, k)) for s, lim, k in zip(starts, limits, strides)]
        lows = [0 if n == 0 else s if k > 0 else s + (n - 1) * k for s, k, n in zip(starts, strides, sizes)]
        steps = [abs(k) for k in strides]
        rank = len(sizes)
        flip = [k < 0 and n > 1 for k, n in zip(strides, sizes)]
        whole = not any(isinstance(d, str) for d in x.shape) and [lows, sizes, steps] == [[0] * rank, x.shape,
                                                                                           [1] * rank]
        if whole and not any(flip):
            return x
        cur = x
        if not whole:
            name = self.fresh("r")
            self.lines.append(f"{name} = tensor.extract_slice {x.name}[{', '.join(map(str, lows))}] "
                              f"[{', '.join(map(str, sizes))}] [{', '.join(map(str, steps))}] : "
                              f"{ttype(x.shape, x.elem)} to {ttype(sizes, x.elem)}")
            cur = Value(name, list(sizes), x.elem)
        if not any(flip) and not read_by_maps(op):
            return self._gather_copy(cur)
        dims = ", ".join(f"d{j}" for j in range(rank))
        res = ", ".join(f"d{j} * -1 + {n - 1}" if f else f"d{j}" for j, (f, n) in enumerate(zip(flip, sizes)))
        maps = [f"affine_map<({dims}) -> ({res})>", f"affine_map<({dims}) -> ({dims})>"]
        b = TextScalarBuilder(self.fresh, self.fastmath)
        (p,), (v,) = self._bind_args(b, [cur])
        shape: list[Dim] = list(sizes)
        return self._generic([cur], maps, ["parallel"] * rank, shape, x.elem, [p], b, v, self.empty(shape, x.elem))

    def _gather_copy(self, x: Value) -> Value:
        """`x` copied into a fresh contiguous tensor by a loop that reads it with `tensor.extract`
        at the loop's indices (a generic with no inputs: nothing for canonicalization to erase)."""
        rank = len(x.shape)
        dims = ", ".join(f"d{j}" for j in range(rank))
        out, acc, t = self.fresh("r"), self.fresh("o"), ttype(x.shape, x.elem)
        ivs = [self.fresh("i") for _ in range(rank)]
        val = self.fresh("v")
        iters = ", ".join(['"parallel"'] * rank)
        self.lines.append(f"{out} = linalg.generic {{indexing_maps = [affine_map<({dims}) -> ({dims})>], "
                          f"iterator_types = [{iters}]}} outs({self.empty(x.shape, x.elem)} : {t}) {{")
        self.lines.append(f"^bb0({acc}: {storage(x.elem)}):")
        self.lines.extend(f"  {iv} = linalg.index {j} : index" for j, iv in enumerate(ivs))
        self.lines.append(f"  {val} = tensor.extract {x.name}[{', '.join(ivs)}] : {t}")
        self.lines.append(f"  linalg.yield {val} : {storage(x.elem)}")
        self.lines.append(f"}} -> {t}")
        return Value(out, list(x.shape), x.elem)

    def constant(self, op: Any, result_type: Any) -> Value:
        arr = np.asarray(op.reference())
        elem = element_name(result_type)
        shape = list(arr.shape)
        if elem == "i1":
            arr = arr.astype(np.int8)
        if arr.size == 0:
            body = _nested(arr, str)
        else:
            body = '"0x' + np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes().hex().upper() + '"'
        name = self.fresh("k")
        self.lines.append(f"{name} = arith.constant dense<{body}> : {ttype(shape, elem)}")
        return Value(name, shape, elem)

    def matmul(self, op: Any, a: Value, b: Value, out_elem: str) -> Value:
        if len(a.shape) != 2 or len(b.shape) != 2:
            raise ScalarEmitError(f"{op.name}: only 2-D matmul is generated (got ranks {len(a.shape)}, {len(b.shape)})")
        shape = [a.shape[0], b.shape[1]]
        init_b = TextScalarBuilder(self.fresh, None)
        zero = init_b.constant(0, out_elem)
        self.lines.extend(init_b.lines)
        empty = self.empty(shape, out_elem)
        t_out = ttype(shape, out_elem)
        filled = self.fresh("f")
        self.lines.append(f"{filled} = linalg.fill ins({zero} : {storage(out_elem)}) outs({empty} : {t_out}) -> {t_out}")
        out = self.fresh("r")
        self.lines.append(f"{out} = linalg.matmul ins({a.name}, {b.name} : {ttype(a.shape, a.elem)}, "
                          f"{ttype(b.shape, b.elem)}) outs({filled} : {t_out}) -> {t_out}")
        return Value(out, shape, out_elem)


def _nested(arr: np.ndarray, fmt: Callable[[Any], str]) -> str:
    if arr.ndim == 0:
        return fmt(arr.item())
    return "[" + ", ".join(_nested(a, fmt) for a in arr) + "]"
