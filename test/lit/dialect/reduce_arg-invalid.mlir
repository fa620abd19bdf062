// Every verifier message of prim.reduce_argmax / prim.reduce_argmin and prim.reduce_prod (issue 14).
// RUN: fusebind-opt %s --split-input-file --verify-diagnostics

func.func @f(%a: tensor<5x3xf32>) {
  // expected-error @+1 {{prim.reduce_argmax: reduces exactly one axis, found axes [0, 1]}}
  %0 = prim.reduce_argmax %a {axes = [0, 1]} : tensor<5x3xf32> -> tensor<i64>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xf32>) {
  // expected-error @+1 {{prim.reduce_argmin: result type tensor<5xi32> does not match the inferred shape (5,) and element type i64}}
  %0 = prim.reduce_argmin %a {axes = [1]} : tensor<5x3xf32> -> tensor<5xi32>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xf32>) {
  // expected-error @+1 {{prim.reduce_argmax: result type tensor<3xi64> does not match the inferred shape (5,) and element type i64}}
  %0 = prim.reduce_argmax %a {axes = [1]} : tensor<5x3xf32> -> tensor<3xi64>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xi1>) {
  // expected-error @+1 {{prim.reduce_argmax: operand element type i1 is not supported}}
  %0 = prim.reduce_argmax %a {axes = [1]} : tensor<5x3xi1> -> tensor<5xi64>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xf32>) {
  // expected-error @+1 {{prim.reduce_argmax: axis 2 is out of range for rank 2}}
  %0 = prim.reduce_argmax %a {axes = [2]} : tensor<5x3xf32> -> tensor<5xi64>
  func.return
}

// -----

func.func @f(%a: tensor<5x3xi1>) {
  // expected-error @+1 {{prim.reduce_prod: operand element type i1 is not supported}}
  %0 = prim.reduce_prod %a {axes = [1]} : tensor<5x3xi1> -> tensor<5xi1>
  func.return
}
