// A gather of an elementwise result becomes the op of gathered operands, to a fixpoint, so the
// gather reads an argument (no whole-size intermediate); size-1 operands on the axis are not
// gathered; an op with other users is cloned when the gather picks no more than it computes.
// RUN: fusebind-opt %s --split-input-file -p sink-gathers | filecheck %s

// CHECK-LABEL: func.func @chain(
// CHECK-NEXT: %g = prim.take_along %z, %y {axis = 1} : (tensor<4x10xf32>, tensor<4x1xi64>) -> tensor<4x1xf32>
// CHECK-NEXT: %g_1 = prim.sub %g, %m : (tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %g_2 = prim.exp %g_1 : tensor<4x1xf32> -> tensor<4x1xf32>
// CHECK-NEXT: func.return %g_2
func.func @chain(%z: tensor<4x10xf32>, %m: tensor<4x1xf32>, %y: tensor<4x1xi64>) -> tensor<4x1xf32> {
  %d = prim.sub %z, %m : (tensor<4x10xf32>, tensor<4x1xf32>) -> tensor<4x10xf32>
  %e = prim.exp %d : tensor<4x10xf32> -> tensor<4x10xf32>
  %g = prim.take_along %e, %y {axis = 1} : (tensor<4x10xf32>, tensor<4x1xi64>) -> tensor<4x1xf32>
  func.return %g : tensor<4x1xf32>
}

// -----

// CHECK-LABEL: func.func @shared(
// CHECK-NEXT: %d = prim.mul %z, %z
// CHECK-NEXT: %g = prim.take_along %z, %y {axis = 1, in_bounds}
// CHECK-NEXT: %g_1 = prim.mul %g, %g
// CHECK-NEXT: func.return %d, %g_1
func.func @shared(%z: tensor<4x10xf32>, %y: tensor<4x1xi64>) -> (tensor<4x10xf32>, tensor<4x1xf32>) {
  %d = prim.mul %z, %z : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<4x10xf32>
  %g = prim.take_along %d, %y {axis = 1, in_bounds} : (tensor<4x10xf32>, tensor<4x1xi64>) -> tensor<4x1xf32>
  func.return %d, %g : tensor<4x10xf32>, tensor<4x1xf32>
}

// -----

// Nothing to gather (every operand has size 1 on the axis): the gather stays and checks its indices.
// CHECK-LABEL: func.func @broadcast_only(
// CHECK-NEXT: %d = prim.mul %m, %m
// CHECK-NEXT: %b = prim.broadcast_to
// CHECK-NEXT: %g = prim.take_along %b, %y {axis = 1}
func.func @broadcast_only(%m: tensor<4x1xf32>, %y: tensor<4x2xi64>) -> tensor<4x2xf32> {
  %d = prim.mul %m, %m : (tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %b = prim.broadcast_to %d : tensor<4x1xf32> -> tensor<4x3xf32>
  %g = prim.take_along %b, %y {axis = 1} : (tensor<4x3xf32>, tensor<4x2xi64>) -> tensor<4x2xf32>
  func.return %g : tensor<4x2xf32>
}

// -----

// np.take by 1-d indices; a lower-rank operand is aligned by a reshape, then gathered.
// CHECK-LABEL: func.func @take(
// CHECK-NEXT: %g = prim.gather %x, %i {axis = 1} : (tensor<3x5xf32>, tensor<2xi32>) -> tensor<3x2xf32>
// CHECK-NEXT: %g_1 = prim.reshape %w : tensor<5xf32> -> tensor<1x5xf32>
// CHECK-NEXT: %g_2 = prim.gather %g_1, %i {axis = 1} : (tensor<1x5xf32>, tensor<2xi32>) -> tensor<1x2xf32>
// CHECK-NEXT: %g_3 = prim.add %g, %g_2 : (tensor<3x2xf32>, tensor<1x2xf32>) -> tensor<3x2xf32>
func.func @take(%x: tensor<3x5xf32>, %w: tensor<5xf32>, %i: tensor<2xi32>) -> tensor<3x2xf32> {
  %s = prim.add %x, %w : (tensor<3x5xf32>, tensor<5xf32>) -> tensor<3x5xf32>
  %g = prim.gather %s, %i {axis = 1} : (tensor<3x5xf32>, tensor<2xi32>) -> tensor<3x2xf32>
  func.return %g : tensor<3x2xf32>
}

// -----

// A gather that picks more than the op computes (a repeat) does not clone a shared op.
// CHECK-LABEL: func.func @repeat_shared(
// CHECK-NEXT: %s = prim.neg %x
// CHECK-NEXT: %g = prim.gather %s, %i {axis = 0} : (tensor<2xf32>, tensor<6xi64>) -> tensor<6xf32>
func.func @repeat_shared(%x: tensor<2xf32>, %i: tensor<6xi64>) -> (tensor<2xf32>, tensor<6xf32>) {
  %s = prim.neg %x : tensor<2xf32> -> tensor<2xf32>
  %g = prim.gather %s, %i {axis = 0} : (tensor<2xf32>, tensor<6xi64>) -> tensor<6xf32>
  func.return %s, %g : tensor<2xf32>, tensor<6xf32>
}
