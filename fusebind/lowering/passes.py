"""`fusebind-opt` passes of the lowering package.

Owns: `annotate-cost`, `decompose-fused`, `lower-to-linalg`, `lower-to-llvm`.
They register with the driver's registry on import (the driver imports
`fusebind.lowering.opt_passes`, which imports this module).

- annotate-cost: writes `#fused.cost<flops, bytes, ns>` (Layer 1, composed with
  the documented default machine so output is deterministic) on every region.
- decompose-fused: inlines every region (arm 0). A region that cannot be
  inlined stops the pass with the diagnostic of `inline_region`.
- lower-to-linalg{dynamic fastmath rowwise}: replaces the module by the upstream MLIR
  (linalg on tensors) of its kernels: one func per `fused.region`, or per
  `func.func` when the module has no regions. The result is printed by the
  driver; upstream MLIR parses and verifies it (test/lit/lowering).
- lower-to-llvm{dynamic fastmath}: makes the LLVM IR of those kernels the
  pipeline's text output (`set_text_output`): `fusebind-opt` prints that text
  instead of the module (LLVM IR is not MLIR), to stdout or `-o`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from fusebind.dialect.errors import FusebindValueError
from fusebind.compiler.passes import register_pass, set_text_output
from fusebind.lowering.errors import LoweringError


def _regions(module: ModuleOp) -> list[Any]:
    return [op for op in module.walk() if op.name == "fused.region"]


def _kernel_texts(module: ModuleOp, dynamic: bool, fastmath: bool, rowwise: bool = True,
                  xdsl_readable: bool = False) -> list[Any]:
    """xdsl_readable: fastmath without `llvm.intr.ldexp` (xDSL cannot parse it back)."""
    from fusebind.lowering.build import default_fastmath
    from fusebind.lowering.emit import emit_linalg

    fm = default_fastmath(ldexp=False if xdsl_readable else None) if fastmath else None
    kw: dict[str, Any] = {"dynamic": dynamic, "fastmath": fm[0] if fm else None,
                          "fastmath_defs": fm[1] if fm else None, "rowwise": rowwise}
    regions = _regions(module)
    if regions:
        return [emit_linalg(r, f"fb_{r.properties['name'].data}_{i}", **kw) for i, r in enumerate(regions)]
    funcs = [op for op in module.ops if op.name == "func.func"]
    return [emit_linalg(f, f"fb_{f.properties['sym_name'].data}", **kw) for f in funcs]


def merge_modules(texts: list[str]) -> str:
    """One module from several emitted ones; shared private fastmath funcs appear once."""
    seen: set[str] = set()
    parts: list[str] = []
    for text in texts:
        body = text.strip().removeprefix("module {").removesuffix("}")
        for chunk in body.split("func.func ")[1:]:
            head = chunk.split("(", 1)[0]
            if head in seen:
                continue
            seen.add(head)
            parts.append("func.func " + chunk)
    return "module {\n" + "".join(parts) + "}\n"


@register_pass
@dataclass(frozen=True)
class AnnotateCostPass(ModulePass):
    name = "annotate-cost"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from fusebind.compiler.cost import CostEstimate, MachineModel, compose_region_cost
        from fusebind.dialect.fused import CostAttr

        machine = MachineModel.default()
        for region in _regions(op):
            cost = compose_region_cost(region, machine)
            if isinstance(cost, CostEstimate):
                region.properties["cost"] = CostAttr(cost.flops, cost.bytes, cost.ns)


@register_pass
@dataclass(frozen=True)
class DecomposeFusedPass(ModulePass):
    name = "decompose-fused"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from fusebind.compiler.inline import inline_region

        for region in reversed(_regions(op)):
            result = inline_region(region)
            if not result.inlined:
                raise FusebindValueError(result.diagnostic)


@register_pass
@dataclass(frozen=True)
class LowerToLinalgPass(ModulePass):
    name = "lower-to-linalg"
    dynamic: bool = False
    fastmath: bool = True
    # The row-wise form writes each row with materialize_in_destination into a strided
    # memref.subview; xDSL's op definition only admits identity layouts there, so this
    # xDSL round trip prints the whole-tensor form unless asked (upstream accepts both).
    rowwise: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from xdsl.dialects import get_all_dialects
        from xdsl.parser import Parser

        text = merge_modules([k.text for k in _kernel_texts(op, self.dynamic, self.fastmath, self.rowwise,
                                                      xdsl_readable=True)])
        upstream = Context()
        for name, factory in get_all_dialects().items():
            upstream.register_dialect(name, factory)
        parsed = Parser(upstream, text).parse_module()
        for child in list(op.body.block.ops):
            child.detach()
            child.erase()
        for child in list(parsed.body.block.ops):
            child.detach()
            op.body.block.add_op(child)


@register_pass
@dataclass(frozen=True)
class LowerToLlvmPass(ModulePass):
    name = "lower-to-llvm"
    dynamic: bool = False
    fastmath: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from fusebind.lowering.pipeline import lower_to_llvm_ir

        text = merge_modules([k.text for k in _kernel_texts(op, self.dynamic, self.fastmath)])
        try:
            llvm_ir = lower_to_llvm_ir(text)
        except LoweringError as exc:
            raise FusebindValueError(f"{exc}") from None
        set_text_output(op, llvm_ir)
        for child in list(op.body.block.ops):
            child.detach()
            child.erase()
