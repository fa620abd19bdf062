// Round trip of every prim op, in custom and generic form.
// RUN: fusebind-opt %s | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// GENERIC: "prim.add"(%a, %b) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
// GENERIC: "prim.floordiv"(%a, %b) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
// GENERIC: "prim.rem"(%i, %j) : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// GENERIC: "prim.compare"(%a, %b) <{predicate = "lt"}> : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
// GENERIC: "prim.constant"() <{value = dense<7> : tensor<4xi64>}> : () -> tensor<4xi64>
// GENERIC: "prim.transpose"(%d) <{perm = array<i64: 1, 0>}> : (tensor<?x3xi32>) -> tensor<3x?xi32>
// GENERIC: "prim.reduce_max"(%a) <{axes = array<i64: 0>, keepdims}> : (tensor<4x8x2xf32>) -> tensor<1x8x2xf32>
// GENERIC: "prim.reduce_min"(%q) <{axes = array<i64: 1>}> : (tensor<3x5xi1>) -> tensor<3xi1>

// CHECK-LABEL: func.func @unary(
// CHECK-NEXT: %0 = prim.neg %a : tensor<4x?xf32> -> tensor<4x?xf32>
// CHECK-NEXT: %1 = prim.abs %0 : tensor<4x?xf32> -> tensor<4x?xf32>
// CHECK-NEXT: %2 = prim.exp %1 : tensor<4x?xf32> -> tensor<4x?xf32>
// CHECK-NEXT: %3 = prim.log %2 : tensor<4x?xf32> -> tensor<4x?xf32>
// CHECK-NEXT: %4 = prim.sqrt %3 : tensor<4x?xf32> -> tensor<4x?xf32>
// CHECK-NEXT: %5 = prim.rsqrt %4 : tensor<4x?xf32> -> tensor<4x?xf32>
// CHECK-NEXT: %6 = prim.tanh %5 : tensor<4x?xf32> -> tensor<4x?xf32>
// CHECK-NEXT: %7 = prim.sigmoid %6 : tensor<4x?xf32> -> tensor<4x?xf32>
// CHECK-NEXT: %8 = prim.erf %7 : tensor<4x?xf32> -> tensor<4x?xf32>
// CHECK-NEXT: %9 = prim.relu %8 : tensor<4x?xf32> -> tensor<4x?xf32>
// CHECK-NEXT: %10 = prim.neg %i : tensor<3xi32> -> tensor<3xi32>
// CHECK-NEXT: %11 = prim.abs %10 : tensor<3xi32> -> tensor<3xi32>
// CHECK-NEXT: %12 = prim.relu %11 : tensor<3xi32> -> tensor<3xi32>
// CHECK-NEXT: %13 = prim.exp %d : tensor<2x2xf64> -> tensor<2x2xf64>
// CHECK-NEXT: func.return %9 : tensor<4x?xf32>
// CHECK-NEXT: }
func.func @unary(%a: tensor<4x?xf32>, %i: tensor<3xi32>, %d: tensor<2x2xf64>) -> tensor<4x?xf32> {
  %0 = prim.neg %a : tensor<4x?xf32> -> tensor<4x?xf32>
  %1 = prim.abs %0 : tensor<4x?xf32> -> tensor<4x?xf32>
  %2 = prim.exp %1 : tensor<4x?xf32> -> tensor<4x?xf32>
  %3 = prim.log %2 : tensor<4x?xf32> -> tensor<4x?xf32>
  %4 = prim.sqrt %3 : tensor<4x?xf32> -> tensor<4x?xf32>
  %5 = prim.rsqrt %4 : tensor<4x?xf32> -> tensor<4x?xf32>
  %6 = prim.tanh %5 : tensor<4x?xf32> -> tensor<4x?xf32>
  %7 = prim.sigmoid %6 : tensor<4x?xf32> -> tensor<4x?xf32>
  %8 = prim.erf %7 : tensor<4x?xf32> -> tensor<4x?xf32>
  %9 = prim.relu %8 : tensor<4x?xf32> -> tensor<4x?xf32>
  %10 = prim.neg %i : tensor<3xi32> -> tensor<3xi32>
  %11 = prim.abs %10 : tensor<3xi32> -> tensor<3xi32>
  %12 = prim.relu %11 : tensor<3xi32> -> tensor<3xi32>
  %13 = prim.exp %d : tensor<2x2xf64> -> tensor<2x2xf64>
  func.return %9 : tensor<4x?xf32>
}

// CHECK-LABEL: func.func @binary(
// CHECK-NEXT: %0 = prim.add %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %1 = prim.sub %0, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %2 = prim.mul %1, %c : (tensor<4x3xf32>, tensor<?x1xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %3 = prim.div %2, %a : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %4 = prim.max %3, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %5 = prim.min %4, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %6 = prim.pow %5, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %7 = prim.div %i, %i : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK-NEXT: %8 = prim.add %c, %b : (tensor<?x1xf32>, tensor<3xf32>) -> tensor<?x3xf32>
// CHECK-NEXT: func.return %6 : tensor<4x3xf32>
// CHECK-NEXT: }
func.func @binary(%a: tensor<4x3xf32>, %b: tensor<3xf32>, %c: tensor<?x1xf32>, %i: tensor<2xi64>) -> tensor<4x3xf32> {
  %0 = prim.add %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %1 = prim.sub %0, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %2 = prim.mul %1, %c : (tensor<4x3xf32>, tensor<?x1xf32>) -> tensor<4x3xf32>
  %3 = prim.div %2, %a : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %4 = prim.max %3, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %5 = prim.min %4, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %6 = prim.pow %5, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %7 = prim.div %i, %i : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %8 = prim.add %c, %b : (tensor<?x1xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  func.return %6 : tensor<4x3xf32>
}

// CHECK-LABEL: func.func @division_and_pow(
// CHECK-NEXT: %0 = prim.floordiv %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %1 = prim.rem %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %2 = prim.floordiv %i, %j : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK-NEXT: %3 = prim.rem %i, %j : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK-NEXT: %4 = prim.floordiv %k, %k : (tensor<?xi32>, tensor<?xi32>) -> tensor<?xi32>
// CHECK-NEXT: %5 = prim.rem %d, %d : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
// CHECK-NEXT: %6 = prim.pow %i, %j : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK-NEXT: %7 = prim.pow %k, %k : (tensor<?xi32>, tensor<?xi32>) -> tensor<?xi32>
// CHECK-NEXT: func.return %0 : tensor<4x3xf32>
// CHECK-NEXT: }
func.func @division_and_pow(%a: tensor<4x3xf32>, %b: tensor<3xf32>, %i: tensor<2xi64>, %j: tensor<2xi64>, %k: tensor<?xi32>, %d: tensor<2x2xf64>) -> tensor<4x3xf32> {
  %0 = prim.floordiv %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %1 = prim.rem %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %2 = prim.floordiv %i, %j : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %3 = prim.rem %i, %j : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %4 = prim.floordiv %k, %k : (tensor<?xi32>, tensor<?xi32>) -> tensor<?xi32>
  %5 = prim.rem %d, %d : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  %6 = prim.pow %i, %j : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %7 = prim.pow %k, %k : (tensor<?xi32>, tensor<?xi32>) -> tensor<?xi32>
  func.return %0 : tensor<4x3xf32>
}

// CHECK-LABEL: func.func @compare_select_cast(
// CHECK-NEXT: %0 = prim.compare eq %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
// CHECK-NEXT: %1 = prim.compare ne %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
// CHECK-NEXT: %2 = prim.compare lt %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
// CHECK-NEXT: %3 = prim.compare le %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
// CHECK-NEXT: %4 = prim.compare gt %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
// CHECK-NEXT: %5 = prim.compare ge %i, %i : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
// CHECK-NEXT: %6 = prim.select %2, %a, %b : (tensor<4x3xi1>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %7 = prim.select %5, %5, %5 : (tensor<3xi1>, tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
// CHECK-NEXT: %8 = prim.cast %i : tensor<3xi32> -> tensor<3xf64>
// CHECK-NEXT: %9 = prim.cast %a : tensor<4x3xf32> -> tensor<4x3xi1>
// CHECK-NEXT: %10 = prim.cast %9 : tensor<4x3xi1> -> tensor<4x3xf32>
// CHECK-NEXT: %11 = prim.cast %8 : tensor<3xf64> -> tensor<3xi64>
// CHECK-NEXT: func.return %6 : tensor<4x3xf32>
// CHECK-NEXT: }
func.func @compare_select_cast(%a: tensor<4x3xf32>, %b: tensor<3xf32>, %i: tensor<3xi32>) -> tensor<4x3xf32> {
  %0 = prim.compare eq %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
  %1 = prim.compare ne %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
  %2 = prim.compare lt %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
  %3 = prim.compare le %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
  %4 = prim.compare gt %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
  %5 = prim.compare ge %i, %i : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
  %6 = prim.select %2, %a, %b : (tensor<4x3xi1>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %7 = prim.select %5, %5, %5 : (tensor<3xi1>, tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  %8 = prim.cast %i : tensor<3xi32> -> tensor<3xf64>
  %9 = prim.cast %a : tensor<4x3xf32> -> tensor<4x3xi1>
  %10 = prim.cast %9 : tensor<4x3xi1> -> tensor<4x3xf32>
  %11 = prim.cast %8 : tensor<3xf64> -> tensor<3xi64>
  func.return %6 : tensor<4x3xf32>
}

// CHECK-LABEL: func.func @constants(
// CHECK-NEXT: %0 = prim.constant dense<[[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT: %1 = prim.constant dense<5.000000e-01> : tensor<2x2xf64>
// CHECK-NEXT: %2 = prim.constant dense<[1, -2, 3]> : tensor<3xi32>
// CHECK-NEXT: %3 = prim.constant dense<7> : tensor<4xi64>
// CHECK-NEXT: %4 = prim.constant dense<[true, false]> : tensor<2xi1>
// CHECK-NEXT: %5 = prim.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT: func.return %0 : tensor<2x2xf32>
// CHECK-NEXT: }
func.func @constants() -> tensor<2x2xf32> {
  %0 = prim.constant dense<[[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
  %1 = prim.constant dense<5.000000e-01> : tensor<2x2xf64>
  %2 = prim.constant dense<[1, -2, 3]> : tensor<3xi32>
  %3 = prim.constant dense<7> : tensor<4xi64>
  %4 = prim.constant dense<[true, false]> : tensor<2xi1>
  %5 = prim.constant dense<2.000000e+00> : tensor<f32>
  func.return %0 : tensor<2x2xf32>
}

// CHECK-LABEL: func.func @shapes(
// CHECK-NEXT: %0 = prim.broadcast_to %a : tensor<4x3xf32> -> tensor<2x4x3xf32>
// CHECK-NEXT: %1 = prim.reshape %a : tensor<4x3xf32> -> tensor<2x6xf32>
// CHECK-NEXT: %2 = prim.reshape %d : tensor<?x3xi32> -> tensor<?xi32>
// CHECK-NEXT: %3 = prim.transpose %0 {perm = [2, 0, 1]} : tensor<2x4x3xf32> -> tensor<3x2x4xf32>
// CHECK-NEXT: %4 = prim.transpose %d {perm = [1, 0]} : tensor<?x3xi32> -> tensor<3x?xi32>
// CHECK-NEXT: %5 = prim.broadcast_to %d : tensor<?x3xi32> -> tensor<5x?x3xi32>
// CHECK-NEXT: func.return %0 : tensor<2x4x3xf32>
// CHECK-NEXT: }
func.func @shapes(%a: tensor<4x3xf32>, %d: tensor<?x3xi32>) -> tensor<2x4x3xf32> {
  %0 = prim.broadcast_to %a : tensor<4x3xf32> -> tensor<2x4x3xf32>
  %1 = prim.reshape %a : tensor<4x3xf32> -> tensor<2x6xf32>
  %2 = prim.reshape %d : tensor<?x3xi32> -> tensor<?xi32>
  %3 = prim.transpose %0 {perm = [2, 0, 1]} : tensor<2x4x3xf32> -> tensor<3x2x4xf32>
  %4 = prim.transpose %d {perm = [1, 0]} : tensor<?x3xi32> -> tensor<3x?xi32>
  %5 = prim.broadcast_to %d : tensor<?x3xi32> -> tensor<5x?x3xi32>
  func.return %0 : tensor<2x4x3xf32>
}

// CHECK-LABEL: func.func @reductions(
// CHECK-NEXT: %0 = prim.reduce_sum %a {axes = [1, 2]} : tensor<4x8x2xf32> -> tensor<4xf32>
// CHECK-NEXT: %1 = prim.reduce_max %a {axes = [0], keepdims} : tensor<4x8x2xf32> -> tensor<1x8x2xf32>
// CHECK-NEXT: %2 = prim.reduce_mean %a {axes = [2]} : tensor<4x8x2xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %3 = prim.reduce_sum %i {axes = [1], keepdims} : tensor<?x5xi64> -> tensor<?x1xi64>
// CHECK-NEXT: %4 = prim.reduce_max %i {axes = [0, 1]} : tensor<?x5xi64> -> tensor<i64>
// CHECK-NEXT: %5 = prim.reduce_sum %a {axes = []} : tensor<4x8x2xf32> -> tensor<4x8x2xf32>
// CHECK-NEXT: %6 = prim.reduce_min %a {axes = [0, 2], keepdims} : tensor<4x8x2xf32> -> tensor<1x8x1xf32>
// CHECK-NEXT: %7 = prim.reduce_min %i {axes = [1]} : tensor<?x5xi64> -> tensor<?xi64>
// CHECK-NEXT: %8 = prim.reduce_max %q {axes = [1], keepdims} : tensor<3x5xi1> -> tensor<3x1xi1>
// CHECK-NEXT: %9 = prim.reduce_min %q {axes = [1]} : tensor<3x5xi1> -> tensor<3xi1>
// CHECK-NEXT: func.return %0 : tensor<4xf32>
// CHECK-NEXT: }
func.func @reductions(%a: tensor<4x8x2xf32>, %i: tensor<?x5xi64>, %q: tensor<3x5xi1>) -> tensor<4xf32> {
  %0 = prim.reduce_sum %a {axes = [1, 2]} : tensor<4x8x2xf32> -> tensor<4xf32>
  %1 = prim.reduce_max %a {axes = [0], keepdims} : tensor<4x8x2xf32> -> tensor<1x8x2xf32>
  %2 = prim.reduce_mean %a {axes = [2]} : tensor<4x8x2xf32> -> tensor<4x8xf32>
  %3 = prim.reduce_sum %i {axes = [1], keepdims} : tensor<?x5xi64> -> tensor<?x1xi64>
  %4 = prim.reduce_max %i {axes = [0, 1]} : tensor<?x5xi64> -> tensor<i64>
  %5 = prim.reduce_sum %a {axes = []} : tensor<4x8x2xf32> -> tensor<4x8x2xf32>
  %6 = prim.reduce_min %a {axes = [0, 2], keepdims} : tensor<4x8x2xf32> -> tensor<1x8x1xf32>
  %7 = prim.reduce_min %i {axes = [1]} : tensor<?x5xi64> -> tensor<?xi64>
  %8 = prim.reduce_max %q {axes = [1], keepdims} : tensor<3x5xi1> -> tensor<3x1xi1>
  %9 = prim.reduce_min %q {axes = [1]} : tensor<3x5xi1> -> tensor<3xi1>
  func.return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @matmuls(
// CHECK-NEXT: %0 = prim.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
// CHECK-NEXT: %1 = prim.matmul %ba, %bb : (tensor<2x1x4x3xf64>, tensor<7x3x6xf64>) -> tensor<2x7x4x6xf64>
// CHECK-NEXT: %2 = prim.matmul %ia, %ib : (tensor<?x3xi32>, tensor<3x?xi32>) -> tensor<?x?xi32>
// CHECK-NEXT: func.return %0 : tensor<4x5xf32>
// CHECK-NEXT: }
func.func @matmuls(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>, %ba: tensor<2x1x4x3xf64>, %bb: tensor<7x3x6xf64>, %ia: tensor<?x3xi32>, %ib: tensor<3x?xi32>) -> tensor<4x5xf32> {
  %0 = prim.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %1 = prim.matmul %ba, %bb : (tensor<2x1x4x3xf64>, tensor<7x3x6xf64>) -> tensor<2x7x4x6xf64>
  %2 = prim.matmul %ia, %ib : (tensor<?x3xi32>, tensor<3x?xi32>) -> tensor<?x?xi32>
  func.return %0 : tensor<4x5xf32>
}

