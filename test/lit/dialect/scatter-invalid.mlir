// Every verifier message of prim.scatter (issue 13).
// RUN: fusebind-opt %s --split-input-file --verify-diagnostics

func.func @f(%x: tensor<8xf32>, %i: tensor<5xi64>, %v: tensor<5xf32>) {
  // expected-error @+1 {{prim.scatter: mode 'sub' is not one of set, add, mul, min, max}}
  %0 = prim.scatter %x, %i, %v {mode = "sub", axis = 0} : (tensor<8xf32>, tensor<5xi64>, tensor<5xf32>) -> tensor<8xf32>
  func.return
}

// -----

func.func @f(%x: tensor<8xf32>, %i: tensor<5xf32>, %v: tensor<5xf32>) {
  // expected-error @+1 {{prim.scatter: indices element type f32 is not supported; expected i32 or i64}}
  %0 = prim.scatter %x, %i, %v {mode = "add", axis = 0} : (tensor<8xf32>, tensor<5xf32>, tensor<5xf32>) -> tensor<8xf32>
  func.return
}

// -----

func.func @f(%x: tensor<8xi32>, %i: tensor<5xi64>, %v: tensor<5xf32>) {
  // expected-error @+1 {{prim.scatter: mode 'set' needs values of the operand's element type i32, found f32 (cast them first)}}
  %0 = prim.scatter %x, %i, %v {mode = "set", axis = 0} : (tensor<8xi32>, tensor<5xi64>, tensor<5xf32>) -> tensor<8xi32>
  func.return
}

// -----

func.func @f(%x: tensor<8xf64>, %i: tensor<5xi64>, %v: tensor<5xf32>) {
  // expected-error @+1 {{prim.scatter: values of element type f32 are not numpy's loop type for an operand of f64 (cast them to f64 first)}}
  %0 = prim.scatter %x, %i, %v {mode = "add", axis = 0} : (tensor<8xf64>, tensor<5xi64>, tensor<5xf32>) -> tensor<8xf64>
  func.return
}

// -----

func.func @f(%x: tensor<f32>, %i: tensor<i64>, %v: tensor<f32>) {
  // expected-error @+1 {{prim.scatter: the operand is 0-d; it needs an axis to scatter along}}
  %0 = prim.scatter %x, %i, %v {mode = "add", axis = 0} : (tensor<f32>, tensor<i64>, tensor<f32>) -> tensor<f32>
  func.return
}

// -----

func.func @f(%x: tensor<3x4xf32>, %i: tensor<3x2xi64>, %v: tensor<3x2xf32>) {
  // expected-error @+1 {{prim.scatter: axis 2 is out of range for the rank-2 operand (expected 0 <= axis < 2)}}
  %0 = prim.scatter %x, %i, %v {mode = "add", axis = 2} : (tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<3x4xf32>
  func.return
}

// -----

func.func @f(%x: tensor<3x4xf32>, %i: tensor<6xi64>, %v: tensor<6xf32>) {
  // expected-error @+1 {{prim.scatter: indices have rank 1 and the operand rank 2; they must be equal}}
  %0 = prim.scatter %x, %i, %v {mode = "add", axis = 0} : (tensor<3x4xf32>, tensor<6xi64>, tensor<6xf32>) -> tensor<3x4xf32>
  func.return
}

// -----

func.func @f(%x: tensor<3x4xf32>, %i: tensor<3x2xi64>, %v: tensor<3x4xf32>) {
  // expected-error @+1 {{prim.scatter: dim 1: indices size 2 is neither 1 nor the operand size 4 (only axis 0 may differ)}}
  %0 = prim.scatter %x, %i, %v {mode = "add", axis = 0} : (tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x4xf32>) -> tensor<3x4xf32>
  func.return
}

// -----

func.func @f(%x: tensor<3x4xf32>, %i: tensor<5x1xi64>, %v: tensor<5x3xf32>) {
  // expected-error @+1 {{prim.scatter: values of shape (5, 3) do not broadcast to the update shape (5, 4)}}
  %0 = prim.scatter %x, %i, %v {mode = "add", axis = 0} : (tensor<3x4xf32>, tensor<5x1xi64>, tensor<5x3xf32>) -> tensor<3x4xf32>
  func.return
}

// -----

func.func @f(%x: tensor<8xf32>, %i: tensor<5xi64>, %v: tensor<5xf32>) {
  // expected-error @+1 {{prim.scatter: result type tensor<9xf32> does not match the inferred shape (8,) and element type f32}}
  %0 = prim.scatter %x, %i, %v {mode = "add", axis = 0} : (tensor<8xf32>, tensor<5xi64>, tensor<5xf32>) -> tensor<9xf32>
  func.return
}

// -----

func.func @f(%x: tensor<8xf32>, %v: tensor<3xf32>) {
  %i = prim.constant dense<[1, -9, 8]> : tensor<3xi64>
  // expected-error @+1 {{prim.scatter: constant indices: index -9 is out of bounds for axis 0 with size 8}}
  %0 = prim.scatter %x, %i, %v {mode = "set", axis = 0} : (tensor<8xf32>, tensor<3xi64>, tensor<3xf32>) -> tensor<8xf32>
  func.return
}
