// A file that does not parse: a located diagnostic, exit 1, no traceback.
// RUN: not fusebind-opt %s 2>&1 | filecheck %s
// CHECK: opt-parse-error.mlir:[[# @LINE + 3]]:{{[0-9]+}}: error:
// CHECK-NOT: Traceback
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = prim.add %a %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
