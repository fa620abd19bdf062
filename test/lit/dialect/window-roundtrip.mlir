// Round trip of prim.window (issue 16), in custom and generic form: a padded 2-D window (conv),
// a strided 1-D window with an integer fill (max pool), an input-dilated window (conv_transpose)
// and a dynamic leading dim.
// RUN: fusebind-opt %s | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// GENERIC: "prim.window"(%a) <{window = array<i64: 3, 3>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, lhs_dilation = array<i64: 1, 1>, pads_lo = array<i64: 1, 1>, pads_hi = array<i64: 1, 1>, fill = 0.000000e+00 : f64}> : (tensor<1x8x6x6xf32>) -> tensor<1x8x3x3x6x6xf32>

// CHECK-LABEL: func.func @windows
// CHECK-NEXT: %0 = prim.window %a {window = [3, 3], strides = [1, 1], dilations = [1, 1], lhs_dilation = [1, 1], pads_lo = [1, 1], pads_hi = [1, 1], fill = 0.000000e+00 : f64} : tensor<1x8x6x6xf32> -> tensor<1x8x3x3x6x6xf32>
// CHECK-NEXT: %1 = prim.window %b {window = [2], strides = [2], dilations = [1], lhs_dilation = [1], pads_lo = [0], pads_hi = [0], fill = 0xC1E0000000000000 : f64} : tensor<2x5xi32> -> tensor<2x2x2xi32>
// CHECK-NEXT: %2 = prim.window %c {window = [3], strides = [1], dilations = [2], lhs_dilation = [2], pads_lo = [4], pads_hi = [4], fill = 0.000000e+00 : f64} : tensor<1x2x4xf32> -> tensor<1x2x3x11xf32>
// CHECK-NEXT: %3 = prim.window %d {window = [2], strides = [1], dilations = [1], lhs_dilation = [1], pads_lo = [0], pads_hi = [0], fill = 0xfff0000000000000 : f64} : tensor<?x5xf32> -> tensor<?x2x4xf32>
func.func @windows(%a: tensor<1x8x6x6xf32>, %b: tensor<2x5xi32>, %c: tensor<1x2x4xf32>, %d: tensor<?x5xf32>) -> (tensor<1x8x3x3x6x6xf32>, tensor<2x2x2xi32>, tensor<1x2x3x11xf32>, tensor<?x2x4xf32>) {
  %0 = prim.window %a {window = [3, 3], strides = [1, 1], dilations = [1, 1], lhs_dilation = [1, 1], pads_lo = [1, 1], pads_hi = [1, 1], fill = 0.0 : f64} : tensor<1x8x6x6xf32> -> tensor<1x8x3x3x6x6xf32>
  %1 = prim.window %b {window = [2], strides = [2], dilations = [1], lhs_dilation = [1], pads_lo = [0], pads_hi = [0], fill = -2147483648.0 : f64} : tensor<2x5xi32> -> tensor<2x2x2xi32>
  %2 = prim.window %c {window = [3], strides = [1], dilations = [2], lhs_dilation = [2], pads_lo = [4], pads_hi = [4], fill = 0.0 : f64} : tensor<1x2x4xf32> -> tensor<1x2x3x11xf32>
  %3 = prim.window %d {window = [2], strides = [1], dilations = [1], lhs_dilation = [1], pads_lo = [0], pads_hi = [0], fill = 0xFFF0000000000000 : f64} : tensor<?x5xf32> -> tensor<?x2x4xf32>
  func.return %0, %1, %2, %3 : tensor<1x8x3x3x6x6xf32>, tensor<2x2x2xi32>, tensor<1x2x3x11xf32>, tensor<?x2x4xf32>
}
