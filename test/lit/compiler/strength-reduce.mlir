// prim.pow by a splat constant becomes multiplies, sqrt, a reciprocal or ones;
// other exponents stay pow (strength-reduce-negative.mlir: negative integer exponents).
// RUN: fusebind-opt %s --split-input-file -p strength-reduce | filecheck %s
// RUN: fusebind-opt %s -p 'fuse{gate=all}' | filecheck %s --check-prefix=FUSED

// CHECK-LABEL: func.func @floats(
// f32 cubes and fourth powers go through f64, where x*x is exact: rounded once (0.5 ULP)
// CHECK-NEXT: %0 = prim.cast %x : tensor<4x3xf32> -> tensor<4x3xf64>
// CHECK-NEXT: %1 = prim.mul %0, %0 : (tensor<4x3xf64>, tensor<4x3xf64>) -> tensor<4x3xf64>
// CHECK-NEXT: %2 = prim.mul %1, %0 : (tensor<4x3xf64>, tensor<4x3xf64>) -> tensor<4x3xf64>
// CHECK-NEXT: %3 = prim.cast %2 : tensor<4x3xf64> -> tensor<4x3xf32>
// CHECK-NEXT: %4 = prim.cast %3 : tensor<4x3xf32> -> tensor<4x3xf64>
// CHECK-NEXT: %5 = prim.mul %4, %4 : (tensor<4x3xf64>, tensor<4x3xf64>) -> tensor<4x3xf64>
// CHECK-NEXT: %6 = prim.mul %5, %5 : (tensor<4x3xf64>, tensor<4x3xf64>) -> tensor<4x3xf64>
// CHECK-NEXT: %7 = prim.cast %6 : tensor<4x3xf64> -> tensor<4x3xf32>
// CHECK-NEXT: %8 = prim.sqrt %7 : tensor<4x3xf32> -> tensor<4x3xf32>
// 0.5 as a full-shaped exponent is numpy's pow path (pow(-0, 0.5) = +0): kept.
// CHECK-NEXT: %hf = prim.constant dense<5.000000e-01> : tensor<4x3xf32>
// CHECK-NEXT: %9 = prim.pow %8, %hf : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %10 = prim.constant dense<1.000000e+00> : tensor<f64>
// CHECK-NEXT: %11 = prim.div %10, %d : (tensor<f64>, tensor<?xf64>) -> tensor<?xf64>
// CHECK-NEXT: %12 = prim.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %13 = prim.broadcast_to %12 : tensor<f32> -> tensor<4x3xf32>
// CHECK-NEXT: %e = prim.constant dense<2.500000e+00> : tensor<f32>
// CHECK-NEXT: %14 = prim.pow %x, %e : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
// f64 cubes: (x*x)*x in f64 (1.29 ULP, docs/FASTMATH.md)
// CHECK-NEXT: %15 = prim.mul %d, %d : (tensor<?xf64>, tensor<?xf64>) -> tensor<?xf64>
// CHECK-NEXT: %16 = prim.mul %15, %d : (tensor<?xf64>, tensor<?xf64>) -> tensor<?xf64>
// CHECK-NEXT: func.return %9 : tensor<4x3xf32>
// optimize_graph runs it before fusion: no libm pow call is left for x ** 3.
// FUSED-LABEL: func.func @floats(
// FUSED-NOT: prim.pow %x, %c3
// FUSED: prim.mul %{{.*}}, %{{.*}} : (tensor<4x3xf64>, tensor<4x3xf64>) -> tensor<4x3xf64>
func.func @floats(%x: tensor<4x3xf32>, %d: tensor<?xf64>) -> tensor<4x3xf32> {
  %c3 = prim.constant dense<3.0> : tensor<f32>
  %0 = prim.pow %x, %c3 : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %c4 = prim.constant dense<4.0> : tensor<f32>
  %1 = prim.pow %0, %c4 : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %h = prim.constant dense<0.5> : tensor<f32>
  %2 = prim.pow %1, %h : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %hf = prim.constant dense<0.5> : tensor<4x3xf32>
  %3 = prim.pow %2, %hf : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %m = prim.constant dense<-1.0> : tensor<f64>
  %4 = prim.pow %d, %m : (tensor<?xf64>, tensor<f64>) -> tensor<?xf64>
  %z = prim.constant dense<0.0> : tensor<f32>
  %5 = prim.pow %x, %z : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %e = prim.constant dense<2.5> : tensor<f32>
  %6 = prim.pow %x, %e : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %t = prim.constant dense<3.0> : tensor<1xf64>
  %7 = prim.pow %d, %t : (tensor<?xf64>, tensor<1xf64>) -> tensor<?xf64>
  func.return %3 : tensor<4x3xf32>
}

// x ** 5 is x * (x^2)^2; a traced exponent stays pow; an exponent that broadcasts x
// broadcasts it first.
// CHECK-LABEL: func.func @ints(
// CHECK-NEXT: %0 = prim.mul %i, %i : (tensor<5xi32>, tensor<5xi32>) -> tensor<5xi32>
// CHECK-NEXT: %1 = prim.mul %0, %0 : (tensor<5xi32>, tensor<5xi32>) -> tensor<5xi32>
// CHECK-NEXT: %2 = prim.mul %1, %1 : (tensor<5xi32>, tensor<5xi32>) -> tensor<5xi32>
// CHECK-NEXT: %3 = prim.mul %0, %2 : (tensor<5xi32>, tensor<5xi32>) -> tensor<5xi32>
// CHECK-NEXT: %4 = prim.pow %j, %j : (tensor<5xi64>, tensor<5xi64>) -> tensor<5xi64>
// CHECK-NEXT: %5 = prim.broadcast_to %3 : tensor<5xi32> -> tensor<3x5xi32>
// CHECK-NEXT: func.return %3 : tensor<5xi32>
func.func @ints(%i: tensor<5xi32>, %j: tensor<5xi64>) -> tensor<5xi32> {
  %c2 = prim.constant dense<2> : tensor<i32>
  %0 = prim.pow %i, %c2 : (tensor<5xi32>, tensor<i32>) -> tensor<5xi32>
  %c5 = prim.constant dense<5> : tensor<1xi32>
  %1 = prim.pow %0, %c5 : (tensor<5xi32>, tensor<1xi32>) -> tensor<5xi32>
  %2 = prim.pow %j, %j : (tensor<5xi64>, tensor<5xi64>) -> tensor<5xi64>
  %c1 = prim.constant dense<1> : tensor<3x5xi32>
  %3 = prim.pow %1, %c1 : (tensor<5xi32>, tensor<3x5xi32>) -> tensor<3x5xi32>
  func.return %1 : tensor<5xi32>
}

// -----

// The result may be empty at run time (numpy raises nothing then): checked when it runs.
// CHECK-LABEL: func.func @negative_dynamic(
// CHECK: prim.pow %i, %m
func.func @negative_dynamic(%i: tensor<?xi64>) -> tensor<?xi64> {
  %m = prim.constant dense<-2> : tensor<i64>
  %0 = prim.pow %i, %m : (tensor<?xi64>, tensor<i64>) -> tensor<?xi64>
  func.return %0 : tensor<?xi64>
}
