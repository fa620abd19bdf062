// Round trip of prim.reduce_argmax / prim.reduce_argmin / prim.reduce_prod (issue 14), custom and generic form.
// RUN: fusebind-opt %s | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | fusebind-opt | filecheck %s

// CHECK-LABEL: func.func @args
// CHECK-NEXT: %0 = prim.reduce_argmax %a {axes = [1]} : tensor<5x3xf32> -> tensor<5xi64>
// CHECK-NEXT: %1 = prim.reduce_argmin %b {axes = [0], keepdims} : tensor<?x3xi32> -> tensor<1x3xi64>
// CHECK-NEXT: %2 = prim.reduce_prod %b {axes = [0, 1]} : tensor<?x3xi32> -> tensor<i32>
func.func @args(%a: tensor<5x3xf32>, %b: tensor<?x3xi32>) -> (tensor<5xi64>, tensor<1x3xi64>, tensor<i32>) {
  %0 = prim.reduce_argmax %a {axes = [1]} : tensor<5x3xf32> -> tensor<5xi64>
  %1 = prim.reduce_argmin %b {axes = [0], keepdims} : tensor<?x3xi32> -> tensor<1x3xi64>
  %2 = prim.reduce_prod %b {axes = [0, 1]} : tensor<?x3xi32> -> tensor<i32>
  func.return %0, %1, %2 : tensor<5xi64>, tensor<1x3xi64>, tensor<i32>
}
