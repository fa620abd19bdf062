// Each chunk is processed on its own; good chunks are printed, separated by
// the marker, and an error in one chunk is reported at its line in the file.
// RUN: not fusebind-opt %s --split-input-file 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=ERR < %t.err
// CHECK-LABEL: func.func @first(
// CHECK: // -----
// CHECK-LABEL: func.func @second(
// CHECK-NOT: @third
// ERR: opt-split-input-file.mlir:[[# @LINE + 16]]:3: error: prim.exp: operand element type i32 is not supported
// ERR-NOT: error
func.func @first(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = prim.exp %a : tensor<4xf32> -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @second(%a: tensor<4xf32>) -> tensor<4xf32> {
  func.return %a : tensor<4xf32>
}

// -----

func.func @third(%a: tensor<4xi32>) {
  %0 = prim.exp %a : tensor<4xi32> -> tensor<4xi32>
  func.return
}
