// An unknown op is a parse diagnostic, not a crash.
// RUN: not fusebind-opt %s 2>&1 | filecheck %s
// CHECK: opt-unknown-op.mlir:[[# @LINE + 3]]:{{[0-9]+}}: error: {{.*}}prim.frobnicate
// CHECK-NOT: Traceback
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = prim.frobnicate %a : tensor<4xf32> -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
