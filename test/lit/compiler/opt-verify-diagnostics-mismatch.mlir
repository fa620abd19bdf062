// --verify-diagnostics fails on a missing and on an unexpected error.
// RUN: not fusebind-opt %s --split-input-file --verify-diagnostics 2>&1 | filecheck %s
// CHECK-DAG: opt-verify-diagnostics-mismatch.mlir:[[# @LINE + 6]]:1: error: expected error "this error never happens" was not produced
// CHECK-DAG: opt-verify-diagnostics-mismatch.mlir:[[# @LINE + 12]]:3: error: unexpected error: prim.exp: operand element type i32 is not supported
// CHECK-NOT: Traceback

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{this error never happens}}
  %0 = prim.exp %a : tensor<4xf32> -> tensor<4xf32>
  func.return
}

// -----

func.func @g(%a: tensor<4xi32>) {
  %0 = prim.exp %a : tensor<4xi32> -> tensor<4xi32>
  func.return
}
