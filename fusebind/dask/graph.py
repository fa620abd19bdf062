"""`fusebind.dask.jit`: a traced function over dask arrays, built as a dask graph of fused kernels.

Owns `DaskJitFunction`. A call traces the function once on the arguments' global shapes and
dtypes with no data (`runtime.specialize.no_data`: every stride 0), finds its axis classes
(analysis.py), chooses one chunking per class (the arguments', rechunked only where a row-wise op
needs whole rows, a reshape merges axes, or two arguments disagree), and then walks the prim ops:
- elementwise ops, broadcasts, transposes, 1-adding reshapes and reductions over whole axes stay
  *lazy*; a lazy value is materialized as ONE fused kernel per chunk (`da.blockwise` over a
  kernels.BlockKernel) when something else needs it as a dask array;
- a reduction over a chunked axis is a tree: its operand's lazy ops and a per-chunk partial in one
  fused kernel, then `dask.array.reduction` combines the partials (f64 for float sums);
- a matmul is dask's own blocked matmul (`da.matmul`, whose k-sum is dask's), and what follows it
  is the next fused kernel, applied to each output block.
A lazy value read by two materialized values is recomputed in each of their kernels rather than
written out (fusion by recomputation: fewer bytes written, which is what a chunked pipeline pays).
`explain()` lists every rechunk with its reason and every stage with its ops.

Must not: run anything at build time but the kernels' compilation (the graph is lazy).
"""

from __future__ import annotations

import inspect
import itertools
from typing import Any, Callable, Sequence

import numpy as np

from fusebind.api.errors import FusebindValueError
from fusebind.dialect.errors import FusebindInternalError
from fusebind.dask.analysis import TREE_REDUCTIONS, Analysis, analyze, unsupported
from fusebind.dask.kernels import BlockKernel, block_kernel, kernel_text
from fusebind.dask.moments import StackedCombine, Variance, find_variances


def _identity(x: Any, axis: Any = None, keepdims: bool = True) -> Any:
    return x  # a partial block already has 1 along every reduced axis


class Combine:
    """dask.array.reduction's combine: the partials of a group folded (f64 sums stay f64)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __call__(self, x: np.ndarray, axis: Any = None, keepdims: bool = True) -> np.ndarray:
        fold = {"reduce_max": np.max, "reduce_min": np.min, "reduce_prod": np.prod}.get(self.kind, np.sum)
        return fold(x, axis=axis, keepdims=keepdims)


class Aggregate(Combine):
    """The last fold, a mean's division by the global count, and the cast to the traced dtype."""

    def __init__(self, kind: str, count: int, dtype: Any) -> None:
        super().__init__(kind)
        self.count = count
        self.dtype = np.dtype(dtype)

    def __call__(self, x: np.ndarray, axis: Any = None, keepdims: bool = False) -> np.ndarray:
        total = super().__call__(x, axis=axis, keepdims=keepdims)
        if self.kind == "reduce_mean":
            total = total / self.count
        return np.asarray(total).astype(self.dtype, copy=False)


def _dtype(value: Any) -> np.dtype:
    from fusebind.dialect.types import elem_of, numpy_dtype

    return np.dtype(numpy_dtype(elem_of(value.type)))


def _shape(value: Any) -> tuple[int, ...]:
    from fusebind.dialect.types import shape_of

    return tuple(int(d) for d in shape_of(value.type))


class _Build:
    """One call's graph: the analysis, a chunking per class, and the dask value of each prim value."""

    def __init__(self, owner: "DaskJitFunction", a: Analysis, arrays: list[Any], names: list[str]) -> None:
        self.owner, self.a = owner, a
        self.lines: list[str] = []
        self.dask: dict[Any, Any] = {}
        self.names: dict[Any, str] = {}
        self.stage = 0
        self._choose_chunks(arrays, names)

    # ------------------------------------------------------------------ chunking
    def _choose_chunks(self, arrays: list[Any], names: list[str]) -> None:
        from fusebind.dialect.prim import ReductionOp

        a = self.a
        args = list(a.func.body.blocks[0].args)
        self.chunks: dict[int, tuple[int, ...]] = {}
        for arr, arg in zip(arrays, args):
            for axis, c in enumerate(a.cls(arg)):
                if c is not None:
                    self.chunks.setdefault(c, tuple(arr.chunks[axis]))
        whole: dict[int, str] = {}
        # a variance along a chunked axis runs on Welford partials: its mean is not a row-wise op
        self.variances: dict[Any, Variance] = {
            r2: v for r2, v in find_variances(a).items()
            if any(len(self._chunks_of(c)) > 1 for c in a.reduced_classes(r2)) and not a.rowwise(r2)
            and _dtype(v.u).kind == "f"}
        self.welford_means = {v.r1 for v in self.variances.values()}
        for op in a.ops:
            if op in self.welford_means:
                continue
            if isinstance(op, ReductionOp):
                split = {c for c in a.reduced_classes(op) if len(self._chunks_of(c)) > 1}
                if split and a.rowwise(op):
                    for c in split:
                        whole.setdefault(c, f"{op.name} along axes {list(op.axes_list())} needs whole rows: "
                                            "each chunk must hold the whole reduced axis, since its result is "
                                            "broadcast back along it")
                elif split and op.KIND not in TREE_REDUCTIONS:
                    for c in split:
                        whole.setdefault(c, f"{op.name} has no tree form: it reduces whole axes")
        for c, op in a.pinned.items():
            c = a.classes.find(c)
            if len(self._chunks_of(c)) > 1:
                whole.setdefault(c, f"{op.name} merges or splits axes, so it needs them whole")
        for c in whole:
            self.chunks[c] = (a.classes.size[c],)
        self.given = {arg: tuple(len(c) for c in arr.chunks) for arr, arg in zip(arrays, args)}
        for arr, arg, name in zip(arrays, args, names):
            want = tuple(self._chunks_of(c) if c is not None else (1,) for c in a.cls(arg))
            if tuple(arr.chunks) != want:
                why = sorted({whole[c] for c in a.cls(arg) if c in whole})
                changed = [axis for axis, (w, h) in enumerate(zip(want, arr.chunks)) if w != tuple(h)]
                self.lines.append(f"rechunk {name} along axis {changed}: {[len(arr.chunks[k]) for k in changed]} "
                                  f"chunk(s) -> {[len(want[k]) for k in changed]}: "
                                  + ("; ".join(why) if why else "to match the chunks of the other arguments"))
                arr = arr.rechunk(want)
            self.dask[arg] = arr
            self.names[arg] = name

    def _chunks_of(self, c: int) -> tuple[int, ...]:
        return self.chunks.get(c) or (self.a.classes.size[c],)

    # ------------------------------------------------------------------ stages
    def run(self) -> list[Any]:
        from fusebind.dialect.prim import MatmulOp, ReductionOp

        a = self.a
        for op in a.ops:
            if op.name == "func.return":
                return [self.materialize(v) for v in op.operands]
            if isinstance(op, MatmulOp):
                lhs, rhs = (self.materialize(v) for v in op.operands)
                self.dask[op.results[0]] = out = _matmul(lhs, rhs)
                self.lines.append(f"stage {self._next()}: {op.name} {list(lhs.shape)} @ {list(rhs.shape)}: dask's "
                                  f"blocked matmul (k in {len(lhs.chunks[-1])} chunk(s)), {out.npartitions} output "
                                  "block(s); what follows runs fused on each block after its k-sum")
            elif op in self.variances:
                self.dask[op.results[0]] = self._welford(self.variances[op])
            elif op in self.welford_means:
                continue  # read only by its variance, which computes it per chunk
            elif isinstance(op, ReductionOp) and any(len(self._chunks_of(c)) > 1 for c in a.reduced_classes(op)):
                self.dask[op.results[0]] = self._tree(op)
        raise FusebindInternalError("fusebind.dask: the traced function has no func.return")

    def _next(self) -> int:
        self.stage += 1
        return self.stage

    def _slice(self, value: Any) -> tuple[list[Any], list[Any]]:
        """The lazy ops `value` needs (body order) and the materialized values they read."""
        ops: dict[Any, None] = {}
        inputs: dict[Any, None] = {}
        todo = [value]
        while todo:
            v = todo.pop()
            if v in self.dask:
                inputs[v] = None
                continue
            op = v.owner
            if op in ops:
                continue
            ops[op] = None
            todo.extend(op.operands)
        order = self.a.order
        return sorted(ops, key=order.__getitem__), sorted(inputs, key=self._position)

    def _position(self, v: Any) -> tuple[int, int]:
        from xdsl.ir import BlockArgument

        return (-1, v.index) if isinstance(v, BlockArgument) else (self.a.order[v.owner], v.index)

    def materialize(self, value: Any) -> Any:
        if value in self.dask:
            return self.dask[value]
        ops, inputs = self._slice(value)
        out = self._blockwise(ops, inputs, value, None)
        self.dask[value] = out
        return out

    def _tree(self, op: Any) -> Any:
        import dask.array as da

        operand = op.operands[0]
        ops, inputs = self._slice(operand)
        partials = self._blockwise(ops, inputs, operand, op)
        result = op.results[0]
        dtype = _dtype(result)
        shape = _shape(operand)
        axes = tuple(op.axes_list())
        count = int(np.prod([shape[k] for k in axes])) if axes else 1
        keepdims = op.keepdims is not None
        out = da.reduction(partials, chunk=_identity, combine=Combine(op.KIND), aggregate=Aggregate(op.KIND, count, dtype),
                           axis=axes, keepdims=keepdims, dtype=dtype, split_every=self.owner.split_every,
                           concatenate=True, meta=np.empty((0,) * len(_shape(result)), dtype))
        self.lines.append(f"stage {self.stage}+: {op.name} along axes {list(axes)} of {list(shape)} as a tree: the fused "
                          f"partial above per chunk ({partials.npartitions} partial(s), {partials.dtype}), then "
                          f"dask.array.reduction folds them (split_every={self.owner.split_every or 'dask default'})")
        return out

    def _welford(self, v: Variance) -> Any:
        import dask.array as da

        ops, inputs = self._slice(v.u)
        partials = self._blockwise(ops, inputs, v.u, v)
        r2 = v.r2
        dtype = _dtype(r2.results[0])
        shape = _shape(v.u)
        count = int(np.prod([shape[k] for k in v.axes])) if v.axes else 1
        keepdims = r2.keepdims is not None
        stacked = da.reduction(partials, chunk=_identity, combine=StackedCombine(), aggregate=StackedCombine(),
                               axis=tuple(k + 1 for k in v.axes), keepdims=keepdims, dtype=np.float64,
                               split_every=self.owner.split_every, concatenate=True,
                               meta=np.empty((0,) * (1 + len(_shape(r2.results[0]))), np.float64))
        m2 = stacked[2]  # the M2 plane
        out = (m2 / count if r2.KIND == "reduce_mean" else m2).astype(dtype)
        self.lines.append(f"stage {self.stage}+: {r2.name} of (u - mean(u))^2 along axes {list(v.axes)} of "
                          f"{list(shape)} (a variance) as a tree of Welford partials (n, mean, M2) per chunk "
                          f"({partials.npartitions} partial(s)), combined by Chan's formula in f64: no rechunk")
        return out

    def _blockwise(self, ops: list[Any], inputs: list[Any], output: Any, partial: Any) -> Any:
        import dask.array as da
        from dask.base import tokenize

        a = self.a
        fresh = itertools.count()

        def letter(c: int | None) -> str:
            return f"u{next(fresh)}" if c is None else f"c{c}"

        in_inds = [tuple(letter(c) for c in a.cls(v)) for v in inputs]
        in_letters = {x for ind in in_inds for x in ind}
        out_cls = a.cls(output)
        welford = isinstance(partial, Variance)
        reduced = set(partial.axes if welford else partial.axes_list()) if partial is not None else set()
        out_ind = tuple(letter(c) for c in out_cls)
        new_axes: dict[str, Any] = {}
        adjust: dict[str, int] = {}
        if welford:  # the partial planes (n, mean, M2) on a new leading axis
            out_ind = ("moments", *out_ind)
            new_axes["moments"] = 3
        for k, (x, c) in enumerate(zip(out_ind[1:] if welford else out_ind, out_cls)):
            if x not in in_letters:
                if c is not None and len(self._chunks_of(c)) > 1:
                    raise unsupported(output.owner, "broadcasts along a chunked axis that no input of its kernel has; "
                                                    "pass that broadcast operand as a dask array")
                new_axes[x] = 1 if k in reduced or c is None else a.classes.size[c]
            elif k in reduced:
                adjust[x] = 1
        for ind, v in zip(in_inds, inputs):
            for x, c in zip(ind, a.cls(v)):
                if x not in out_ind and c is not None and len(self._chunks_of(c)) > 1:
                    raise FusebindInternalError(f"fusebind.dask: axis class {c} is contracted while chunked")
        classes = sorted({c for v in (*inputs, output, *(r for op in ops for r in op.results)) for c in a.cls(v)
                          if c is not None})
        choices = [sorted(set(self._chunks_of(c))) for c in classes]
        texts: dict[Any, str] = {}
        counts: dict[Any, int] = {}
        for combo in itertools.product(*choices):
            sizes = dict(zip(classes, combo))
            key = tuple(tuple(1 if c is None else sizes[c] for c in a.cls(v)) for v in inputs)
            texts[key] = kernel_text(a, ops, inputs, output, sizes, partial)
            block = [1 if c is None else sizes[c] for c in out_cls]
            counts[key] = int(np.prod([block[k] for k in reduced])) if reduced else 1
        if welford:
            out_dtype = np.dtype(np.float64)
        elif partial is not None and _dtype(output).kind == "f" and _dtype(output).itemsize < 8 \
                and partial.KIND in ("reduce_sum", "reduce_mean", "reduce_prod"):
            out_dtype = np.dtype(np.float64)
        else:
            out_dtype = _dtype(output)
        kernel = self.owner.kernel(texts, out_dtype, counts if welford else None)
        args: list[Any] = []
        for v, ind in zip(inputs, in_inds):
            args += [self.dask[v], ind]
        stage = self._next()
        name = f"fusebind-{self.owner.name}-k{stage}-" + tokenize(sorted(texts.items()), [self.dask[v].name for v in inputs])
        out = da.blockwise(kernel, out_ind, *args, dtype=out_dtype, concatenate=True, new_axes=new_axes or None,
                           adjust_chunks=adjust or None, name=name, meta=np.empty((0,) * len(out_ind), out_dtype))
        shown = ", ".join(op.name for op in ops) or "no op"
        what = (" and per-chunk Welford partials (n, mean, M2)" if welford else
                f" and a per-chunk partial {partial.name} (keepdims)" if partial is not None else "")
        self.lines.append(f"stage {stage}: one fused kernel per chunk ({out.npartitions} chunk(s), {len(texts)} block "
                          f"shape(s) compiled): {len(ops)} op(s) [{shown}]{what} from "
                          f"({', '.join(self._label(v) for v in inputs)}) -> {out.dtype}{list(out.shape)}")
        return out

    def _label(self, v: Any) -> str:
        return self.names.get(v) or f"{self.dask[v].dtype}{list(self.dask[v].shape)}"


def _matmul(lhs: Any, rhs: Any) -> Any:
    import dask.array as da

    return da.matmul(lhs, rhs)


class DaskJitFunction:
    """`fusebind.dask.jit(fn)`: call it on dask arrays (numpy arrays are one chunk) to get dask arrays."""

    def __init__(self, fn: Callable[..., Any], *, split_every: int | None = None) -> None:
        self.fn = fn
        self.name = getattr(fn, "__name__", "fn")
        self.split_every = split_every
        self._kernels: dict[Any, BlockKernel] = {}
        self._last_lines: list[str] = []

    def kernel(self, texts: dict[Any, str], dtype: Any, counts: dict[Any, int] | None = None) -> BlockKernel:
        """The BlockKernel of these texts: compiled once per process (kernels.block_kernel)."""
        found = block_kernel(f"{self.name}#{len(self._kernels)}", texts, dtype, counts)
        self._kernels[found.key] = found
        return found

    def _build(self, args: Sequence[Any]) -> tuple[_Build, bool]:
        import dask.array as da

        from fusebind.api.trace import trace_graph
        from fusebind.runtime.specialize import no_data

        arrays: list[Any] = []
        for i, x in enumerate(args):
            if isinstance(x, da.Array):
                if any(np.isnan(c) for dim in x.chunks for c in dim):
                    raise FusebindValueError(
                        f"fusebind.dask.jit({self.name}): argument #{i} has unknown chunk sizes (shape "
                        f"{x.shape}); kernels are compiled per block shape: call x.compute_chunk_sizes() first")
                arrays.append(x)
            elif isinstance(x, np.ndarray):
                arrays.append(da.from_array(x, chunks=x.shape or ()))
            else:
                raise FusebindValueError(
                    f"fusebind.dask.jit({self.name}): argument #{i} is a {type(x).__name__}; pass dask or numpy "
                    "arrays (bind Python scalars with functools.partial or a closure)")
        names = _parameter_names(self.fn, len(arrays))
        probes = [no_data(tuple(int(d) for d in x.shape), x.dtype) for x in arrays]
        module, graph = trace_graph(self.fn, probes, names, self.name)
        for cap, _ in graph.captures.values():
            obj = cap.convert(cap.obj) if cap.convert is not None else cap.obj
            arrays.append(da.from_array(np.asarray(obj), chunks=np.shape(obj) or ()))
            names.append(f"{cap.name} (captured)")
        func = next(op for op in module.ops if op.name == "func.func")
        b = _Build(self, analyze(func), arrays, names)
        many = len(func.function_type.outputs.data) != 1
        return b, many

    def __call__(self, *args: Any) -> Any:
        b, many = self._build(args)
        outs = b.run()
        self._last_lines = b.lines
        return tuple(outs) if many else outs[0]

    def explain(self, *args: Any) -> str:
        """The stages a call on these arguments builds: rechunks (with why), fused kernels, trees, matmuls."""
        b, _ = self._build(args)
        outs = b.run()
        shapes = ", ".join(f"{b.names[arg]}: {b.dask[arg].dtype}{list(b.dask[arg].shape)} chunks "
                           f"{list(b.given[arg])}" for arg in b.a.func.body.blocks[0].args)
        head = f"fusebind.dask plan for '{self.name}'({shapes})"
        tasks = sum(len(o.__dask_graph__()) for o in outs)
        rechunks = [line for line in b.lines if line.startswith("rechunk")]
        return "\n".join([head, *b.lines, "no rechunk" if not rechunks else f"{len(rechunks)} rechunk(s)",
                          f"graph: {tasks} task(s) for {len(outs)} output(s)"])


def _parameter_names(fn: Callable[..., Any], n: int) -> list[str]:
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"arg{i}" for i in range(n)]


def jit(fn: Callable[..., Any] | None = None, *, split_every: int | None = None) -> Any:
    """`fusebind.dask.jit(fn)` (or `@fusebind.dask.jit(split_every=8)`): fn over dask arrays."""
    if fn is None:
        return lambda f: DaskJitFunction(f, split_every=split_every)
    return DaskJitFunction(fn, split_every=split_every)
