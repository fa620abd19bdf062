// prim.scan in a fused region (issue 14): an scf.for nest over the other dims, then one over the
// axis carrying the running value (first the identity) and the result; each step extracts the
// element, combines running-value-first (numpy's sequential order, no fast-math flags) and inserts
// it. No memref.copy and no malloc in the LLVM IR.
// RUN: fusebind-opt %s -p lower-to-linalg | filecheck %s
// RUN: fusebind-opt %s -p lower-to-linalg | %python -m fusebind.lowering.mlir_check | filecheck %s --check-prefix=UPSTREAM
// RUN: fusebind-opt %s -p lower-to-llvm | filecheck %s --check-prefix=LLVM
// UPSTREAM: ok: upstream MLIR parsed and verified
// CHECK-LABEL: func.func @fb_cs_0(%in0: memref<4x6xf32>, %out0: memref<4x6xf32>)
// CHECK: %[[Z:.*]] = arith.constant -0.000000e+00 : f32
// CHECK: scf.for %[[J:.*]] = %idx0 to %idx4 step %idx1 iter_args
// CHECK: %{{.*}}, %{{.*}} = scf.for %[[I:.*]] = %idx0 to %idx6 step %idx1 iter_args(%[[ACC:.*]] = %[[Z]], %[[T:.*]] = %{{.*}}) -> (f32, tensor<4x6xf32>)
// CHECK: %[[V:.*]] = tensor.extract %{{.*}}[%[[J]], %[[I]]] : tensor<4x6xf32>
// CHECK: %[[C:.*]] = arith.addf %[[ACC]], %[[V]] : f32
// CHECK: tensor.insert %[[C]] into %[[T]][%[[J]], %[[I]]] : tensor<4x6xf32>
// CHECK: arith.mulf
// CHECK-LABEL: func.func @fb_cp_1
// CHECK: arith.constant 1 : i64
// CHECK: arith.muli
// A scan along a dim that is not the last loops in C order and reads back the previous element:
// CHECK-LABEL: func.func @fb_c0_2
// CHECK: %[[F:.*]] = arith.cmpi eq, %[[I0:.*]], %idx0 : index
// CHECK: %[[P:.*]] = tensor.extract %{{.*}} : tensor<4x6xf32>
// CHECK: %[[R:.*]] = arith.select %[[F]], %{{.*}}, %[[P]] : f32
// CHECK: %[[X:.*]] = tensor.extract %{{.*}} : tensor<4x6xf32>
// CHECK: arith.addf %[[R]], %[[X]] : f32
// A scan over a value the region computed runs in place over it (its generic writes the out memref,
// the scan reads each element just before overwriting it): no second buffer (no alloca in @fb_pr_3).
// CHECK-LABEL: func.func @fb_pr_3
// CHECK: linalg.generic
// CHECK: %[[R:.*]] = scf.for %{{.*}} iter_args(%[[Y:.*]] = %[[G:r[0-9]+]]) -> (tensor<4x6xf32>)
// CHECK: %[[V:.*]] = tensor.extract %{{sout[0-9]+}}[%{{.*}}, %{{.*}}] : tensor<4x6xf32>
// CHECK-NOT: prim.
// LLVM: define void @fb_cs_0(
// LLVM-NOT: @malloc
// LLVM-NOT: @memrefCopy
// LLVM-LABEL: define void @fb_pr_3(
// LLVM-NOT: alloca
// LLVM-LABEL: define void @_mlir_ciface_fb_pr_3(
func.func @main(%a: tensor<4x6xf32>, %b: tensor<5xi64>) -> (tensor<4x6xf32>, tensor<5xi64>, tensor<4x6xf32>, tensor<4x6xf32>) {
  %r = fused.region @cs (%a) : (tensor<4x6xf32>) -> tensor<4x6xf32> {
  ^bb0(%x: tensor<4x6xf32>):
    %s = prim.scan %x {kind = "sum", axis = 1} : tensor<4x6xf32> -> tensor<4x6xf32>
    %m = prim.mul %s, %x : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
    fused.yield %m : tensor<4x6xf32>
  }
  %q = fused.region @cp (%b) : (tensor<5xi64>) -> tensor<5xi64> {
  ^bb0(%y: tensor<5xi64>):
    %p = prim.scan %y {kind = "prod", axis = 0} : tensor<5xi64> -> tensor<5xi64>
    fused.yield %p : tensor<5xi64>
  }
  %c = fused.region @c0 (%a) : (tensor<4x6xf32>) -> tensor<4x6xf32> {
  ^bb0(%z: tensor<4x6xf32>):
    %s0 = prim.scan %z {kind = "sum", axis = 0} : tensor<4x6xf32> -> tensor<4x6xf32>
    fused.yield %s0 : tensor<4x6xf32>
  }
  %p = fused.region @pr (%a) : (tensor<4x6xf32>) -> tensor<4x6xf32> {
  ^bb0(%w: tensor<4x6xf32>):
    %sq = prim.mul %w, %w : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
    %mx = prim.scan %sq {kind = "max", axis = 1} : tensor<4x6xf32> -> tensor<4x6xf32>
    fused.yield %mx : tensor<4x6xf32>
  }
  func.return %r, %q, %c, %p : tensor<4x6xf32>, tensor<5xi64>, tensor<4x6xf32>, tensor<4x6xf32>
}
