// Round trip of prim.scan (issue 14: cumsum / cumprod), in custom and generic form.
// RUN: fusebind-opt %s | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// GENERIC: "prim.scan"(%a) <{kind = "sum", axis = 1 : i64}> : (tensor<4x5xf32>) -> tensor<4x5xf32>

// CHECK-LABEL: func.func @scans
// CHECK-NEXT: %0 = prim.scan %a {kind = "sum", axis = 1 : i64} : tensor<4x5xf32> -> tensor<4x5xf32>
// CHECK-NEXT: %1 = prim.scan %b {kind = "prod", axis = 0 : i64} : tensor<3xi32> -> tensor<3xi32>
func.func @scans(%a: tensor<4x5xf32>, %b: tensor<3xi32>) -> (tensor<4x5xf32>, tensor<3xi32>) {
  %0 = prim.scan %a {kind = "sum", axis = 1} : tensor<4x5xf32> -> tensor<4x5xf32>
  %1 = prim.scan %b {kind = "prod", axis = 0} : tensor<3xi32> -> tensor<3xi32>
  func.return %0, %1 : tensor<4x5xf32>, tensor<3xi32>
}
