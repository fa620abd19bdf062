// Round trip of prim.slice (issue 13), in custom and generic form: forward, strided, reversed, empty
// and dynamic-dim slices.
// RUN: fusebind-opt %s | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// GENERIC: "prim.slice"(%a) <{starts = array<i64: 1, 0>, limits = array<i64: 6, 4>, strides = array<i64: 2, 1>}> : (tensor<6x4xf32>) -> tensor<3x4xf32>

// CHECK-LABEL: func.func @slices
// CHECK-NEXT: %0 = prim.slice %a {starts = [1, 0], limits = [6, 4], strides = [2, 1]} : tensor<6x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT: %1 = prim.slice %a {starts = [5, 3], limits = [-1, 0], strides = [-1, -2]} : tensor<6x4xf32> -> tensor<6x2xf32>
// CHECK-NEXT: %2 = prim.slice %a {starts = [2, 0], limits = [2, 4], strides = [1, 1]} : tensor<6x4xf32> -> tensor<0x4xf32>
// CHECK-NEXT: %3 = prim.slice %d {starts = [0, 1], limits = [3, 2], strides = [1, 1]} : tensor<?x3xi1> -> tensor<3x1xi1>
func.func @slices(%a: tensor<6x4xf32>, %d: tensor<?x3xi1>) -> (tensor<3x4xf32>, tensor<6x2xf32>, tensor<0x4xf32>, tensor<3x1xi1>) {
  %0 = prim.slice %a {starts = [1, 0], limits = [6, 4], strides = [2, 1]} : tensor<6x4xf32> -> tensor<3x4xf32>
  %1 = prim.slice %a {starts = [5, 3], limits = [-1, 0], strides = [-1, -2]} : tensor<6x4xf32> -> tensor<6x2xf32>
  %2 = prim.slice %a {starts = [2, 0], limits = [2, 4], strides = [1, 1]} : tensor<6x4xf32> -> tensor<0x4xf32>
  %3 = prim.slice %d {starts = [0, 1], limits = [3, 2], strides = [1, 1]} : tensor<?x3xi1> -> tensor<3x1xi1>
  func.return %0, %1, %2, %3 : tensor<3x4xf32>, tensor<6x2xf32>, tensor<0x4xf32>, tensor<3x1xi1>
}
