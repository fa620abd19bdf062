// Every verifier message of prim.window (issue 16).
// RUN: fusebind-opt %s --split-input-file --verify-diagnostics

func.func @f(%a: tensor<6xf32>) {
  // expected-error @+1 {{prim.window: a window of 2 dims needs an operand of rank >= 2, got rank 1}}
  %0 = prim.window %a {window = [2, 2], strides = [1, 1], dilations = [1, 1], lhs_dilation = [1, 1], pads_lo = [0, 0], pads_hi = [0, 0], fill = 0.0 : f64} : tensor<6xf32> -> tensor<2x2x5xf32>
  func.return
}

// -----

func.func @f(%a: tensor<6xf32>) {
  // expected-error @+1 {{prim.window: a window of 0 dims needs an operand of rank >= 1, got rank 1}}
  %0 = prim.window %a {window = [], strides = [], dilations = [], lhs_dilation = [], pads_lo = [], pads_hi = [], fill = 0.0 : f64} : tensor<6xf32> -> tensor<6xf32>
  func.return
}

// -----

func.func @f(%a: tensor<4x6xf32>) {
  // expected-error @+1 {{prim.window: strides has 2 entries; the window has 1 dims}}
  %0 = prim.window %a {window = [2], strides = [1, 1], dilations = [1], lhs_dilation = [1], pads_lo = [0], pads_hi = [0], fill = 0.0 : f64} : tensor<4x6xf32> -> tensor<4x2x5xf32>
  func.return
}

// -----

func.func @f(%a: tensor<4x6xf32>) {
  // expected-error @+1 {{prim.window: window entries must be >= 1, got [0]}}
  %0 = prim.window %a {window = [0], strides = [1], dilations = [1], lhs_dilation = [1], pads_lo = [0], pads_hi = [0], fill = 0.0 : f64} : tensor<4x6xf32> -> tensor<4x0x7xf32>
  func.return
}

// -----

func.func @f(%a: tensor<4x6xf32>) {
  // expected-error @+1 {{prim.window: lhs_dilation entries must be >= 1, got [0]}}
  %0 = prim.window %a {window = [2], strides = [1], dilations = [1], lhs_dilation = [0], pads_lo = [0], pads_hi = [0], fill = 0.0 : f64} : tensor<4x6xf32> -> tensor<4x2x5xf32>
  func.return
}

// -----

func.func @f(%a: tensor<4x6xf32>) {
  // expected-error @+1 {{prim.window: pads_hi entries must be >= 0, got [-1] (a negative pad is a crop: slice the operand first)}}
  %0 = prim.window %a {window = [2], strides = [1], dilations = [1], lhs_dilation = [1], pads_lo = [0], pads_hi = [-1], fill = 0.0 : f64} : tensor<4x6xf32> -> tensor<4x2x4xf32>
  func.return
}

// -----

func.func @f(%a: tensor<4x6xf32>) {
  // expected-error @+1 {{prim.window: dim 1: the window spans 9 elements, more than the 7 of the padded (dilated) operand}}
  %0 = prim.window %a {window = [5], strides = [1], dilations = [2], lhs_dilation = [1], pads_lo = [1], pads_hi = [0], fill = 0.0 : f64} : tensor<4x6xf32> -> tensor<4x5x1xf32>
  func.return
}

// -----

func.func @f(%a: tensor<4x6xf32>) {
  // expected-error @+1 {{prim.window: result type tensor<4x2x6xf32> does not match the inferred shape (4, 2, 5) and element type f32}}
  %0 = prim.window %a {window = [2], strides = [1], dilations = [1], lhs_dilation = [1], pads_lo = [0], pads_hi = [0], fill = 0.0 : f64} : tensor<4x6xf32> -> tensor<4x2x6xf32>
  func.return
}

// -----

func.func @f(%a: tensor<4x6xf32>) {
  // expected-error @+1 {{prim.window: result element type i32 differs from operand element type f32}}
  %0 = prim.window %a {window = [2], strides = [1], dilations = [1], lhs_dilation = [1], pads_lo = [0], pads_hi = [0], fill = 0.0 : f64} : tensor<4x6xf32> -> tensor<4x2x5xi32>
  func.return
}

// -----

func.func @f(%a: tensor<4x6xi32>) {
  // expected-error @+1 {{prim.window: fill -inf is not a value of the i32 operand}}
  %0 = prim.window %a {window = [2], strides = [1], dilations = [1], lhs_dilation = [1], pads_lo = [1], pads_hi = [0], fill = 0xFFF0000000000000 : f64} : tensor<4x6xi32> -> tensor<4x2x6xi32>
  func.return
}

// -----

func.func @f(%a: tensor<4x6xi8>) {
  // expected-error @+1 {{prim.window: fill 200.0 is not a value of the i8 operand}}
  %0 = prim.window %a {window = [2], strides = [1], dilations = [1], lhs_dilation = [1], pads_lo = [1], pads_hi = [0], fill = 200.0 : f64} : tensor<4x6xi8> -> tensor<4x2x6xi8>
  func.return
}

// -----

func.func @f(%a: tensor<4x6xi32>) {
  // expected-error @+1 {{prim.window: fill 0.5 is not a value of the i32 operand}}
  %0 = prim.window %a {window = [2], strides = [1], dilations = [1], lhs_dilation = [1], pads_lo = [1], pads_hi = [0], fill = 0.5 : f64} : tensor<4x6xi32> -> tensor<4x2x6xi32>
  func.return
}

// -----

func.func @f(%a: tensor<4x6xi1>) {
  // expected-error @+1 {{prim.window: fill 2.0 is not a value of the i1 operand (0 or 1)}}
  %0 = prim.window %a {window = [2], strides = [1], dilations = [1], lhs_dilation = [1], pads_lo = [1], pads_hi = [0], fill = 2.0 : f64} : tensor<4x6xi1> -> tensor<4x2x6xi1>
  func.return
}
