// Round trip of prim.scatter (issue 13), in custom and generic form: every mode, an axis other than
// 0, in_bounds, a broadcast (0-d) update and indices broadcast off the axis, i32 indices, bool, a
// dynamic dim.
// RUN: fusebind-opt %s | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// GENERIC: "prim.scatter"(%x, %i, %v) <{mode = "add", axis = 0 : i64}> : (tensor<8xf32>, tensor<5xi64>, tensor<5xf32>) -> tensor<8xf32>
// GENERIC: "prim.scatter"(%m, %j, %s) <{mode = "max", axis = 1 : i64, in_bounds}> : (tensor<3x4xi32>, tensor<1x6xi32>, tensor<i64>) -> tensor<3x4xi32>

// CHECK-LABEL: func.func @scatters
// CHECK-NEXT: %0 = prim.scatter %x, %i, %v {mode = "add", axis = 0} : (tensor<8xf32>, tensor<5xi64>, tensor<5xf32>) -> tensor<8xf32>
// CHECK-NEXT: %1 = prim.scatter %x, %i, %v {mode = "set", axis = 0} : (tensor<8xf32>, tensor<5xi64>, tensor<5xf32>) -> tensor<8xf32>
// CHECK-NEXT: %2 = prim.scatter %m, %j, %s {mode = "max", axis = 1, in_bounds} : (tensor<3x4xi32>, tensor<1x6xi32>, tensor<i64>) -> tensor<3x4xi32>
// CHECK-NEXT: %3 = prim.scatter %m, %j, %s {mode = "mul", axis = 1} : (tensor<3x4xi32>, tensor<1x6xi32>, tensor<i64>) -> tensor<3x4xi32>
// CHECK-NEXT: %4 = prim.scatter %b, %k, %t {mode = "min", axis = 0} : (tensor<?x2xi1>, tensor<4x2xi64>, tensor<2xi1>) -> tensor<?x2xi1>
func.func @scatters(%x: tensor<8xf32>, %i: tensor<5xi64>, %v: tensor<5xf32>, %m: tensor<3x4xi32>, %j: tensor<1x6xi32>,
                    %s: tensor<i64>, %b: tensor<?x2xi1>, %k: tensor<4x2xi64>, %t: tensor<2xi1>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<3x4xi32>, tensor<3x4xi32>, tensor<?x2xi1>) {
  %0 = prim.scatter %x, %i, %v {mode = "add", axis = 0} : (tensor<8xf32>, tensor<5xi64>, tensor<5xf32>) -> tensor<8xf32>
  %1 = prim.scatter %x, %i, %v {mode = "set", axis = 0} : (tensor<8xf32>, tensor<5xi64>, tensor<5xf32>) -> tensor<8xf32>
  %2 = prim.scatter %m, %j, %s {mode = "max", axis = 1, in_bounds} : (tensor<3x4xi32>, tensor<1x6xi32>, tensor<i64>) -> tensor<3x4xi32>
  %3 = "prim.scatter"(%m, %j, %s) <{mode = "mul", axis = 1 : i64}> : (tensor<3x4xi32>, tensor<1x6xi32>, tensor<i64>) -> tensor<3x4xi32>
  %4 = prim.scatter %b, %k, %t {mode = "min", axis = 0} : (tensor<?x2xi1>, tensor<4x2xi64>, tensor<2xi1>) -> tensor<?x2xi1>
  func.return %0, %1, %2, %3, %4 : tensor<8xf32>, tensor<8xf32>, tensor<3x4xi32>, tensor<3x4xi32>, tensor<?x2xi1>
}
