"""The LLVM IR of the call thunk (thunk.py has what it does and why; this module only writes it).

Owns `thunk_ir` (one kernel signature: dtype and rank per operand; the plain
thunk, with its one-call entry's generation check and output allocation, or
the parallel-for thunk and its pool task), the context-block layout
(`PLAIN_HEAD`, `ANY_DIM`) and the numpy layout constants it reads.
Split from thunk.py (one job each): thunk.py compiles, caches and binds it.

Must not: compile, load or call anything (thunk.py does).
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

import numpy as np

from fusebind.dialect.errors import FusebindValueError
from fusebind.runtime.dtypes import DType, KernelSignature

#: numpy's type number of each DType's dtype (descr->type_num), from the element table: NPY_BOOL 0,
#: NPY_BYTE 1 ... NPY_LONG 7 (int64 on LP64), NPY_ULONG 8 (uint64), NPY_FLOAT 11, NPY_DOUBLE 12; a
#: user dtype (ml_dtypes' bfloat16) has the number numpy registered it under in this process.
#: Filled on first use (`_type_num`), so importing this module imports no dtype package.
_TYPE_NUM: dict[DType, int] = {}


def _type_num(dtype: DType) -> int:
    num = _TYPE_NUM.get(dtype)
    if num is None:
        num = _TYPE_NUM[dtype] = np.dtype(dtype.numpy).num
    return num


#: the plain thunk's context block: [kernel, ndarray type, release-GIL flag, allocator (0: the
#: output is always passed), output descr, session (0: no generation check), generation,
#: calls that ran, the interned names "table" and "generation", expected dims...]
PLAIN_HEAD = 10
_NAMES = (sys.intern("table"), sys.intern("generation"))
_C_CONTIGUOUS, _ALIGNED, _WRITEABLE = 0x1, 0x100, 0x400
#: an expected dim that any size matches (chunks of a split call; dynamic kernels).
ANY_DIM = -1


def thunk_ir(signature: KernelSignature, name: str = "fb_thunk", parallel: Sequence[int] | None = None) -> str:
    """LLVM IR text of the thunk for `signature` (see the module docstring).

    `parallel` (one entry per operand): the parallel-for thunk instead, whose call
    runs the kernel in chunks on the native pool (pool.py), the GIL released
    once around the whole call. Entry 0: the operand is cut along axis 0 (chunk
    c gets rows [lead*c//n, lead*(c+1)//n) of n chunks, lead = the first such
    operand's axis 0); entry k > 0: chunk c gets its own block of k elements
    at c*k (a status array per chunk). Its context block is
    `[kernel, ndarray type, 1, fb_pool_run, pool, chunks, width, dims...]`."""
    operands = [*signature.inputs, *signature.outputs]
    n_in = len(signature.inputs)
    n_ops = len(operands)
    lines = ["declare void @Py_IncRef(ptr)", "declare void @Py_DecRef(ptr)", "declare ptr @PyEval_SaveThread()",
             "declare void @PyEval_RestoreThread(ptr)", "declare ptr @PyObject_GetAttr(ptr, ptr)",
             "declare i64 @PyLong_AsLongLong(ptr)", "declare void @PyErr_Clear()",
             "@_Py_NoneStruct = external global i8", "",
             f"define ptr @{name}(ptr %self, ptr %args, i64 %nargs) {{", "entry:"]
    emit = lines.append
    #: the plain thunk may allocate its one output (an entry whose context block names an allocator)
    can_alloc = parallel is None and len(signature.outputs) == 1
    if parallel is not None:
        if len(parallel) != len(operands) or not any(b == 0 and r for b, (_, r) in zip(parallel, operands)):
            raise FusebindValueError(f"parallel thunk: blocks {list(parallel)} must give one entry per operand of "
                                     f"{signature} and cut at least one operand of rank >= 1 along axis 0")
        if any(b == 0 and not r for b, (_, r) in zip(parallel, operands)):
            raise FusebindValueError(f"parallel thunk: a rank-0 operand cannot be cut along axis 0 ({signature})")
    emit("  %ctxp = getelementptr i8, ptr %self, i64 16")
    emit("  %ctx = load ptr, ptr %ctxp")
    emit("  %kfn = load ptr, ptr %ctx")
    emit("  %atp_p = getelementptr i64, ptr %ctx, i64 1")
    emit("  %atp = load ptr, ptr %atp_p")
    emit("  %rel_p = getelementptr i64, ptr %ctx, i64 2")
    emit("  %rel = load i64, ptr %rel_p")
    for i, (_, rank) in enumerate(operands):  # descriptors live in the entry block
        ty = f"{{ ptr, ptr, i64, [{rank} x i64], [{rank} x i64] }}" if rank else "{ ptr, ptr, i64 }"
        emit(f"  %d{i} = alloca {ty}")
    if parallel is not None:
        emit(f"  %env = alloca [{len(operands) + 3} x i64]")
    if can_alloc:
        emit("  %res = alloca ptr")
    emit(f"  %nok = icmp eq i64 %nargs, {n_ops}")
    dim_slot = PLAIN_HEAD if parallel is None else 7  # index (in i64 units) of the next expected dim in ctx
    if parallel is not None:
        emit("  br i1 %nok, label %op0, label %bad")
    else:
        emit(f"  br i1 %nok, label %gen, label %{'short' if can_alloc else 'bad'}")
        if can_alloc:  # the output left out: allocated here when the context names an allocator
            emit("short:")
            emit("  %newfnp = getelementptr i64, ptr %ctx, i64 3")
            emit("  %newfn = load ptr, ptr %newfnp")
            emit("  %hasnew = icmp ne ptr %newfn, null")
            emit(f"  %isshort = icmp eq i64 %nargs, {n_ops - 1}")
            emit("  %sok = and i1 %hasnew, %isshort")
            emit("  br i1 %sok, label %gen, label %bad")
        lines.extend(_generation_ir())
    out_slot = dim_slot + sum(r for _, r in operands[:-1])  # the last operand's first expected dim
    for i, (dtype, rank) in enumerate(operands):
        d = f"%d{i}"
        want_flags = _C_CONTIGUOUS | _ALIGNED | (_WRITEABLE if i >= n_in else 0)
        emit(f"op{i}:")
        if can_alloc and i == n_ops - 1:
            emit(f"  %given = icmp eq i64 %nargs, {n_ops}")
            emit(f"  br i1 %given, label %op{i}.c, label %alloc")
            emit(f"op{i}.c:")
        emit(f"  %ip{i} = getelementptr ptr, ptr %args, i64 {i}")
        emit(f"  %a{i} = load ptr, ptr %ip{i}")
        emit(f"  %tpp{i} = getelementptr i8, ptr %a{i}, i64 8")
        emit(f"  %tp{i} = load ptr, ptr %tpp{i}")
        emit(f"  %tok{i} = icmp eq ptr %tp{i}, %atp")
        emit(f"  br i1 %tok{i}, label %op{i}.f, label %bad")
        emit(f"op{i}.f:")
        emit(f"  %ndp{i} = getelementptr i8, ptr %a{i}, i64 24")
        emit(f"  %nd{i} = load i32, ptr %ndp{i}")
        emit(f"  %ndok{i} = icmp eq i32 %nd{i}, {rank}")
        emit(f"  %flp{i} = getelementptr i8, ptr %a{i}, i64 64")
        emit(f"  %fl{i} = load i32, ptr %flp{i}")
        emit(f"  %flm{i} = and i32 %fl{i}, {want_flags}")
        emit(f"  %flok{i} = icmp eq i32 %flm{i}, {want_flags}")
        emit(f"  %dsp{i} = getelementptr i8, ptr %a{i}, i64 56")
        emit(f"  %ds{i} = load ptr, ptr %dsp{i}")
        emit(f"  %tnp{i} = getelementptr i8, ptr %ds{i}, i64 28")
        emit(f"  %tn{i} = load i32, ptr %tnp{i}")
        emit(f"  %tnok{i} = icmp eq i32 %tn{i}, {_type_num(dtype)}")
        emit(f"  %bop{i} = getelementptr i8, ptr %ds{i}, i64 26")
        emit(f"  %bo{i} = load i8, ptr %bop{i}")
        emit(f"  %book{i} = icmp ne i8 %bo{i}, 62")  # '>': big-endian data
        emit(f"  %c1_{i} = and i1 %ndok{i}, %flok{i}")
        emit(f"  %c2_{i} = and i1 %tnok{i}, %book{i}")
        emit(f"  %c3_{i} = and i1 %c1_{i}, %c2_{i}")
        emit(f"  br i1 %c3_{i}, label %op{i}.d, label %bad")
        emit(f"op{i}.d:")
        emit(f"  %dp{i} = getelementptr i8, ptr %a{i}, i64 16")
        emit(f"  %data{i} = load ptr, ptr %dp{i}")
        emit(f"  store ptr %data{i}, ptr {d}")
        emit(f"  %al{i} = getelementptr i8, ptr {d}, i64 8")
        emit(f"  store ptr %data{i}, ptr %al{i}")
        emit(f"  %of{i} = getelementptr i8, ptr {d}, i64 16")
        emit(f"  store i64 0, ptr %of{i}")
        ok = "true"
        if rank:
            emit(f"  %dims{i}p = getelementptr i8, ptr %a{i}, i64 32")
            emit(f"  %dims{i} = load ptr, ptr %dims{i}p")
            sizes = []
            for k in range(rank):
                emit(f"  %sp{i}_{k} = getelementptr i64, ptr %dims{i}, i64 {k}")
                emit(f"  %s{i}_{k} = load i64, ptr %sp{i}_{k}")
                emit(f"  %ep{i}_{k} = getelementptr i64, ptr %ctx, i64 {dim_slot}")
                emit(f"  %e{i}_{k} = load i64, ptr %ep{i}_{k}")
                emit(f"  %eq{i}_{k} = icmp eq i64 %s{i}_{k}, %e{i}_{k}")
                emit(f"  %any{i}_{k} = icmp slt i64 %e{i}_{k}, 0")
                emit(f"  %dok{i}_{k} = or i1 %eq{i}_{k}, %any{i}_{k}")
                emit(f"  %acc{i}_{k} = and i1 {ok}, %dok{i}_{k}")
                ok = f"%acc{i}_{k}"
                emit(f"  %dsz{i}_{k} = getelementptr i8, ptr {d}, i64 {24 + 8 * k}")
                emit(f"  store i64 %s{i}_{k}, ptr %dsz{i}_{k}")
                sizes.append(f"%s{i}_{k}")
                dim_slot += 1
            stride = "1"
            for k in range(rank - 1, -1, -1):  # element strides of a C-contiguous array
                emit(f"  %dst{i}_{k} = getelementptr i8, ptr {d}, i64 {24 + 8 * rank + 8 * k}")
                emit(f"  store i64 {stride}, ptr %dst{i}_{k}")
                if k:
                    emit(f"  %st{i}_{k} = mul i64 {stride}, {sizes[k]}")
                    stride = f"%st{i}_{k}"
        nxt = f"op{i + 1}" if i + 1 < len(operands) else "call"
        emit(f"  br i1 {ok}, label %{nxt}, label %bad")
    descs = ", ".join(f"ptr %d{i}" for i in range(len(operands)))
    last = len(operands) - 1
    if parallel is not None:
        lead_op = next(i for i, b in enumerate(parallel) if b == 0)
        emit("call:")
        emit("  store ptr %kfn, ptr %env")
        emit("  %envl = getelementptr i64, ptr %env, i64 1")
        emit(f"  store i64 %s{lead_op}_0, ptr %envl")
        for k, what in ((3, "run"), (4, "pool"), (5, "chunks"), (6, "width")):
            emit(f"  %{what}p = getelementptr i64, ptr %ctx, i64 {k}")
            emit(f"  %{what} = load {'ptr' if what in ('run', 'pool') else 'i64'}, ptr %{what}p")
        emit("  %envc = getelementptr i64, ptr %env, i64 2")
        emit("  store i64 %chunks, ptr %envc")
        for i in range(len(operands)):
            emit(f"  %envd{i} = getelementptr i64, ptr %env, i64 {3 + i}")
            emit(f"  store ptr %d{i}, ptr %envd{i}")
        emit("  %width32 = trunc i64 %width to i32")
        emit("  %ts = call ptr @PyEval_SaveThread()")
        emit(f"  call void %run(ptr %pool, ptr @{name}_task, ptr %env, i64 %chunks, i32 %width32)")
        emit("  call void @PyEval_RestoreThread(ptr %ts)")
        emit("  br label %done")
    else:
        if can_alloc:
            lines.extend(_alloc_ir(operands[-1][1], out_slot, n_ops - 1))
        emit("call:")
        emit("  %cntp = getelementptr i64, ptr %ctx, i64 7")  # calls that ran (under the GIL: exact)
        emit("  %cnt = load i64, ptr %cntp")
        emit("  %cnt1 = add i64 %cnt, 1")
        emit("  store i64 %cnt1, ptr %cntp")
        emit("  %released = icmp ne i64 %rel, 0")
        emit("  br i1 %released, label %call.nogil, label %call.gil")
        emit("call.gil:")
        emit(f"  call void %kfn({descs})")
        emit("  br label %done")
        emit("call.nogil:")
        emit("  %ts = call ptr @PyEval_SaveThread()")
        emit(f"  call void %kfn({descs})")
        emit("  call void @PyEval_RestoreThread(ptr %ts)")
        emit("  br label %done")
    emit("done:")
    if can_alloc:
        emit(f"  %given2 = icmp eq i64 %nargs, {n_ops}")
        emit("  br i1 %given2, label %done.given, label %done.new")
        emit("done.new:")
        emit("  %newout = load ptr, ptr %res")
        emit("  ret ptr %newout")  # (a new reference already)
        emit("done.given:")
    emit(f"  %outp = getelementptr ptr, ptr %args, i64 {last}")
    emit("  %out = load ptr, ptr %outp")
    emit("  call void @Py_IncRef(ptr %out)")
    emit("  ret ptr %out")
    emit("bad:")
    emit("  call void @Py_IncRef(ptr @_Py_NoneStruct)")
    emit("  ret ptr @_Py_NoneStruct")
    emit("}")
    if parallel is not None:
        lines.extend(_task_ir(operands, parallel, name))
    return "\n".join(lines) + "\n"


def _generation_ir() -> list[str]:
    """Blocks `gen` ..: when the context names a session (slot 5), go on to `op0` only while
    `session.table.generation` (attribute names in slots 8 and 9) equals slot 6, else `bad`."""
    return [
        "gen:",
        "  %sessp = getelementptr i64, ptr %ctx, i64 5",
        "  %sess = load ptr, ptr %sessp",
        "  %nosess = icmp eq ptr %sess, null",
        "  br i1 %nosess, label %op0, label %gen.t",
        "gen.t:",
        "  %ntabp = getelementptr i64, ptr %ctx, i64 8",
        "  %ntab = load ptr, ptr %ntabp",
        "  %tab = call ptr @PyObject_GetAttr(ptr %sess, ptr %ntab)",
        "  %tabnull = icmp eq ptr %tab, null",
        "  br i1 %tabnull, label %gen.clear, label %gen.g",
        "gen.g:",
        "  %ngenp = getelementptr i64, ptr %ctx, i64 9",
        "  %ngen = load ptr, ptr %ngenp",
        "  %gobj = call ptr @PyObject_GetAttr(ptr %tab, ptr %ngen)",
        "  call void @Py_DecRef(ptr %tab)",
        "  %gnull = icmp eq ptr %gobj, null",
        "  br i1 %gnull, label %gen.clear, label %gen.v",
        "gen.v:",
        "  %g = call i64 @PyLong_AsLongLong(ptr %gobj)",
        "  call void @Py_DecRef(ptr %gobj)",
        "  %wantp = getelementptr i64, ptr %ctx, i64 6",
        "  %want = load i64, ptr %wantp",
        "  %geq = icmp eq i64 %g, %want",
        "  br i1 %geq, label %op0, label %gen.ne",
        "gen.ne:",  # -1 may be an error (an int too large): clear it; never an exception with None
        "  %gm1 = icmp eq i64 %g, -1",
        "  br i1 %gm1, label %gen.clear, label %bad",
        "gen.clear:",
        "  call void @PyErr_Clear()",
        "  br label %bad",
    ]


def _alloc_ir(rank: int, slot: int, index: int) -> list[str]:
    """Blocks `alloc` ..: every input passed; the output (operand `index`, expected dims at ctx
    slot `slot`, all concrete) is made with numpy's PyArray_NewFromDescr (ctx slot 3, descr in
    slot 4, whose reference it steals) and described in `%d{index}`; NULL (MemoryError set) out."""
    d = f"%d{index}"
    out = ["alloc:",
           "  %anewp = getelementptr i64, ptr %ctx, i64 3",
           "  %anew = load ptr, ptr %anewp",
           "  %descp = getelementptr i64, ptr %ctx, i64 4",
           "  %desc = load ptr, ptr %descp",
           "  call void @Py_IncRef(ptr %desc)",
           f"  %adims = getelementptr i64, ptr %ctx, i64 {slot}",
           f"  %new = call ptr %anew(ptr %atp, ptr %desc, i32 {rank}, ptr %adims, ptr null, ptr null, i32 0, ptr null)",
           "  %newnull = icmp eq ptr %new, null",
           "  br i1 %newnull, label %alloc.fail, label %alloc.d",
           "alloc.fail:",
           "  ret ptr null",
           "alloc.d:",
           "  store ptr %new, ptr %res",
           "  %andp = getelementptr i8, ptr %new, i64 16",
           "  %andata = load ptr, ptr %andp",
           f"  store ptr %andata, ptr {d}",
           f"  %anal = getelementptr i8, ptr {d}, i64 8",
           f"  store ptr %andata, ptr %anal",
           f"  %anof = getelementptr i8, ptr {d}, i64 16",
           f"  store i64 0, ptr %anof"]
    sizes = []
    for k in range(rank):
        out += [f"  %anep{k} = getelementptr i64, ptr %ctx, i64 {slot + k}",
                f"  %ane{k} = load i64, ptr %anep{k}",
                f"  %ansz{k} = getelementptr i8, ptr {d}, i64 {24 + 8 * k}",
                f"  store i64 %ane{k}, ptr %ansz{k}"]
        sizes.append(f"%ane{k}")
    stride = "1"
    for k in range(rank - 1, -1, -1):
        out += [f"  %anst{k}p = getelementptr i8, ptr {d}, i64 {24 + 8 * rank + 8 * k}",
                f"  store i64 {stride}, ptr %anst{k}p"]
        if k:
            out.append(f"  %anst{k} = mul i64 {stride}, {sizes[k]}")
            stride = f"%anst{k}"
    out.append("  br label %call")
    return out


def _task_ir(operands: Sequence[Any], blocks: Sequence[int], name: str) -> list[str]:
    """The pool task of a parallel thunk: `task(env, c)` calls the kernel on chunk c,
    on descriptors copied from the full call's with axis 0 (or the block) offset."""
    out = [f"define internal void @{name}_task(ptr %env, i64 %c) {{", "entry:"]
    emit = out.append
    for i, (_, rank) in enumerate(operands):
        ty = f"{{ ptr, ptr, i64, [{rank} x i64], [{rank} x i64] }}" if rank else "{ ptr, ptr, i64 }"
        emit(f"  %t{i} = alloca {ty}")
    emit("  %kfn = load ptr, ptr %env")
    emit("  %leadp = getelementptr i64, ptr %env, i64 1")
    emit("  %lead = load i64, ptr %leadp")
    emit("  %np = getelementptr i64, ptr %env, i64 2")
    emit("  %n = load i64, ptr %np")
    emit("  %lo = mul i64 %lead, %c")
    emit("  %start = udiv i64 %lo, %n")
    emit("  %c1 = add i64 %c, 1")
    emit("  %hi = mul i64 %lead, %c1")
    emit("  %stop = udiv i64 %hi, %n")
    emit("  %len = sub i64 %stop, %start")
    emit("  %empty = icmp eq i64 %len, 0")
    emit("  br i1 %empty, label %skip, label %go")
    emit("go:")
    for i, ((dtype, rank), block) in enumerate(zip(operands, blocks)):
        ty = f"{{ ptr, ptr, i64, [{rank} x i64], [{rank} x i64] }}" if rank else "{ ptr, ptr, i64 }"
        emit(f"  %sp{i} = getelementptr i64, ptr %env, i64 {3 + i}")
        emit(f"  %src{i} = load ptr, ptr %sp{i}")
        emit(f"  %v{i} = load {ty}, ptr %src{i}")
        emit(f"  store {ty} %v{i}, ptr %t{i}")
        emit(f"  %data{i} = load ptr, ptr %src{i}")
        if block:
            emit(f"  %el{i} = mul i64 %c, {block}")
            size = str(block)
        else:
            emit(f"  %st0p{i} = getelementptr i8, ptr %src{i}, i64 {24 + 8 * rank}")
            emit(f"  %st0{i} = load i64, ptr %st0p{i}")
            emit(f"  %el{i} = mul i64 %start, %st0{i}")
            size = "%len"
        emit(f"  %by{i} = mul i64 %el{i}, {dtype.itemsize}")
        emit(f"  %cd{i} = getelementptr i8, ptr %data{i}, i64 %by{i}")
        emit(f"  store ptr %cd{i}, ptr %t{i}")
        emit(f"  %ta{i} = getelementptr i8, ptr %t{i}, i64 8")
        emit(f"  store ptr %cd{i}, ptr %ta{i}")
        if rank:
            emit(f"  %ts0{i} = getelementptr i8, ptr %t{i}, i64 24")
            emit(f"  store i64 {size}, ptr %ts0{i}")
    emit(f"  call void %kfn({', '.join(f'ptr %t{i}' for i in range(len(operands)))})")
    emit("  br label %skip")
    emit("skip:")
    emit("  ret void")
    emit("}")
    return out


def descriptor_task_ir(n_args: int, name: str = "fb_desc_task") -> str:
    """LLVM IR of a pool task (pool.py) over prepared memref descriptors: `task(env, c)` calls
    the kernel `env[0]` with the `n_args` descriptor addresses `env[1 + c*n_args ...]` (the
    descriptors of chunk c, split_call.py). One per arity, any kernel of it."""
    lines = [f"define void @{name}(ptr %env, i64 %c) {{", "entry:", "  %kfn = load ptr, ptr %env",
             f"  %row = mul i64 %c, {n_args}", "  %first = add i64 %row, 1"]
    for k in range(n_args):
        lines += [f"  %i{k} = add i64 %first, {k}", f"  %p{k} = getelementptr i64, ptr %env, i64 %i{k}",
                  f"  %a{k} = load ptr, ptr %p{k}"]
    lines += [f"  call void %kfn({', '.join(f'ptr %a{k}' for k in range(n_args))})", "  ret void", "}"]
    return "\n".join(lines) + "\n"


__all__ = ["ANY_DIM", "PLAIN_HEAD", "descriptor_task_ir", "thunk_ir"]
