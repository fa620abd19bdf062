// Every verifier message of prim.gather and prim.take_along (issue 13).
// RUN: fusebind-opt %s --split-input-file --verify-diagnostics

func.func @f(%a: tensor<5x3xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{prim.gather: axis 2 is out of range for the rank-2 operand (expected 0 <= axis < 2)}}
  %0 = prim.gather %a, %i {axis = 2} : (tensor<5x3xf32>, tensor<4xi64>) -> tensor<5x3xf32>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xf32>, %i: tensor<4xf32>) {
  // expected-error @+1 {{prim.gather: indices element type f32 is not supported; expected i32 or i64}}
  %0 = prim.gather %a, %i {axis = 0} : (tensor<5x3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{prim.gather: result type tensor<3x4xf32> does not match the inferred shape (4, 3) and element type f32}}
  %0 = prim.gather %a, %i {axis = 0} : (tensor<5x3xf32>, tensor<4xi64>) -> tensor<3x4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{prim.gather: result element type f64 differs from operand element type f32}}
  %0 = prim.gather %a, %i {axis = 0} : (tensor<5x3xf32>, tensor<4xi64>) -> tensor<4x3xf64>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xf32>) {
  %i = prim.constant dense<[0, -5, 5]> : tensor<3xi64>
  // expected-error @+1 {{prim.gather: constant indices: index 5 is out of bounds for axis 0 with size 5}}
  %0 = prim.gather %a, %i {axis = 0} : (tensor<5x3xf32>, tensor<3xi64>) -> tensor<3x3xf32>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{prim.take_along: indices have rank 1 and the operand rank 2; they must be equal}}
  %0 = prim.take_along %a, %i {axis = 0} : (tensor<5x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xf32>, %i: tensor<4x2xi64>) {
  // expected-error @+1 {{prim.take_along: dim 1: operand size 3 and indices size 2 do not broadcast}}
  %0 = prim.take_along %a, %i {axis = 0} : (tensor<5x3xf32>, tensor<4x2xi64>) -> tensor<4x3xf32>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xf32>, %i: tensor<4x1xi64>) {
  // expected-error @+1 {{prim.take_along: axis -1 is out of range for the rank-2 operand (expected 0 <= axis < 2)}}
  %0 = prim.take_along %a, %i {axis = -1} : (tensor<5x3xf32>, tensor<4x1xi64>) -> tensor<4x3xf32>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xf32>) {
  %i = prim.constant dense<[[-4, 2, -4]]> : tensor<1x3xi32>
  // expected-error @+1 {{prim.take_along: constant indices: index -4 is out of bounds for axis 1 with size 3}}
  %0 = prim.take_along %a, %i {axis = 1} : (tensor<5x3xf32>, tensor<1x3xi32>) -> tensor<5x3xf32>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xsi8>, %i: tensor<4xi64>) {
  // expected-error @+1 {{prim.gather: operand element type si8 is not supported; expected one of f32, f64, i32, i64, i1}}
  %0 = prim.gather %a, %i {axis = 0} : (tensor<5x3xsi8>, tensor<4xi64>) -> tensor<4x3xsi8>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xf32>, %i: tensor<5x1xi1>) {
  // expected-error @+1 {{prim.take_along: indices element type i1 is not supported; expected i32 or i64}}
  %0 = prim.take_along %a, %i {axis = 1} : (tensor<5x3xf32>, tensor<5x1xi1>) -> tensor<5x1xf32>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xf32>) {
  %i = prim.constant dense<[9]> : tensor<1xi64>
  // expected-error @+1 {{prim.gather: constant indices: index 9 is out of bounds for axis 3 with size 5}}
  %0 = prim.gather %a, %i {axis = 0, error_axis = 3} : (tensor<5x3xf32>, tensor<1xi64>) -> tensor<1x3xf32>
  func.return
}
