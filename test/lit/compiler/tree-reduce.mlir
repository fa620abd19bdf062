// A reduction over axis 0 of at least 2^18 elements becomes a fixed tree (compiler/tree_reduce.py):
// chunks of 2^16 elements, 2^10 for a fused row kernel (512 rows for columns; x[:M] viewed as (C, R, ...)) reduced first by a stage that keeps the chunk
// axis (splittable), a view reshape (a fusion boundary), then the partials (f32 sums in f64) and the
// ragged tail x[M:] (a slice viewed as (1, T, ...): no copy, no padding). Small reductions and those keeping axis 0 stay.
// RUN: fusebind-opt %s --split-input-file -p tree-reduce | filecheck %s

// A fused row kernel (a producer, every axis reduced) gets rows of 1024: 292 chunks, a tail of 999.
// CHECK-LABEL: func.func @sum_of_squares(
// CHECK-NEXT: %0 = prim.slice %x {starts = [0], limits = [299008], strides = [1]} : tensor<300007xf32> -> tensor<299008xf32>
// CHECK-NEXT: %1 = prim.reshape %0 : tensor<299008xf32> -> tensor<292x1024xf32>
// CHECK-NEXT: %2 = prim.mul %1, %1 : (tensor<292x1024xf32>, tensor<292x1024xf32>) -> tensor<292x1024xf32>
// CHECK-NEXT: %3 = prim.reduce_sum %2 {axes = [1], keepdims} : tensor<292x1024xf32> -> tensor<292x1xf32>
// CHECK-NEXT: %4 = prim.reshape %3 : tensor<292x1xf32> -> tensor<292xf32>
// CHECK-NEXT: %5 = prim.cast %4 : tensor<292xf32> -> tensor<292xf64>
// CHECK-NEXT: %6 = prim.reduce_sum %5 {axes = [0]} : tensor<292xf64> -> tensor<f64>
// CHECK-NEXT: %7 = prim.slice %x {starts = [299008], limits = [300007], strides = [1]} : tensor<300007xf32> -> tensor<999xf32>
// CHECK-NEXT: %8 = prim.reshape %7 : tensor<999xf32> -> tensor<1x999xf32>
// CHECK-NEXT: %9 = prim.mul %8, %8
// CHECK-NEXT: %10 = prim.reduce_sum %9 {axes = [0, 1]} : tensor<1x999xf32> -> tensor<f32>
// CHECK-NEXT: %11 = prim.cast %10 : tensor<f32> -> tensor<f64>
// CHECK-NEXT: %12 = prim.add %6, %11
// CHECK-NEXT: %r = prim.cast %12 : tensor<f64> -> tensor<f32>
// CHECK-NEXT: func.return %r
func.func @sum_of_squares(%x: tensor<300007xf32>) -> tensor<f32> {
  %s = prim.mul %x, %x : (tensor<300007xf32>, tensor<300007xf32>) -> tensor<300007xf32>
  %r = prim.reduce_sum %s {axes = [0]} : tensor<300007xf32> -> tensor<f32>
  func.return %r : tensor<f32>
}

// -----

// Column maxima with keepdims, rows a multiple of the chunk (512 rows: TREE_COLUMN_ROWS): no tail;
// the partials keep the 1s.
// CHECK-LABEL: func.func @column_max(
// CHECK-NEXT: %0 = prim.reshape %x : tensor<4096x1024xf64> -> tensor<8x512x1024xf64>
// CHECK-NEXT: %1 = prim.reduce_max %0 {axes = [1], keepdims} : tensor<8x512x1024xf64> -> tensor<8x1x1024xf64>
// CHECK-NEXT: %2 = prim.reshape %1 : tensor<8x1x1024xf64> -> tensor<8x1024xf64>
// CHECK-NEXT: %r = prim.reduce_max %2 {axes = [0], keepdims} : tensor<8x1024xf64> -> tensor<1x1024xf64>
// CHECK-NEXT: func.return %r
func.func @column_max(%x: tensor<4096x1024xf64>) -> tensor<1x1024xf64> {
  %r = prim.reduce_max %x {axes = [0], keepdims} : tensor<4096x1024xf64> -> tensor<1x1024xf64>
  func.return %r : tensor<1x1024xf64>
}

// -----

// A mean of f64: the tree's sum divided by the count (exact in f64).
// CHECK-LABEL: func.func @mean(
// CHECK: prim.reduce_sum %{{.*}} {axes = [1, 2], keepdims} : tensor<8x1x65536xf64> -> tensor<8x1x1xf64>
// CHECK: %[[T:.*]] = prim.reduce_sum %{{.*}} {axes = [0]} : tensor<8xf64> -> tensor<f64>
// CHECK: %[[N:.*]] = prim.constant dense<5.242880e+05>
// CHECK: %r = prim.div %[[T]], %[[N]]
func.func @mean(%x: tensor<8x65536xf64>) -> tensor<f64> {
  %r = prim.reduce_mean %x {axes = [0, 1]} : tensor<8x65536xf64> -> tensor<f64>
  func.return %r : tensor<f64>
}

// -----

// Left alone: below 2^18 elements, a reduction keeping axis 0, and a narrow float.
// CHECK-LABEL: func.func @alone(
// CHECK-NEXT: %a = prim.reduce_sum %x {axes = [0]} : tensor<262143xf32> -> tensor<f32>
// CHECK-NEXT: %b = prim.reduce_sum %y {axes = [1]} : tensor<4096x1024xf32> -> tensor<4096xf32>
// CHECK-NEXT: %c = prim.reduce_sum %z {axes = [0]} : tensor<300007xf16> -> tensor<f16>
func.func @alone(%x: tensor<262143xf32>, %y: tensor<4096x1024xf32>, %z: tensor<300007xf16>) -> (tensor<f32>, tensor<4096xf32>, tensor<f16>) {
  %a = prim.reduce_sum %x {axes = [0]} : tensor<262143xf32> -> tensor<f32>
  %b = prim.reduce_sum %y {axes = [1]} : tensor<4096x1024xf32> -> tensor<4096xf32>
  %c = prim.reduce_sum %z {axes = [0]} : tensor<300007xf16> -> tensor<f16>
  func.return %a, %b, %c : tensor<f32>, tensor<4096xf32>, tensor<f16>
}
