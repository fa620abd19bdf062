// A missing `>` is reported where it is missing: at the end of the type that
// lacks it (line 9), not at the first token of the next line (MLIR's rule).
// RUN: not fusebind-opt %s 2>&1 | filecheck %s
// CHECK: parse-error-missing-angle.mlir:9:72: error: Expected '>' after builtin parameter list
// CHECK-NOT: Traceback

func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = prim.exp %a : tensor<4xf32> -> tensor<4xf32>
  %1 = prim.add %0, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32
  // a comment and a blank line between do not move the error either

  func.return %1 : tensor<4xf32>
}
