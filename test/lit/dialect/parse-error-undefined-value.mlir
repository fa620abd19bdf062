// A value used but never defined is reported at its first use (line 8,
// column 21), not at the end of the function or file.
// RUN: not fusebind-opt %s 2>&1 | filecheck %s
// CHECK: parse-error-undefined-value.mlir:8:21: error: use of undefined value %zz (also undefined: %yy){{$}}
// CHECK-NOT: Traceback

func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = prim.add %a, %zz : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = prim.exp %0 : tensor<4xf32> -> tensor<4xf32>
  %2 = prim.mul %1, %yy : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = prim.sub %2, %zz : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %3 : tensor<4xf32>
}
