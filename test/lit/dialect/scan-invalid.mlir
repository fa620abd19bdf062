// Every verifier message of prim.scan (issue 14).
// RUN: fusebind-opt %s --split-input-file --verify-diagnostics

func.func @f(%a: tensor<5x3xf32>) {
  // expected-error @+1 {{prim.scan: kind 'mean' is not one of sum, prod, max, min}}
  %0 = prim.scan %a {kind = "mean", axis = 0} : tensor<5x3xf32> -> tensor<5x3xf32>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xf32>) {
  // expected-error @+1 {{prim.scan: axis 2 is out of range [0, 2) for a rank-2 operand}}
  %0 = prim.scan %a {kind = "sum", axis = 2} : tensor<5x3xf32> -> tensor<5x3xf32>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xf32>) {
  // expected-error @+1 {{prim.scan: result element type f64 differs from operand element type f32}}
  %0 = prim.scan %a {kind = "sum", axis = 0} : tensor<5x3xf32> -> tensor<5x3xf64>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xf32>) {
  // expected-error @+1 {{prim.scan: result type tensor<3x5xf32> does not match the inferred shape (5, 3) and element type f32}}
  %0 = prim.scan %a {kind = "sum", axis = 0} : tensor<5x3xf32> -> tensor<3x5xf32>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xi1>) {
  // expected-error @+1 {{prim.scan: operand element type i1 is not supported; expected one of f32, f64, i32, i64}}
  %0 = prim.scan %a {kind = "sum", axis = 0} : tensor<5x3xi1> -> tensor<5x3xi1>
  func.return
}
