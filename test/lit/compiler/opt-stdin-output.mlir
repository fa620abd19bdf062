// Reads stdin, writes -o.
// RUN: fusebind-opt < %s | filecheck %s
// RUN: fusebind-opt %s -o %t && filecheck %s < %t
// CHECK-LABEL: func.func @f(
// CHECK-NEXT: %0 = prim.relu %a : tensor<4xf32> -> tensor<4xf32>
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = prim.relu %a : tensor<4xf32> -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
