// prim.gather / prim.take_along in a fused region are index maps (issue 13): one linalg.generic
// whose output map is the identity, reading the indices through its indexing map and the operand
// with tensor.extract; in_bounds indices are normalized (negative + n) and clamped, constant
// non-negative ones are used as they are (checked by the verifier: no runtime check). Elementwise
// fusion folds the gathers into their consumer: the LLVM IR of the region allocates nothing.
// RUN: fusebind-opt %s -p lower-to-linalg | filecheck %s
// RUN: fusebind-opt %s -p lower-to-linalg | %python -m fusebind.lowering.mlir_check | filecheck %s --check-prefix=UPSTREAM
// RUN: fusebind-opt %s -p lower-to-llvm | filecheck %s --check-prefix=LLVM
// UPSTREAM: ok: upstream MLIR parsed and verified
// CHECK-LABEL: func.func @fb_emb_0(%in0: memref<50x8xf32>, %in1: memref<4xi32>, %out0: memref<4x8xf32>)
// CHECK: %[[X:.*]] = bufferization.to_tensor %in0 restrict
// CHECK: %[[I:.*]] = bufferization.to_tensor %in1 restrict
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>]{{.*}} ins(%[[I]] : tensor<4xi32>)
// CHECK: arith.extsi
// CHECK: arith.cmpi slt
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: %[[R:.*]] = arith.index_cast
// CHECK: tensor.extract %[[X]][%[[R]], {{.*}}] : tensor<50x8xf32>
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK-NOT: arith.cmpi
// CHECK: %[[C:.*]] = arith.index_cast
// CHECK: tensor.extract %[[X]][%[[C]], {{.*}}] : tensor<50x8xf32>
// CHECK: arith.addf
// CHECK-NOT: prim.
// LLVM: define void @fb_emb_0(
// LLVM-NOT: @malloc
// LLVM: define void @_mlir_ciface_fb_emb_0(ptr
func.func @main(%a: tensor<50x8xf32>, %i: tensor<4xi32>) -> tensor<4x8xf32> {
  %r = fused.region @emb (%a, %i) : (tensor<50x8xf32>, tensor<4xi32>) -> tensor<4x8xf32> {
  ^bb0(%x: tensor<50x8xf32>, %j: tensor<4xi32>):
    %g = prim.gather %x, %j {axis = 0, in_bounds} : (tensor<50x8xf32>, tensor<4xi32>) -> tensor<4x8xf32>
    %k = prim.constant dense<[[49], [0], [1], [2]]> : tensor<4x1xi64>
    %t = prim.take_along %x, %k {axis = 0} : (tensor<50x8xf32>, tensor<4x1xi64>) -> tensor<4x8xf32>
    %m = prim.add %g, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    fused.yield %m : tensor<4x8xf32>
  }
  func.return %r : tensor<4x8xf32>
}
