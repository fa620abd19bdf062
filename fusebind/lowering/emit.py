"""prim ops -> upstream MLIR text: `linalg` on tensors, destination-passing.

Owns: `emit_linalg`, which turns the block of a `fused.region` (or a
`func.func` of prim ops) into one `func.func` whose arguments are memrefs,
inputs then outputs, with `llvm.emit_c_interface`. Inputs enter as
`bufferization.to_tensor ... restrict`; every result is written in place with
`bufferization.materialize_in_destination`, so with `eliminate-empty-tensors`
an elementwise chain needs no heap temporaries.

Categories: elementwise ops (their `scalar_body`) become `linalg.generic`
with broadcasting indexing maps; reductions a fill + `linalg.generic` with
reduction iterators, except float sums and means, which are blocked
accumulations (`accumulate.py`, with their single-use elementwise producers
inlined: `exprs.py`); transpose `linalg.transpose`;
reshape `tensor.collapse_shape`/`expand_shape`; broadcast_to a copying
generic; constants `arith.constant dense`; matmul `linalg.matmul`
(correct but slow: the runtime binds BLAS instead).

Row-wise regions (rowwise.py, `emit_rows`): an elementwise row that is reduced
and used again (softmax's exp) is emitted with its reduction in one pass
(`map_reduce` here; `accumulate.blocked_map_sum` for float sums), and the last
use of such a stored row overwrites it (`elementwise_into`), so the row is
written straight into the output and scaled there in place.

Size cap: every static tensor type in the kernel (arguments, results,
intermediates) must hold at most `MAX_TENSOR_BYTES` = 2^62 bytes, counting
its strides too (a zero dim does not excuse the product of the others);
MLIR's index arithmetic is int64 and asserts (aborting the process) on an
overflowing layout, so such a shape is refused here with `LoweringError("emit")`.

Must not: run MLIR (that is `pipeline.py`); import `mlir`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from fusebind.lowering.errors import LoweringError
from fusebind.lowering.scalar_text import ScalarEmitError, TextScalarBuilder, float_literal, int_literal, is_float

Dim = int | str  # a static size, or the SSA name of an `index` value

# The largest static tensor a kernel may name: 2^62 bytes leaves int64 headroom for
# MLIR's size, stride and byte-offset arithmetic (see the module docstring).
MAX_TENSOR_BYTES = 1 << 62
_ELEMENT_BYTES = {"i1": 1, "i8": 1, "i16": 2, "f16": 2, "i32": 4, "f32": 4, "i64": 8, "f64": 8}


@dataclass(frozen=True)
class TensorSpec:
    """An argument of a kernel: element type and shape (None = dynamic dim)."""

    elem: str
    shape: tuple[int | None, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class EmittedKernel:
    """The MLIR text of one kernel and the facts its caller needs."""

    text: str
    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    rowwise: bool = False  # emitted as one loop over rows (rowwise.py)

    @property
    def entry(self) -> str:
        """The one external symbol: MLIR's C-interface wrapper."""
        return f"_mlir_ciface_{self.name}"


def element_name(t: Any) -> str:
    """Element type name ('f32', 'i64', ...) of an xDSL scalar or tensor type."""
    elem = t.get_element_type() if hasattr(t, "get_element_type") else t
    width = getattr(elem, "width", None)
    if width is not None and hasattr(width, "data"):
        return f"i{width.data}"
    text = str(elem)
    if text in ("f16", "f32", "f64") or text.startswith("i"):
        return text
    raise ScalarEmitError(f"element type {text} is not supported; expected f32, f64, i32, i64 or i1")


def _shape_of(t: Any) -> tuple[int | None, ...]:
    return tuple(None if d < 0 else int(d) for d in t.get_shape())


def storage(elem: str) -> str:
    """How an element is stored in tensors and memrefs: i1 as a byte (numpy bool's layout).

    Besides matching numpy, this keeps i1 out of memrefs: MLIR 22's memref-to-llvm
    asserts (aborting the process) on sub-byte stores.
    """
    return "i8" if elem == "i1" else elem


def _ttype(shape: Sequence[Dim], elem: str) -> str:
    dims = "".join(f"{d if isinstance(d, int) else '?'}x" for d in shape)
    return f"tensor<{dims}{storage(elem)}>"


def _mtype(spec: TensorSpec, strided: bool) -> str:
    dims = "".join(f"{'?' if d is None else d}x" for d in spec.shape)
    layout = ""
    if strided and spec.rank:
        layout = ", strided<[" + ", ".join("?" * 1 for _ in spec.shape) + "], offset: ?>"
    return f"memref<{dims}{storage(spec.elem)}{layout}>"


def _ints(value: Any) -> list[int]:
    """Axes / permutations in whatever form the dialect stores them."""
    if value is None:
        return []
    if hasattr(value, "get_values"):
        return [int(v) for v in value.get_values()]
    if hasattr(value, "data") and isinstance(value.data, (tuple, list)):
        return [int(getattr(v, "value", v).data if hasattr(getattr(v, "value", v), "data") else v) for v in value.data]
    if hasattr(value, "value") and hasattr(value.value, "data"):
        return [int(value.value.data)]
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


def _flag(value: Any) -> bool:
    if hasattr(value, "value") and hasattr(value.value, "data"):
        return bool(value.value.data)
    if hasattr(value, "data"):
        return bool(value.data)
    return bool(value)


def _op_attr(op: Any, *names: str) -> Any:
    for n in names:
        if hasattr(op, n):
            v = getattr(op, n)
            if not callable(v):
                return v
        for table in ("properties", "attributes"):
            d = getattr(op, table, {})
            if n in d:
                return d[n]
    return None


def _kind(op: Any) -> str:
    kind = getattr(type(op), "KIND", None)
    if kind:
        return str(kind)
    return str(op.name).partition(".")[2]


@dataclass
class _Value:
    name: str
    shape: list[Dim]
    elem: str


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
class _Emitter:
    fastmath: Callable[[str, str], str | None] | None
    lines: list[str] = field(default_factory=list)
    counter: int = 0
    index_consts: dict[int, str] = field(default_factory=dict)
    called: set[tuple[str, str]] = field(default_factory=set)

    def fresh(self, hint: str = "v") -> str:
        self.counter += 1
        return f"%{hint}{self.counter}"

    def index(self, k: int) -> str:
        if k not in self.index_consts:
            name = f"%idx{k}"
            self.index_consts[k] = name
        return self.index_consts[k]

    def dim_of(self, tensor: str, ttype: str, k: int) -> str:
        name = self.fresh("d")
        self.lines.append(f"{name} = tensor.dim {tensor}, {self.index(k)} : {ttype}")
        return name

    def empty(self, shape: Sequence[Dim], elem: str) -> str:
        name = self.fresh("e")
        dyn = ", ".join(d for d in shape if isinstance(d, str))
        self.lines.append(f"{name} = tensor.empty({dyn}) : {_ttype(shape, elem)}")
        return name

    # -- categories -----------------------------------------------------
    def elementwise(self, op: Any, args: list[_Value], out_elem: str) -> _Value:
        shape, maps, params, b, result = self._elementwise_body(op, args, out_elem)
        rank = len(shape)
        dims = ", ".join(f"d{j}" for j in range(rank))
        maps.append(f"affine_map<({dims}) -> ({dims})>")
        return self._generic(args, maps, ["parallel"] * rank, shape, out_elem, params, b, result, self.empty(shape, out_elem))

    def elementwise_into(self, op: Any, args: list[_Value], out_elem: str, dest: int) -> _Value:
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

    def _elementwise_body(self, op: Any, args: list[_Value],
                          out_elem: str) -> tuple[list[Dim], list[str], list[str], TextScalarBuilder, str]:
        """Shape, input maps, block parameters, builder and result value of an elementwise op."""
        rank = max((len(a.shape) for a in args), default=0)
        shape: list[Dim] = []
        for j in range(rank):
            cands = [a.shape[j - (rank - len(a.shape))] for a in args if j - (rank - len(a.shape)) >= 0]
            static = [d for d in cands if isinstance(d, int) and d != 1]
            if static:
                if len(set(static)) > 1:
                    raise ScalarEmitError(f"{op.name}: shapes {[a.shape for a in args]} do not broadcast")
                shape.append(static[0])
            elif any(isinstance(d, str) for d in cands):
                shape.append(next(d for d in cands if isinstance(d, str)))
            else:
                shape.append(1)
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

    def _bind_args(self, b: TextScalarBuilder, args: list[_Value]) -> tuple[list[str], list[str]]:
        """Block parameters (storage types) and the logical values the body computes on."""
        params, vals = [], []
        for a in args:
            p = self.fresh("x")
            params.append(p)
            if a.elem == "i1":
                b.bind(p, "i8")
                zero = b.constant(0, "i8")
                vals.append(b._op(f"arith.cmpi ne, {p}, {zero} : i8", "i1"))
            else:
                vals.append(b.bind(p, a.elem))
        return params, vals

    def _generic(self, args: list[_Value], maps: list[str], iters: list[str], shape: list[Dim], out_elem: str,
                 params: list[str], b: TextScalarBuilder, result: str, init: str) -> _Value:
        out = self.fresh("r")
        acc = params[len(args)] if len(params) > len(args) else self.fresh("o")
        ins = ", ".join(a.name for a in args)
        in_types = ", ".join(_ttype(a.shape, a.elem) for a in args)
        out_t = _ttype(shape, out_elem)
        head = f"{out} = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{', '.join(repr(i).replace(chr(39), chr(34)) for i in iters)}]}}"
        head += f" ins({ins} : {in_types})" if args else ""
        block_args = ", ".join([f"{p}: {storage(a.elem)}" for p, a in zip(params, args)] +
                               [f"{acc}: {storage(out_elem)}"])
        if out_elem == "i1":
            result = b._op(f"arith.extui {result} : i1 to i8", "i8")
        self.lines.append(f"{head} outs({init} : {out_t}) {{")
        self.lines.append(f"^bb0({block_args}):")
        self.lines.extend("  " + line for line in b.lines)
        self.lines.append(f"  linalg.yield {result} : {storage(out_elem)}")
        self.lines.append(f"}} -> {out_t}")
        return _Value(out, list(shape), out_elem)

    def reduction(self, op: Any, x: _Value, out_elem: str, axis_shift: int = 0) -> _Value:
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

    def map_reduce(self, eop: Any, args: list[_Value], e_elem: str, rop: Any, r_elem: str,
                   axis_shift: int = 0) -> tuple[_Value, _Value]:
        """The elementwise op `eop` and the reduction `rop` of its result, in one loop: one
        `linalg.generic` with two outputs, the mapped value (stored) and the accumulator.
        Returns (mapped, reduced). For a value that is reduced and also used again
        (softmax's exp row): one pass over the row instead of a map pass and a sum pass."""
        shape, maps, params, b, ev = self._elementwise_body(eop, args, e_elem)
        mapped = _Value("", list(shape), e_elem)
        r = self._reduction_setup(rop, mapped, r_elem, axis_shift)
        rank = len(shape)
        dims = ", ".join(f"d{j}" for j in range(rank))
        e_empty = self.empty(shape, e_elem)
        o = self.fresh("o")
        acc = b.bind(self.fresh("a"), r.acc_elem)
        combined = b.combine_reassoc(r.combine, acc, b.cast(ev, r.acc_elem))
        e_name, r_name = self.fresh("r"), self.fresh("r")
        e_t, r_t = _ttype(shape, e_elem), _ttype(r.out_shape, r.acc_elem)
        all_maps = maps + [f"affine_map<({dims}) -> ({dims})>", r.out_map]
        iters = ", ".join(f'"{i}"' for i in r.iters)
        ins = ", ".join(a.name for a in args)
        in_types = ", ".join(_ttype(a.shape, a.elem) for a in args)
        block_args = ", ".join([f"{p}: {storage(a.elem)}" for p, a in zip(params, args)] +
                               [f"{o}: {storage(e_elem)}", f"{acc}: {storage(r.acc_elem)}"])
        self.lines.append(f"{e_name}, {r_name} = linalg.generic {{indexing_maps = [{', '.join(all_maps)}], "
                          f"iterator_types = [{iters}]}} ins({ins} : {in_types}) "
                          f"outs({e_empty}, {r.filled} : {e_t}, {r_t}) {{")
        self.lines.append(f"^bb0({block_args}):")
        self.lines.extend("  " + line for line in b.lines)
        self.lines.append(f"  linalg.yield {ev}, {combined} : {storage(e_elem)}, {storage(r.acc_elem)}")
        self.lines.append(f"}} -> ({e_t}, {r_t})")
        mapped = _Value(e_name, list(shape), e_elem)
        return mapped, self._reduction_tail(r, _Value(r_name, list(r.out_shape), r.acc_elem), mapped, r_elem)

    def _reduction_setup(self, op: Any, x: _Value, out_elem: str, axis_shift: int) -> "_Reduction":
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
        t_out = _ttype(r.out_shape, r.acc_elem)
        self.lines.append(f"{filled} = linalg.fill ins({init} : {r.acc_elem}) outs({empty} : {t_out}) -> {t_out}")
        return _Reduction(r.base, r.combine, r.acc_elem, r.axes, r.out_shape, r.in_map, r.out_map, r.iters, filled)

    def _reduction_plan(self, op: Any, x: _Value, out_elem: str, axis_shift: int) -> "_Reduction":
        """Axes, result shape, maps and iterators of reduction `op` over `x` (nothing emitted;
        `filled` is empty). Raises ScalarEmitError for a kind or element type with no lowering."""
        kind = _kind(op)
        rank = len(x.shape)
        full = rank + axis_shift
        axes = sorted({a % full - axis_shift for a in _ints(_op_attr(op, "axes"))}) if full else []
        if not axes and _op_attr(op, "axes") is None:
            axes = list(range(rank))
        keep = _flag(_op_attr(op, "keepdims")) if _op_attr(op, "keepdims") is not None else False
        # bool max/min are any/all: accumulated in i1's storage type i8, from 0 (any) or 1 (all)
        acc_elem = out_elem if is_float(out_elem) else ("i8" if x.elem == "i1" else x.elem)
        out_shape = [(1 if keep else None) if j in axes else x.shape[j] for j in range(rank)]
        out_shape_l: list[Dim] = [d for d in out_shape if d is not None]
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

    def _reduction_tail(self, r: "_Reduction", red: _Value, x: _Value, out_elem: str) -> _Value:
        """mean's 1/n, then the cast to the result's element type."""
        if r.base == "mean":
            red = self._scale_by_count(red, x, r.axes)
        if red.elem != out_elem:
            red = self._map_unary(red, lambda bb, v: bb.cast(v, out_elem), out_elem)
        return red

    def _scale_by_count(self, red: _Value, x: _Value, axes: list[int]) -> _Value:
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

    def _map_unary(self, x: _Value, body: Callable[[TextScalarBuilder, str], str], out_elem: str) -> _Value:
        rank = len(x.shape)
        dims = ", ".join(f"d{j}" for j in range(rank))
        ident = f"affine_map<({dims}) -> ({dims})>"
        b = TextScalarBuilder(self.fresh, self.fastmath)
        (p,), (v,) = self._bind_args(b, [x])
        result = body(b, v)
        self.called |= b.called
        return self._generic([x], [ident, ident], ["parallel"] * rank, x.shape, out_elem, [p], b, result,
                             self.empty(x.shape, out_elem))

    def transpose(self, op: Any, x: _Value, result_type: Any) -> _Value:
        perm = _ints(_op_attr(op, "permutation", "perm"))
        if not perm:
            perm = list(reversed(range(len(x.shape))))
        shape = [x.shape[p] for p in perm]
        out = self.fresh("r")
        empty = self.empty(shape, x.elem)
        t_in, t_out = _ttype(x.shape, x.elem), _ttype(shape, x.elem)
        self.lines.append(f"{out} = linalg.transpose ins({x.name} : {t_in}) outs({empty} : {t_out}) "
                          f"permutation = [{', '.join(map(str, perm))}]")
        return _Value(out, shape, x.elem)

    def reshape(self, op: Any, x: _Value, result_type: Any) -> _Value:
        target = _shape_of(result_type)
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
                                  f"{_ttype(x.shape, x.elem)} into {_ttype([n], x.elem)}")
            else:
                self.lines.append(f"{flat} = tensor.expand_shape {x.name} [] output_shape [1] : "
                                  f"{_ttype([], x.elem)} into {_ttype([1], x.elem)}")
            cur = _Value(flat, [n], x.elem)
        if len(target) == 1:
            return cur
        out = self.fresh("r")
        if not target:
            self.lines.append(f"{out} = tensor.collapse_shape {cur.name} [] : {_ttype(cur.shape, x.elem)} into "
                              f"{_ttype([], x.elem)}")
        else:
            assoc = "[[" + ", ".join(str(i) for i in range(len(target))) + "]]"
            self.lines.append(f"{out} = tensor.expand_shape {cur.name} {assoc} output_shape "
                              f"[{', '.join(map(str, target))}] : {_ttype(cur.shape, x.elem)} into "
                              f"{_ttype(list(target), x.elem)}")
        return _Value(out, [int(d) for d in target], x.elem)  # type: ignore[arg-type]

    def broadcast_to(self, op: Any, x: _Value, result_type: Any) -> _Value:
        target = _shape_of(result_type)
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

    def constant(self, op: Any, result_type: Any) -> _Value:
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
        self.lines.append(f"{name} = arith.constant dense<{body}> : {_ttype(shape, elem)}")
        return _Value(name, shape, elem)

    def matmul(self, op: Any, a: _Value, b: _Value, out_elem: str) -> _Value:
        if len(a.shape) != 2 or len(b.shape) != 2:
            raise ScalarEmitError(f"{op.name}: only 2-D matmul is generated (got ranks {len(a.shape)}, {len(b.shape)})")
        shape = [a.shape[0], b.shape[1]]
        init_b = TextScalarBuilder(self.fresh, None)
        zero = init_b.constant(0, out_elem)
        self.lines.extend(init_b.lines)
        empty = self.empty(shape, out_elem)
        t_out = _ttype(shape, out_elem)
        filled = self.fresh("f")
        self.lines.append(f"{filled} = linalg.fill ins({zero} : {out_elem}) outs({empty} : {t_out}) -> {t_out}")
        out = self.fresh("r")
        self.lines.append(f"{out} = linalg.matmul ins({a.name}, {b.name} : {_ttype(a.shape, a.elem)}, "
                          f"{_ttype(b.shape, b.elem)}) outs({filled} : {t_out}) -> {t_out}")
        return _Value(out, shape, out_elem)


def _nested(arr: np.ndarray, fmt: Callable[[Any], str]) -> str:
    if arr.ndim == 0:
        return fmt(arr.item())
    return "[" + ", ".join(_nested(a, fmt) for a in arr) + "]"


def _block_of(region_or_func: Any) -> Any:
    if hasattr(region_or_func, "args") and hasattr(region_or_func, "ops"):
        return region_or_func
    return region_or_func.regions[0].blocks[0]


def emit_linalg(region_or_func: Any, name: str = "fb_kernel", *, dynamic: bool = False, strided_inputs: bool = False,
                fastmath: Callable[[str, str], str | None] | None = None,
                fastmath_defs: Callable[[Iterable[tuple[str, str]]], str] | None = None,
                rowwise: bool = True) -> EmittedKernel:
    """Emit the kernel of a `fused.region` / `func.func` of prim ops as upstream MLIR text.

    dynamic: every dim of every argument is `?` (one kernel per dtypes and ranks).
    strided_inputs: inputs take any strides (e.g. numpy broadcast views, stride 0).
    fastmath(fn, elem) names a function to call instead of `math.<fn>`;
    fastmath_defs(called) returns their MLIR definitions.
    rowwise: emit a region whose reductions run over trailing axes as one loop over
    rows (`rowwise.py`); False keeps the whole-tensor form (for comparison and tests).
    Raises `LoweringError(stage="emit")` for anything it cannot lower.
    """
    try:
        return _emit(region_or_func, name, dynamic, strided_inputs, fastmath, fastmath_defs, rowwise)
    except LoweringError:
        raise
    except (ScalarEmitError, AttributeError, TypeError, ValueError, KeyError, IndexError) as exc:
        raise LoweringError.at("emit", f"{type(exc).__name__}: {exc}", _safe_print(region_or_func)) from None


def _safe_print(obj: Any) -> str:
    try:
        return str(obj)
    except Exception:  # printing is best effort inside an error path
        return f"<unprintable {type(obj).__name__}>"


def _emit_op(em: _Emitter, op: Any, args: list[_Value], axis_shift: int = 0) -> _Value:
    kind = _kind(op)
    rtype = op.results[0].type
    if len(op.results) != 1:
        raise ScalarEmitError(f"{op.name}: ops with {len(op.results)} results are not lowered")
    if hasattr(op, "scalar_body"):
        return em.elementwise(op, args, element_name(rtype))
    if kind.startswith("reduce"):
        from fusebind.lowering import accumulate

        if accumulate.is_blocked(op):  # float sums and means: blocked, accurate (accumulate.py)
            return accumulate.blocked_sum(em, op, args[0], element_name(rtype), axis_shift)
        return em.reduction(op, args[0], element_name(rtype), axis_shift)
    if kind == "transpose":
        return em.transpose(op, args[0], rtype)
    if kind == "reshape":
        return em.reshape(op, args[0], rtype)
    if kind == "broadcast_to":
        return em.broadcast_to(op, args[0], rtype)
    if kind == "constant":
        return em.constant(op, rtype)
    if kind == "matmul":
        return em.matmul(op, args[0], args[1], element_name(rtype))
    raise ScalarEmitError(f"{op.name}: no lowering to linalg for op kind '{kind}'")


def _emit(region_or_func: Any, name: str, dynamic: bool, strided: bool,
          fastmath: Callable[[str, str], str | None] | None,
          fastmath_defs: Callable[[Iterable[tuple[str, str]]], str] | None, rowwise: bool = True) -> EmittedKernel:
    from fusebind.lowering import rowwise as rw

    block = _block_of(region_or_func)
    _check_sizes(block)
    em = _Emitter(fastmath)
    values: dict[Any, _Value] = {}
    inputs: list[TensorSpec] = []
    header_lines: list[str] = []
    for i, arg in enumerate(block.args):
        elem = element_name(arg.type)
        shape = tuple(None for _ in _shape_of(arg.type)) if dynamic else _shape_of(arg.type)
        spec = TensorSpec(elem, shape)
        inputs.append(spec)
        t = _ttype([d if d is not None else "?" for d in shape], elem)
        tname = f"%t{i}"
        header_lines.append(f"{tname} = bufferization.to_tensor %in{i} restrict : {_mtype(spec, strided)} to {t}")
        dims: list[Dim] = []
        for k, d in enumerate(shape):
            if d is None:
                dname = f"%in{i}_d{k}"
                header_lines.append(f"{dname} = tensor.dim {tname}, {em.index(k)} : {t}")
                dims.append(dname)
            else:
                dims.append(d)
        values[arg] = _Value(tname, dims, elem)
    terminator = block.last_op
    plan = rw.plan_rows(block) if rowwise else "row-wise emission off"
    if isinstance(plan, rw.RowPlan):
        outputs, tail = rw.emit_rows(em, block, values, plan, dynamic, strided)
    else:
        from fusebind.lowering import accumulate, exprs

        ops = [op for op in block.ops if op is not terminator]
        inlined = exprs.deferred_ops(block, ops, accumulate.is_blocked, set())  # built inside the sums using them
        for op in ops:
            args = [values[o] for o in op.operands]
            values[op.results[0]] = exprs.make_expr(op, args) if op in inlined else _emit_op(em, op, args)
        outputs, tail = _write_outputs(em, [values[r] for r in terminator.operands], dynamic)
    params = [f"%in{i}: {_mtype(s, strided)}" for i, s in enumerate(inputs)]
    params += [f"%out{k}: {_mtype(s, False)}" for k, s in enumerate(outputs)]
    consts = [f"{n} = arith.constant {k} : index" for k, n in sorted(em.index_consts.items())]
    body = consts + header_lines + em.lines + tail + ["return"]
    text = f"func.func @{name}({', '.join(params)}) attributes {{llvm.emit_c_interface}} {{\n"
    text += "".join(f"  {line}\n" for line in body) + "}\n"
    if em.called and fastmath_defs is not None:
        text = fastmath_defs(sorted(em.called)) + "\n" + text
    return EmittedKernel(f"module {{\n{text}}}\n", name, tuple(inputs), tuple(outputs), isinstance(plan, rw.RowPlan))


def _static_size_error(t: Any) -> str | None:
    """Why the static shape of type `t` is too large for a kernel, or None if it fits."""
    if not hasattr(t, "get_shape"):
        return None
    dims = [int(d) for d in t.get_shape() if d >= 0]  # dynamic dims are checked by nothing static
    try:
        width = _ELEMENT_BYTES.get(element_name(t), 8)
    except ScalarEmitError:
        width = 8
    elements = 1
    for d in dims:
        elements *= d
    if elements * width > MAX_TENSOR_BYTES:
        return (f"{t} has {elements} elements, more than the {MAX_TENSOR_BYTES // width} "
                f"({width}-byte) elements of the {MAX_TENSOR_BYTES}-byte (2^62) cap on a static tensor")
    # Strides are products of trailing dims; with a zero dim the count is 0 but they still overflow.
    stride = 1
    for d in reversed(dims):
        if stride * width > MAX_TENSOR_BYTES:
            return (f"{t} has a stride of {stride} elements, more than the {MAX_TENSOR_BYTES // width} "
                    f"({width}-byte) elements of the {MAX_TENSOR_BYTES}-byte (2^62) cap on a static tensor")
        stride *= max(d, 1)
    return None


def _check_sizes(block: Any) -> None:
    """Refuse a kernel naming a static tensor type beyond `MAX_TENSOR_BYTES` (before
    MLIR sees it: its layout arithmetic aborts the process on int64 overflow)."""
    types = [a.type for a in block.args]
    for op in block.walk():
        types.extend(r.type for r in op.results)
        types.extend(a.type for region in op.regions for b in region.blocks for a in b.args)
    seen: set[str] = set()
    for t in types:
        key = str(t)
        if key in seen:
            continue
        seen.add(key)
        problem = _static_size_error(t)
        if problem is not None:
            raise LoweringError.at("emit", f"{problem}; split the computation or use dynamic dims "
                                   "(the shape cannot be allocated anyway)", _safe_print(block.parent_op() or block))


def _out_spec(v: _Value, dynamic: bool) -> TensorSpec:
    return TensorSpec(v.elem, tuple(None if (dynamic or isinstance(d, str)) else d for d in v.shape))


def _write_outputs(em: _Emitter, results: list[_Value], dynamic: bool) -> tuple[list[TensorSpec], list[str]]:
    """Whole-tensor form: materialize every result into its `%out` memref."""
    outputs: list[TensorSpec] = []
    tail: list[str] = []
    for k, v in enumerate(results):
        spec = _out_spec(v, dynamic)
        outputs.append(spec)
        src_t = _ttype(v.shape, v.elem)
        want_t = _ttype([d if d is not None else "?" for d in spec.shape], v.elem)
        val = v.name
        if src_t != want_t:
            val = em.fresh("cast")
            tail.append(f"{val} = tensor.cast {v.name} : {src_t} to {want_t}")
        tail.append(f"bufferization.materialize_in_destination {val} in restrict writable %out{k} : "
                    f"({want_t}, {_mtype(spec, False)}) -> ()")
    return outputs, tail
