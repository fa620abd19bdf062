// Round trip of prim.concat (issue 13), in custom and generic form: two and three operands, one
// operand, a zero-length piece, a dynamic dim along and across the axis, bool.
// RUN: fusebind-opt %s | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// GENERIC: "prim.concat"(%a, %b) <{axis = 1 : i64}> : (tensor<6x4xf32>, tensor<6x2xf32>) -> tensor<6x6xf32>

// CHECK-LABEL: func.func @concats
// CHECK-NEXT: %0 = prim.concat %a, %b {axis = 1} : (tensor<6x4xf32>, tensor<6x2xf32>) -> tensor<6x6xf32>
// CHECK-NEXT: %1 = prim.concat %a, %a, %a {axis = 0} : (tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<18x4xf32>
// CHECK-NEXT: %2 = prim.concat %a {axis = 0} : tensor<6x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT: %3 = prim.concat %z, %a {axis = 0} : (tensor<0x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: %4 = prim.concat %d, %e {axis = 0} : (tensor<?x3xi1>, tensor<2x?xi1>) -> tensor<?x3xi1>
func.func @concats(%a: tensor<6x4xf32>, %b: tensor<6x2xf32>, %z: tensor<0x4xf32>, %d: tensor<?x3xi1>,
                   %e: tensor<2x?xi1>) -> (tensor<6x6xf32>, tensor<18x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<?x3xi1>) {
  %0 = prim.concat %a, %b {axis = 1} : (tensor<6x4xf32>, tensor<6x2xf32>) -> tensor<6x6xf32>
  %1 = prim.concat %a, %a, %a {axis = 0} : (tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<18x4xf32>
  %2 = prim.concat %a {axis = 0} : tensor<6x4xf32> -> tensor<6x4xf32>
  %3 = prim.concat %z, %a {axis = 0} : (tensor<0x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  %4 = prim.concat %d, %e {axis = 0} : (tensor<?x3xi1>, tensor<2x?xi1>) -> tensor<?x3xi1>
  func.return %0, %1, %2, %3, %4 : tensor<6x6xf32>, tensor<18x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<?x3xi1>
}
