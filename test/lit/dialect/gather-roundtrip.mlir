// Round trip of prim.gather and prim.take_along (issue 13), in custom and generic form: ranks of
// index from 0 to 2, i32 and i64 indices, in_bounds, broadcasting take_along, a dynamic dim, an error_axis.
// RUN: fusebind-opt %s | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// GENERIC: "prim.gather"(%a, %i) <{axis = 0 : i64}> : (tensor<5x3xf32>, tensor<2x4xi64>) -> tensor<2x4x3xf32>
// GENERIC: "prim.take_along"(%a, %k) <{axis = 1 : i64, in_bounds}> : (tensor<5x3xf32>, tensor<1x2xi32>) -> tensor<5x2xf32>

// CHECK-LABEL: func.func @gathers
// CHECK-NEXT: %0 = prim.gather %a, %i {axis = 0} : (tensor<5x3xf32>, tensor<2x4xi64>) -> tensor<2x4x3xf32>
// CHECK-NEXT: %1 = prim.gather %a, %s {axis = 1} : (tensor<5x3xf32>, tensor<i32>) -> tensor<5xf32>
// CHECK-NEXT: %2 = prim.take_along %a, %k {axis = 1, in_bounds} : (tensor<5x3xf32>, tensor<1x2xi32>) -> tensor<5x2xf32>
// CHECK-NEXT: %3 = prim.take_along %d, %j {axis = 0} : (tensor<?x3xi1>, tensor<4x1xi64>) -> tensor<4x3xi1>
// CHECK-NEXT: %4 = prim.gather %a, %s {axis = 0, error_axis = 2} : (tensor<5x3xf32>, tensor<i32>) -> tensor<3xf32>
func.func @gathers(%a: tensor<5x3xf32>, %i: tensor<2x4xi64>, %s: tensor<i32>, %k: tensor<1x2xi32>,
                   %d: tensor<?x3xi1>, %j: tensor<4x1xi64>) -> (tensor<2x4x3xf32>, tensor<5xf32>, tensor<5x2xf32>, tensor<4x3xi1>, tensor<3xf32>) {
  %0 = prim.gather %a, %i {axis = 0} : (tensor<5x3xf32>, tensor<2x4xi64>) -> tensor<2x4x3xf32>
  %1 = prim.gather %a, %s {axis = 1} : (tensor<5x3xf32>, tensor<i32>) -> tensor<5xf32>
  %2 = prim.take_along %a, %k {axis = 1, in_bounds} : (tensor<5x3xf32>, tensor<1x2xi32>) -> tensor<5x2xf32>
  %3 = prim.take_along %d, %j {axis = 0} : (tensor<?x3xi1>, tensor<4x1xi64>) -> tensor<4x3xi1>
  %4 = prim.gather %a, %s {axis = 0, error_axis = 2} : (tensor<5x3xf32>, tensor<i32>) -> tensor<3xf32>
  func.return %0, %1, %2, %3, %4 : tensor<2x4x3xf32>, tensor<5xf32>, tensor<5x2xf32>, tensor<4x3xi1>, tensor<3xf32>
}
