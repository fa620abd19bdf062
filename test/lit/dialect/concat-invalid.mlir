// Every verifier message of prim.concat (issue 13).
// RUN: fusebind-opt %s --split-input-file --verify-diagnostics

func.func @f() {
  // expected-error @+1 {{prim.concat: needs at least one operand}}
  %0 = "prim.concat"() <{axis = 0 : i64}> : () -> tensor<0xf32>
  func.return
}

// -----

func.func @f(%a: tensor<6x4xf32>) {
  // expected-error @+1 {{prim.concat: axis 2 is out of range for rank-2 operands (expected 0 <= axis < 2)}}
  %0 = prim.concat %a, %a {axis = 2} : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x8xf32>
  func.return
}

// -----

func.func @f(%a: tensor<6x4xf32>) {
  // expected-error @+1 {{prim.concat: axis -1 is out of range for rank-2 operands (expected 0 <= axis < 2)}}
  %0 = prim.concat %a, %a {axis = -1} : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x8xf32>
  func.return
}

// -----

func.func @f(%a: tensor<f32>) {
  // expected-error @+1 {{prim.concat: axis 0 is out of range for rank-0 operands (expected 0 <= axis < 0)}}
  %0 = prim.concat %a, %a {axis = 0} : (tensor<f32>, tensor<f32>) -> tensor<2xf32>
  func.return
}

// -----

func.func @f(%a: tensor<6x4xf32>, %b: tensor<6xf32>) {
  // expected-error @+1 {{prim.concat: operand 1 has rank 1, operand 0 has rank 2}}
  %0 = prim.concat %a, %b {axis = 0} : (tensor<6x4xf32>, tensor<6xf32>) -> tensor<12x4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<6x4xf32>, %b: tensor<2x5xf32>) {
  // expected-error @+1 {{prim.concat: operand 1 has size 5 in dim 1, operand 0 has size 4 (only dim 0, the axis, may differ)}}
  %0 = prim.concat %a, %b {axis = 0} : (tensor<6x4xf32>, tensor<2x5xf32>) -> tensor<8x4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<6x4xf32>, %b: tensor<6x4xf64>) {
  // expected-error @+1 {{prim.concat: operand 1 element type f64 differs from operand 0 element type f32}}
  %0 = prim.concat %a, %b {axis = 1} : (tensor<6x4xf32>, tensor<6x4xf64>) -> tensor<6x8xf32>
  func.return
}

// -----

func.func @f(%a: tensor<6x4xf32>) {
  // expected-error @+1 {{prim.concat: result element type f64 differs from operand element type f32}}
  %0 = prim.concat %a, %a {axis = 1} : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x8xf64>
  func.return
}

// -----

func.func @f(%a: tensor<6x4xf32>) {
  // expected-error @+1 {{prim.concat: result type tensor<6x4xf32> does not match the inferred shape (6, 8) and element type f32}}
  %0 = prim.concat %a, %a {axis = 1} : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<6x4xsi16>) {
  // expected-error @+1 {{prim.concat: operand element type si16 is not supported; expected one of f32, f64, i32, i64, i1}}
  %0 = prim.concat %a {axis = 1} : tensor<6x4xsi16> -> tensor<6x4xsi16>
  func.return
}
