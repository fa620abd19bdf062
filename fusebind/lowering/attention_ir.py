"""The native attention kernel: LLVM IR text of one attention task, `softmax(q @ kT * c + bias) @ v`.

Owns `ENV` (the word layout of the kernel's environment, an i64 array the runtime fills),
`BLOCK_FIELDS` (the words of one query block's plan), `attention_ir` (the IR text) and
`compile_attention` (that text -> object code exporting `fb_attention_api`).

One task is one (batch/head, query block): the block's scores against its key span by one
sgemm (the cblas address is embedded, as in blas_ir.py), then per row the scale (`c`, a
multiply or a divide, as numpy's program does it, on the scores), the block's 0 / -inf tile on
the columns it covers (a causal mask's diagonal block: -inf replaces the score, as numpy's
`where` does, so a NaN score that is masked out is gone too), the row max, and
`exp(x - max)` in place with the row sum (a positive multiplier is folded into it instead,
`exp((x - max) * c)`: max(x * c) is max(x) * c, one pass over the row less), then `p @ v` by a second sgemm into the block's
rows of `out`, and each output row divided by its sum (numpy normalises p first: dividing the
`rows x Dv` outputs instead of the `rows x keys` probabilities is one rounding moved, within
the fused-arm tolerance). The scores of one block, `rows x keys`, are the only scratch: a
slot of the env's scratch claimed by compare-and-swap (as many slots as threads can run at
once), so the task is the pool's `fn(env, c)` with no thread id. What a task computes depends
only on c (the plan is fixed by shape), never on the thread that runs it.

exp is a vectorised polynomial (Cephes' single-precision coefficients, 8 lanes): inputs
below -87.3 (where 2^n leaves the normal range) give exactly 0 (numpy gives a subnormal of at
most 1e-38, relatively nothing next to the row's exp(0) = 1), -inf gives 0, NaN stays NaN.

This is code generation, so it lives in lowering; binding the addresses and filling the env
are the runtime's (runtime/attention_native.py). The object embeds the gemm's address: valid
in one process only, never cached.

Must not: import the runtime, or decide which regions or masks the kernel takes.
"""

from __future__ import annotations

import struct

__all__ = ["BLOCK_FIELDS", "ENTRY", "ENV", "LANES", "attention_ir", "compile_attention"]

#: the env's words (i64 each; pointers as integers, the scale as a double's bits)
ENV = {name: i for i, name in enumerate((
    "q", "kt", "v", "out",                  # base addresses
    "qoff", "ktoff", "voff", "ooff",        # addresses of i64[nbh]: each batch/head's element offset
    "q_s0", "q_s1", "kt_s0", "kt_s1", "v_s0", "v_s1", "o_s0",  # matrix strides (elements); out's inner is 1
    "d", "dv", "nblocks", "nbh",
    "blocks",                               # address of i64[nblocks * BLOCK_FIELDS]
    "bias",                                 # address of the packed bias tiles (elements)
    "scale_kind", "scale",                  # 0: none, 1: multiply, 2: divide, 3: a folded
                                            # multiply (c > 0: exp((x - max) * c)); the double's bits
    "scratch", "slot_elems", "nslots", "slots", "rows_max",
))}
#: one block's plan: rows [i0, i1), keys [lo, hi), the bias tile on columns [c0, c1) (relative
#: to lo) at element offset boff of the bias array (-1: no tile)
BLOCK_FIELDS = ("i0", "i1", "lo", "hi", "c0", "c1", "boff")
LANES = 8
#: the exported symbol: `fb_attention_api(out)` writes the task's and the serial loop's addresses
ENTRY = "fb_attention_api"

_V = f"<{LANES} x float>"


def _f(v: float) -> str:
    """An f32 constant as LLVM IR spells it: the double of the nearest float, in hex."""
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", struct.unpack("<f", struct.pack("<f", v))[0]))[0]


def _splat(value: str) -> str:
    return f"<{', '.join(f'float {value}' for _ in range(LANES))}>"


def _word(name: str) -> str:
    """IR loading env word `name` into %<name> (an i64)."""
    return f"  %{name}.p = getelementptr i64, ptr %env, i64 {ENV[name]}\n  %{name} = load i64, ptr %{name}.p"


def _ptr_word(name: str) -> str:
    return _word(name) + f"\n  %{name}.ptr = inttoptr i64 %{name} to ptr"


def _exp8() -> str:
    """@exp8(<8 x float>): see the module docstring."""
    s = _splat
    return f"""
define internal {_V} @exp8({_V} %x) alwaysinline {{
  %lo = fcmp olt {_V} %x, {s(_f(-87.3))}
  %xc0 = select <{LANES} x i1> %lo, {_V} {s(_f(-87.3))}, {_V} %x
  %hi = fcmp ogt {_V} %xc0, {s(_f(88.3))}
  %xc = select <{LANES} x i1> %hi, {_V} {s(_f(88.3))}, {_V} %xc0
  %t = fmul contract {_V} %xc, {s(_f(1.44269504088896341))}
  %t1 = fadd contract {_V} %t, {s('0.5')}
  %fx = call {_V} @llvm.floor.v{LANES}f32({_V} %t1)
  %r0 = fmul contract {_V} %fx, {s(_f(0.693359375))}
  %r1 = fsub contract {_V} %xc, %r0
  %r2 = fmul contract {_V} %fx, {s(_f(-2.12194440e-4))}
  %r = fsub contract {_V} %r1, %r2
  %p0 = fmul contract {_V} %r, {s(_f(1.9875691500e-4))}
  %p1 = fadd contract {_V} %p0, {s(_f(1.3981999507e-3))}
  %p2 = fmul contract {_V} %p1, %r
  %p3 = fadd contract {_V} %p2, {s(_f(8.3334519073e-3))}
  %p4 = fmul contract {_V} %p3, %r
  %p5 = fadd contract {_V} %p4, {s(_f(4.1665795894e-2))}
  %p6 = fmul contract {_V} %p5, %r
  %p7 = fadd contract {_V} %p6, {s(_f(1.6666665459e-1))}
  %p8 = fmul contract {_V} %p7, %r
  %p9 = fadd contract {_V} %p8, {s(_f(0.5))}
  %rr = fmul contract {_V} %r, %r
  %pa = fmul contract {_V} %p9, %rr
  %pb = fadd contract {_V} %pa, %r
  %y = fadd contract {_V} %pb, {s('1.0')}
  %nan = fcmp uno {_V} %x, %x
  %fxs = select <{LANES} x i1> %nan, {_V} zeroinitializer, {_V} %fx
  %n = fptosi {_V} %fxs to <{LANES} x i32>
  %nb = add <{LANES} x i32> %n, <{', '.join('i32 127' for _ in range(LANES))}>
  %sh = shl <{LANES} x i32> %nb, <{', '.join('i32 23' for _ in range(LANES))}>
  %two = bitcast <{LANES} x i32> %sh to {_V}
  %e = fmul {_V} %y, %two
  %ez = select <{LANES} x i1> %lo, {_V} zeroinitializer, {_V} %e
  ret {_V} %ez
}}

define internal float @exp1(float %x) alwaysinline {{
  %v = insertelement {_V} undef, float %x, i64 0
  %e = call {_V} @exp8({_V} %v)
  %r = extractelement {_V} %e, i64 0
  ret float %r
}}
"""


def _row_scalar_op(name: str, op: str, sign: str) -> str:
    """@row_<name>(x, n, c): x[j] = x[j] <sign> c for j < n (8 lanes, then a scalar tail)."""
    return f"""
; x[j] = x[j] {sign} c for j < n
define internal void @row_{name}(ptr %x, i64 %n, float %c) alwaysinline {{
entry:
  %cv0 = insertelement {_V} undef, float %c, i64 0
  %cv = shufflevector {_V} %cv0, {_V} undef, <{LANES} x i32> zeroinitializer
  br label %vh
vh:
  %j = phi i64 [0, %entry], [%j8, %vb]
  %j8 = add i64 %j, {LANES}
  %vok = icmp sle i64 %j8, %n
  br i1 %vok, label %vb, label %th
vb:
  %p = getelementptr float, ptr %x, i64 %j
  %a = load {_V}, ptr %p, align 4
  %r = {op} {_V} %a, %cv
  store {_V} %r, ptr %p, align 4
  br label %vh
th:
  %k = phi i64 [%j, %vh], [%k1, %tb]
  %tok = icmp slt i64 %k, %n
  br i1 %tok, label %tb, label %done
tb:
  %tp = getelementptr float, ptr %x, i64 %k
  %ta = load float, ptr %tp
  %tr = {op} float %ta, %c
  store float %tr, ptr %tp
  %k1 = add i64 %k, 1
  br label %th
done:
  ret void
}}
"""


def _row_loops() -> str:
    """Per-row helpers over n contiguous floats: 8 lanes, then a scalar tail."""
    s = _splat
    return f"""
; x[j] = b[j] where b[j] is not 0 (the tile is 0 / -inf: numpy's where(keep, s, -inf), a NaN score dropped too)
define internal void @row_mask(ptr %x, ptr %b, i64 %n) alwaysinline {{
entry:
  br label %vh
vh:
  %j = phi i64 [0, %entry], [%j8, %vb]
  %j8 = add i64 %j, {LANES}
  %vok = icmp sle i64 %j8, %n
  br i1 %vok, label %vb, label %th
vb:
  %p = getelementptr float, ptr %x, i64 %j
  %q = getelementptr float, ptr %b, i64 %j
  %a = load {_V}, ptr %p, align 4
  %c = load {_V}, ptr %q, align 4
  %z = fcmp oeq {_V} %c, zeroinitializer
  %r = select <{LANES} x i1> %z, {_V} %a, {_V} %c
  store {_V} %r, ptr %p, align 4
  br label %vh
th:
  %k = phi i64 [%j, %vh], [%k1, %tb]
  %tok = icmp slt i64 %k, %n
  br i1 %tok, label %tb, label %done
tb:
  %tp = getelementptr float, ptr %x, i64 %k
  %tq = getelementptr float, ptr %b, i64 %k
  %ta = load float, ptr %tp
  %tc = load float, ptr %tq
  %tz = fcmp oeq float %tc, 0.0
  %tr = select i1 %tz, float %ta, float %tc
  store float %tr, ptr %tp
  %k1 = add i64 %k, 1
  br label %th
done:
  ret void
}}

; the row max (NaN-propagating, as numpy's max)
define internal float @row_max(ptr %x, i64 %n) alwaysinline {{
entry:
  br label %vh
vh:
  %j = phi i64 [0, %entry], [%j8, %vb]
  %acc = phi {_V} [{s('0xFFF0000000000000')}, %entry], [%acc1, %vb]
  %j8 = add i64 %j, {LANES}
  %vok = icmp sle i64 %j8, %n
  br i1 %vok, label %vb, label %red
vb:
  %p = getelementptr float, ptr %x, i64 %j
  %a = load {_V}, ptr %p, align 4
  %acc1 = call {_V} @llvm.maximum.v{LANES}f32({_V} %acc, {_V} %a)
  br label %vh
red:
  %m0 = call float @llvm.vector.reduce.fmaximum.v{LANES}f32({_V} %acc)
  br label %th
th:
  %k = phi i64 [%j, %red], [%k1, %tb]
  %m = phi float [%m0, %red], [%m1, %tb]
  %tok = icmp slt i64 %k, %n
  br i1 %tok, label %tb, label %done
tb:
  %tp = getelementptr float, ptr %x, i64 %k
  %ta = load float, ptr %tp
  %m1 = call float @llvm.maximum.f32(float %m, float %ta)
  %k1 = add i64 %k, 1
  br label %th
done:
  ret float %m
}}

; x[j] = exp((x[j] - m) * c) in place (c: the folded positive scale, else 1); the sum of the new x (8 lanes, then lanes in order, then the tail)
define internal float @row_exp_sum(ptr %x, i64 %n, float %m, float %c) alwaysinline {{
entry:
  %mv0 = insertelement {_V} undef, float %m, i64 0
  %mv = shufflevector {_V} %mv0, {_V} undef, <{LANES} x i32> zeroinitializer
  %cv0 = insertelement {_V} undef, float %c, i64 0
  %cv = shufflevector {_V} %cv0, {_V} undef, <{LANES} x i32> zeroinitializer
  br label %vh
vh:
  %j = phi i64 [0, %entry], [%j8, %vb]
  %acc = phi {_V} [zeroinitializer, %entry], [%acc1, %vb]
  %j8 = add i64 %j, {LANES}
  %vok = icmp sle i64 %j8, %n
  br i1 %vok, label %vb, label %red
vb:
  %p = getelementptr float, ptr %x, i64 %j
  %a = load {_V}, ptr %p, align 4
  %d0 = fsub {_V} %a, %mv
  %d = fmul {_V} %d0, %cv
  %e = call {_V} @exp8({_V} %d)
  store {_V} %e, ptr %p, align 4
  %acc1 = fadd {_V} %acc, %e
  br label %vh
red:
  %s0 = call float @llvm.vector.reduce.fadd.v{LANES}f32(float 0.0, {_V} %acc)
  br label %th
th:
  %k = phi i64 [%j, %red], [%k1, %tb]
  %s = phi float [%s0, %red], [%s1, %tb]
  %tok = icmp slt i64 %k, %n
  br i1 %tok, label %tb, label %done
tb:
  %tp = getelementptr float, ptr %x, i64 %k
  %ta = load float, ptr %tp
  %td0 = fsub float %ta, %m
  %td = fmul float %td0, %c
  %te = call float @exp1(float %td)
  store float %te, ptr %tp
  %s1 = fadd float %s, %te
  %k1 = add i64 %k, 1
  br label %th
done:
  ret float %s
}}

""" + _row_scalar_op("div", "fdiv", "/") + _row_scalar_op("mul", "fmul", "*")


def _operand(name: str, s0: str, s1: str) -> str:
    """%<name>.trans (111 when the matrix's rows are unit-stride, else 112) and %<name>.ld."""
    return f"""  %{name}.unit = icmp eq i64 %{s1}, 1
  %{name}.trans = select i1 %{name}.unit, i32 111, i32 112
  %{name}.ld = select i1 %{name}.unit, i64 %{s0}, i64 %{s1}"""


def attention_ir(gemm_address: int) -> str:
    """The module: `fb_attention_task(env, c)`, `fb_attention_serial(env, ntasks)` and the
    exported `fb_attention_api(out)` (out[0] = the task, out[1] = the serial loop); the sgemm
    at `gemm_address` (cblas ILP64: `(order, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)`)."""
    words = "\n".join(_ptr_word(n) if n in ("q", "kt", "v", "out", "qoff", "ktoff", "voff", "ooff", "blocks",
                                            "bias", "scratch", "slots") else _word(n)
                      for n in ENV)
    nf = len(BLOCK_FIELDS)
    fields = "\n".join(f"  %b.{f}.p = getelementptr i64, ptr %blk, i64 {i}\n  %b.{f} = load i64, ptr %b.{f}.p"
                       for i, f in enumerate(BLOCK_FIELDS))
    return f"""declare {_V} @llvm.floor.v{LANES}f32({_V})
declare {_V} @llvm.maximum.v{LANES}f32({_V}, {_V})
declare float @llvm.maximum.f32(float, float)
declare float @llvm.vector.reduce.fmaximum.v{LANES}f32({_V})
declare float @llvm.vector.reduce.fadd.v{LANES}f32(float, {_V})
{_exp8()}
{_row_loops()}

define internal void @fb_attention_task(ptr %env, i64 %c) {{
entry:
{words}
  %scale.d = bitcast i64 %scale to double
  %scale.f = fptrunc double %scale.d to float
  ; kind 3: a positive finite multiplier folded into exp((x - max) * c), one pass less per row
  %folds = icmp eq i64 %scale_kind, 3
  %fold = select i1 %folds, float %scale.f, float 1.0
  ; heavy blocks first (a causal mask's last blocks have the most keys): block nblocks-1-c/nbh, head c%nbh
  %cb = udiv i64 %c, %nbh
  %bh = urem i64 %c, %nbh
  %bi0 = sub i64 %nblocks, 1
  %bi = sub i64 %bi0, %cb
  %bio = mul i64 %bi, {nf}
  %blk = getelementptr i64, ptr %blocks.ptr, i64 %bio
{fields}
  %m = sub i64 %b.i1, %b.i0
  %n = sub i64 %b.hi, %b.lo
  %tw = sub i64 %b.c1, %b.c0
  br label %claim
claim:
  %slot = phi i64 [0, %entry], [%slot.next, %claim.next]
  %fp = getelementptr i64, ptr %slots.ptr, i64 %slot
  %cx = cmpxchg ptr %fp, i64 0, i64 1 acquire monotonic
  %won = extractvalue {{ i64, i1 }} %cx, 1
  br i1 %won, label %got, label %claim.next
claim.next:
  %s1 = add i64 %slot, 1
  %wrap = icmp sge i64 %s1, %nslots
  %slot.next = select i1 %wrap, i64 0, i64 %s1
  br label %claim
got:
  %so = mul i64 %slot, %slot_elems
  %sums = getelementptr float, ptr %scratch.ptr, i64 %so
  %sc = getelementptr float, ptr %sums, i64 %rows_max
  %qo.p = getelementptr i64, ptr %qoff.ptr, i64 %bh
  %qo = load i64, ptr %qo.p
  %ko.p = getelementptr i64, ptr %ktoff.ptr, i64 %bh
  %ko = load i64, ptr %ko.p
  %vo.p = getelementptr i64, ptr %voff.ptr, i64 %bh
  %vo = load i64, ptr %vo.p
  %oo.p = getelementptr i64, ptr %ooff.ptr, i64 %bh
  %oo = load i64, ptr %oo.p
  %qa0 = mul i64 %b.i0, %q_s0
  %qa = add i64 %qo, %qa0
  %qp = getelementptr float, ptr %q.ptr, i64 %qa
  %ka0 = mul i64 %b.lo, %kt_s1
  %ka = add i64 %ko, %ka0
  %kp = getelementptr float, ptr %kt.ptr, i64 %ka
  %va0 = mul i64 %b.lo, %v_s0
  %va = add i64 %vo, %va0
  %vp = getelementptr float, ptr %v.ptr, i64 %va
  %oa0 = mul i64 %b.i0, %o_s0
  %oa = add i64 %oo, %oa0
  %op = getelementptr float, ptr %out.ptr, i64 %oa
{_operand("Q", "q_s0", "q_s1")}
{_operand("K", "kt_s0", "kt_s1")}
{_operand("V", "v_s0", "v_s1")}
  %gemm = inttoptr i64 {gemm_address} to ptr
  %ldn = call i64 @llvm.smax.i64(i64 %n, i64 1)
  call void %gemm(i32 101, i32 %Q.trans, i32 %K.trans, i64 %m, i64 %n, i64 %d, float 1.0, ptr %qp, i64 %Q.ld, ptr %kp, i64 %K.ld, float 0.0, ptr %sc, i64 %ldn)
  %hasbias = icmp sge i64 %b.boff, 0
  br label %rows
rows:
  %r = phi i64 [0, %got], [%r1, %row.end]
  %rok = icmp slt i64 %r, %m
  br i1 %rok, label %row, label %pv
row:
  %ro = mul i64 %r, %n
  %rp = getelementptr float, ptr %sc, i64 %ro
  switch i64 %scale_kind, label %row.scaled [i64 1, label %row.mul
                                             i64 2, label %row.div]
row.mul:
  call void @row_mul(ptr %rp, i64 %n, float %scale.f)
  br label %row.scaled
row.div:
  call void @row_div(ptr %rp, i64 %n, float %scale.f)
  br label %row.scaled
row.scaled:
  br i1 %hasbias, label %row.bias, label %row.sm
row.bias:
  %bo0 = mul i64 %r, %tw
  %bo = add i64 %b.boff, %bo0
  %bp = getelementptr float, ptr %bias.ptr, i64 %bo
  %xp = getelementptr float, ptr %rp, i64 %b.c0
  call void @row_mask(ptr %xp, ptr %bp, i64 %tw)
  br label %row.sm
row.sm:
  %mx = call float @row_max(ptr %rp, i64 %n)
  %sum = call float @row_exp_sum(ptr %rp, i64 %n, float %mx, float %fold)
  %sp = getelementptr float, ptr %sums, i64 %r
  store float %sum, ptr %sp
  br label %row.end
row.end:
  %r1 = add i64 %r, 1
  br label %rows
pv:
  call void %gemm(i32 101, i32 111, i32 %V.trans, i64 %m, i64 %dv, i64 %n, float 1.0, ptr %sc, i64 %ldn, ptr %vp, i64 %V.ld, float 0.0, ptr %op, i64 %o_s0)
  br label %norm
norm:
  %t = phi i64 [0, %pv], [%t1, %norm.body]
  %tok = icmp slt i64 %t, %m
  br i1 %tok, label %norm.body, label %release
norm.body:
  %to = mul i64 %t, %o_s0
  %tp = getelementptr float, ptr %op, i64 %to
  %tsp = getelementptr float, ptr %sums, i64 %t
  %ts = load float, ptr %tsp
  call void @row_div(ptr %tp, i64 %dv, float %ts)
  %t1 = add i64 %t, 1
  br label %norm
release:
  store atomic i64 0, ptr %fp release, align 8
  ret void
}}

define internal void @fb_attention_serial(ptr %env, i64 %ntasks) {{
entry:
  br label %h
h:
  %c = phi i64 [0, %entry], [%c1, %b]
  %ok = icmp slt i64 %c, %ntasks
  br i1 %ok, label %b, label %done
b:
  call void @fb_attention_task(ptr %env, i64 %c)
  %c1 = add i64 %c, 1
  br label %h
done:
  ret void
}}

declare i64 @llvm.smax.i64(i64, i64)

define void @{ENTRY}(ptr %out) {{
  store ptr @fb_attention_task, ptr %out
  %o1 = getelementptr ptr, ptr %out, i64 1
  store ptr @fb_attention_serial, ptr %o1
  ret void
}}
"""


def compile_attention(gemm_address: int) -> bytes:
    """Object code of `attention_ir(gemm_address)` (exports `fb_attention_api`)."""
    from fusebind.lowering.codegen import compile_llvm_ir

    return compile_llvm_ir(attention_ir(gemm_address), ENTRY)
