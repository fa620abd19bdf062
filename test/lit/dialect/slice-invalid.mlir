// Every verifier message of prim.slice (issue 13).
// RUN: fusebind-opt %s --split-input-file --verify-diagnostics

func.func @f(%a: tensor<6x4xf32>) {
  // expected-error @+1 {{prim.slice: starts, limits and strides need one entry per dim of the rank-2 operand; found 1, 2 and 2}}
  %0 = prim.slice %a {starts = [0], limits = [6, 4], strides = [1, 1]} : tensor<6x4xf32> -> tensor<6x4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<6x4xf32>) {
  // expected-error @+1 {{prim.slice: dim 1: stride must be nonzero}}
  %0 = prim.slice %a {starts = [0, 0], limits = [6, 4], strides = [1, 0]} : tensor<6x4xf32> -> tensor<6x4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<6x4xf32>) {
  // expected-error @+1 {{prim.slice: dim 1: start 5 is out of range [0, 4] for size 4 and stride 1}}
  %0 = prim.slice %a {starts = [0, 5], limits = [6, 4], strides = [1, 1]} : tensor<6x4xf32> -> tensor<6x0xf32>
  func.return
}

// -----

func.func @f(%a: tensor<6x4xf32>) {
  // expected-error @+1 {{prim.slice: dim 0: limit 7 is out of range [0, 6] for size 6 and stride 2}}
  %0 = prim.slice %a {starts = [0, 0], limits = [7, 4], strides = [2, 1]} : tensor<6x4xf32> -> tensor<4x4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<6x4xf32>) {
  // expected-error @+1 {{prim.slice: dim 0: start 6 is out of range [-1, 5] for size 6 and stride -1}}
  %0 = prim.slice %a {starts = [6, 0], limits = [-1, 4], strides = [-1, 1]} : tensor<6x4xf32> -> tensor<7x4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<6x4xf32>) {
  // expected-error @+1 {{prim.slice: dim 0: limit -2 is out of range [-1, 5] for size 6 and stride -1}}
  %0 = prim.slice %a {starts = [5, 0], limits = [-2, 4], strides = [-1, 1]} : tensor<6x4xf32> -> tensor<7x4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<6x4xf32>) {
  // expected-error @+1 {{prim.slice: result type tensor<6x4xf32> does not match the inferred shape (3, 4) and element type f32}}
  %0 = prim.slice %a {starts = [0, 0], limits = [6, 4], strides = [2, 1]} : tensor<6x4xf32> -> tensor<6x4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<6x4xf32>) {
  // expected-error @+1 {{prim.slice: result element type f64 differs from operand element type f32}}
  %0 = prim.slice %a {starts = [0, 0], limits = [6, 4], strides = [1, 1]} : tensor<6x4xf32> -> tensor<6x4xf64>
  func.return
}
