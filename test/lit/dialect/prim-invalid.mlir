// Every verifier message of the prim dialect.
// RUN: fusebind-opt %s --split-input-file --verify-diagnostics

func.func @f(%a: tensor<4x3xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{prim.add: operand shapes (4, 3) and (5,) do not broadcast}}
  %0 = prim.add %a, %b : (tensor<4x3xf32>, tensor<5xf32>) -> tensor<4x3xf32>
  func.return
}

// -----

func.func @f(%a: tensor<4xf32>, %b: tensor<4xf64>) {
  %0 = prim.add %a, %b : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32> // expected-error {{prim.add: operand element types f32 and f64 differ}}
  func.return
}

// -----

func.func @f(%a: tensor<4xi32>) {
  // expected-error @+1 {{prim.exp: operand element type i32 is not supported; expected one of f32, f64}}
  %0 = prim.exp %a : tensor<4xi32> -> tensor<4xi32>
  func.return
}

// -----

func.func @f(%a: tensor<4xi1>) {
  // expected-error @+1 {{prim.neg: operand element type i1 is not supported; expected one of f32, f64, i32, i64}}
  %0 = prim.neg %a : tensor<4xi1> -> tensor<4xi1>
  func.return
}

// -----

func.func @f(%a: tensor<4xsi8>) {
  // expected-error @+1 {{prim.neg: operand element type si8 is not supported; expected one of f32, f64, i32, i64, i1}}
  %0 = prim.neg %a : tensor<4xsi8> -> tensor<4xsi8>
  func.return
}

// -----

func.func @f(%a: tensor<4xi1>) {
  // expected-error @+1 {{prim.pow: operand element type i1 is not supported; expected one of f32, f64, i32, i64}}
  %0 = prim.pow %a, %a : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  func.return
}

// -----

func.func @f(%a: tensor<4xi32>, %b: tensor<4xi64>) {
  // expected-error @+1 {{prim.pow: operand element types i32 and i64 differ}}
  %0 = prim.pow %a, %b : (tensor<4xi32>, tensor<4xi64>) -> tensor<4xi32>
  func.return
}

// -----

func.func @f(%a: tensor<4xi1>) {
  // expected-error @+1 {{prim.floordiv: operand element type i1 is not supported; expected one of f32, f64, i32, i64}}
  %0 = prim.floordiv %a, %a : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  func.return
}

// -----

func.func @f(%a: tensor<4xi1>) {
  // expected-error @+1 {{prim.rem: operand element type i1 is not supported; expected one of f32, f64, i32, i64}}
  %0 = prim.rem %a, %a : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  func.return
}

// -----

func.func @f(%a: tensor<4xf32>, %b: tensor<4xf64>) {
  // expected-error @+1 {{prim.floordiv: operand element types f32 and f64 differ}}
  %0 = prim.floordiv %a, %b : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<4xi32>, %b: tensor<4xi64>) {
  // expected-error @+1 {{prim.rem: operand element types i32 and i64 differ}}
  %0 = prim.rem %a, %b : (tensor<4xi32>, tensor<4xi64>) -> tensor<4xi32>
  func.return
}

// -----

func.func @f(%a: tensor<4x3xi32>, %b: tensor<5xi32>) {
  // expected-error @+1 {{prim.floordiv: operand shapes (4, 3) and (5,) do not broadcast}}
  %0 = prim.floordiv %a, %b : (tensor<4x3xi32>, tensor<5xi32>) -> tensor<4x3xi32>
  func.return
}

// -----

func.func @f(%a: tensor<4x3xf64>, %b: tensor<5xf64>) {
  // expected-error @+1 {{prim.rem: operand shapes (4, 3) and (5,) do not broadcast}}
  %0 = prim.rem %a, %b : (tensor<4x3xf64>, tensor<5xf64>) -> tensor<4x3xf64>
  func.return
}

// -----

func.func @f(%a: tensor<4x1xi64>, %b: tensor<3xi64>) {
  // expected-error @+1 {{prim.floordiv: result type tensor<4x1xi64> does not match the inferred shape (4, 3) and element type i64}}
  %0 = prim.floordiv %a, %b : (tensor<4x1xi64>, tensor<3xi64>) -> tensor<4x1xi64>
  func.return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{prim.rem: result type tensor<4xf64> does not match the inferred shape (4,) and element type f32}}
  %0 = prim.rem %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf64>
  func.return
}

// -----

func.func @f(%a: tensor<4x3xi1>) {
  // expected-error @+1 {{prim.reduce_min: result type tensor<4xi32> does not match the inferred shape (4,) and element type i1}}
  %0 = prim.reduce_min %a {axes = [1]} : tensor<4x3xi1> -> tensor<4xi32>
  func.return
}

// -----

func.func @f(%a: tensor<4x3xi1>) {
  // expected-error @+1 {{prim.reduce_min: axes [1, 1] repeat an axis}}
  %0 = prim.reduce_min %a {axes = [1, 1]} : tensor<4x3xi1> -> tensor<4xi1>
  func.return
}

// -----

func.func @f(%a: tensor<4x3xi1>) {
  // expected-error @+1 {{prim.reduce_sum: operand element type i1 is not supported; expected one of f32, f64, i32, i64}}
  %0 = prim.reduce_sum %a {axes = [1]} : tensor<4x3xi1> -> tensor<4xi1>
  func.return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{prim.exp: result type tensor<5xf32> does not match the inferred shape (4,) and element type f32}}
  %0 = prim.exp %a : tensor<4xf32> -> tensor<5xf32>
  func.return
}

// -----

func.func @f(%a: tensor<4x1xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{prim.mul: result type tensor<4x1xf32> does not match the inferred shape (4, 3) and element type f32}}
  %0 = prim.mul %a, %b : (tensor<4x1xf32>, tensor<3xf32>) -> tensor<4x1xf32>
  func.return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{prim.compare: result type tensor<4xf32> does not match the inferred shape (4,) and element type i1}}
  %0 = prim.compare lt %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{prim.compare: unknown predicate 'lessthan'; expected one of eq, ne, lt, le, gt, ge}}
  %0 = prim.compare lessthan %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  func.return
}

// -----

func.func @f(%c: tensor<4xf32>, %a: tensor<4xf32>) {
  // expected-error @+1 {{prim.select: condition element type f32 is not i1}}
  %0 = prim.select %c, %a, %a : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @f(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xi32>) {
  // expected-error @+1 {{prim.select: value element types f32 and i32 differ}}
  %0 = prim.select %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @f(%c: tensor<2xi1>, %a: tensor<4xf32>) {
  // expected-error @+1 {{prim.select: operand shapes (2,) and (4,) and (4,) do not broadcast}}
  %0 = prim.select %c, %a, %a : (tensor<2xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{prim.cast: result shape (5,) does not match operand shape (4,)}}
  %0 = prim.cast %a : tensor<4xf32> -> tensor<5xi32>
  func.return
}

// -----

func.func @f(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{prim.reduce_sum: axis 2 is out of range for rank 2}}
  %0 = prim.reduce_sum %a {axes = [2]} : tensor<4x3xf32> -> tensor<4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{prim.reduce_max: axes [1, 1] repeat an axis}}
  %0 = prim.reduce_max %a {axes = [1, 1]} : tensor<4x3xf32> -> tensor<4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<4x3xi32>) {
  // expected-error @+1 {{prim.reduce_mean: operand element type i32 is not supported; expected one of f32, f64}}
  %0 = prim.reduce_mean %a {axes = [1]} : tensor<4x3xi32> -> tensor<4xi32>
  func.return
}

// -----

func.func @f(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{prim.reduce_sum: result type tensor<4xf32> does not match the inferred shape (4, 1) and element type f32}}
  %0 = prim.reduce_sum %a {axes = [1], keepdims} : tensor<4x3xf32> -> tensor<4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<3xf32>) {
  // expected-error @+1 {{prim.broadcast_to: shape (3,) cannot broadcast to (4, 2)}}
  %0 = prim.broadcast_to %a : tensor<3xf32> -> tensor<4x2xf32>
  func.return
}

// -----

func.func @f(%a: tensor<3xf32>) {
  // expected-error @+1 {{prim.broadcast_to: result element type f64 differs from operand element type f32}}
  %0 = prim.broadcast_to %a : tensor<3xf32> -> tensor<4x3xf64>
  func.return
}

// -----

func.func @f(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{prim.reshape: element counts differ: 12 in tensor<3x4xf32> vs 10 in tensor<2x5xf32>}}
  %0 = prim.reshape %a : tensor<3x4xf32> -> tensor<2x5xf32>
  func.return
}

// -----

func.func @f(%a: tensor<?x4xf32>) {
  // expected-error @+1 {{prim.reshape: result type tensor<?x?xf32> has more than one dynamic dimension}}
  %0 = prim.reshape %a : tensor<?x4xf32> -> tensor<?x?xf32>
  func.return
}

// -----

func.func @f(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{prim.transpose: permutation [0, 0] is not a permutation of 0..1}}
  %0 = prim.transpose %a {perm = [0, 0]} : tensor<3x4xf32> -> tensor<3x3xf32>
  func.return
}

// -----

func.func @f(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{prim.transpose: result type tensor<3x4xf32> does not match the inferred shape (4, 3) and element type f32}}
  %0 = prim.transpose %a {perm = [1, 0]} : tensor<3x4xf32> -> tensor<3x4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<3xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+1 {{prim.matmul: operands must have rank >= 2, found 1 and 2}}
  %0 = prim.matmul %a, %b : (tensor<3xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{prim.matmul: contraction dims differ: 3 (lhs) vs 4 (rhs)}}
  %0 = prim.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  func.return
}

// -----

func.func @f(%a: tensor<2x2x3xf32>, %b: tensor<3x3x5xf32>) {
  // expected-error @+1 {{prim.matmul: batch shapes (2,) and (3,) do not broadcast}}
  %0 = prim.matmul %a, %b : (tensor<2x2x3xf32>, tensor<3x3x5xf32>) -> tensor<2x2x5xf32>
  func.return
}

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x5xf64>) {
  // expected-error @+1 {{prim.matmul: operand element types f32 and f64 differ}}
  %0 = prim.matmul %a, %b : (tensor<2x3xf32>, tensor<3x5xf64>) -> tensor<2x5xf32>
  func.return
}

// -----

func.func @f(%a: tensor<2x3xi1>, %b: tensor<3x5xi1>) {
  // expected-error @+1 {{prim.matmul: operand element type i1 is not supported; expected one of f32, f64, i32, i64}}
  %0 = prim.matmul %a, %b : (tensor<2x3xi1>, tensor<3x5xi1>) -> tensor<2x5xi1>
  func.return
}

// -----

func.func @f() {
  // expected-error @+1 {{prim.constant: result type tensor<3xf32> does not match value type tensor<2xf32>}}
  %0 = "prim.constant"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<3xf32>
  func.return
}

// -----

func.func @f() {
  // expected-error @+1 {{prim.constant: result element type si8 is not supported; expected one of f32, f64, i32, i64, i1}}
  %0 = prim.constant dense<[1, 2]> : tensor<2xsi8>
  func.return
}
