# RUN: %python %s | filecheck %s
# A pass whose product is text (set_text_output) ends the pipeline: the driver
# prints that text instead of the module, and refuses passes after it.
import io
from dataclasses import dataclass

from xdsl.passes import ModulePass

from fusebind.tools.opt import run_opt
from fusebind.compiler.passes import PassRegistry, StripFusedPass, VerifyPass, set_text_output

registry = PassRegistry()
registry.register(VerifyPass)
registry.register(StripFusedPass)


@registry.register
@dataclass(frozen=True)
class CountOps(ModulePass):
    name = "count-ops"

    def apply(self, ctx, op):
        names = [o.name for o in op.walk() if o.name.startswith("prim.")]
        set_text_output(op, f"; {len(names)} prim ops\n")
        set_text_output(op, "; " + " ".join(names) + "\n")


IR = """
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = fused.region @twice (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %y = prim.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %z = prim.exp %y : tensor<4xf32> -> tensor<4xf32>
    fused.yield %z : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}
"""


def run(pipeline):
    out, err = io.StringIO(), io.StringIO()
    code = run_opt(["-p", pipeline], io.StringIO(IR), out, err, registry)
    print(f"exit {code}")
    print(out.getvalue(), end="")
    print(err.getvalue(), end="")
    print("====")


run("strip-fused,count-ops")
# CHECK: exit 0
# CHECK-NEXT: ; 2 prim ops
# CHECK-NEXT: ; prim.add prim.exp
# CHECK-NEXT: ====

run("count-ops")
# CHECK: exit 0
# CHECK-NOT: builtin.module
# CHECK-NOT: text_output
# CHECK: ; 2 prim ops
# CHECK-NEXT: ; prim.add prim.exp
# CHECK-NEXT: ====

run("count-ops,verify")
# CHECK: exit 1
# CHECK-NEXT: <stdin>: error: pass 'count-ops' produces text (not IR), so it must end the pipeline; 'verify' follows it: remove 'verify' or move it before 'count-ops'
# CHECK-NEXT: ====

run("verify")
# CHECK: exit 0
# CHECK-NEXT: builtin.module {
# CHECK-NOT: text_output
# CHECK: ====
