// A verifier failure: the op's location and message, exit 1.
// RUN: not fusebind-opt %s 2>&1 | filecheck %s
// CHECK: opt-verify-error.mlir:[[# @LINE + 3]]:3: error: prim.add: operand shapes (4,) and (5,) do not broadcast
// CHECK-NOT: Traceback
func.func @f(%a: tensor<4xf32>, %b: tensor<5xf32>) -> tensor<4xf32> {
  %0 = prim.add %a, %b : (tensor<4xf32>, tensor<5xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
