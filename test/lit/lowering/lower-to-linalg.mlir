// lower-to-linalg emits linalg on tensors in destination-passing style, and
// upstream MLIR's own parser and verifier accept it.
// RUN: fusebind-opt %s -p lower-to-linalg | filecheck %s
// RUN: fusebind-opt %s -p lower-to-linalg | %python -m fusebind.lowering.mlir_check | filecheck %s --check-prefix=UPSTREAM
// RUN: fusebind-opt %s -p 'lower-to-linalg{dynamic=true}' | %python -m fusebind.lowering.mlir_check | filecheck %s --check-prefix=UPSTREAM
// RUN: fusebind-opt %s -p 'lower-to-linalg{dynamic=true}' | filecheck %s --check-prefix=DYN
// UPSTREAM: ok: upstream MLIR parsed and verified
// CHECK-DAG: func.func private @__fb_tanh_f32
// CHECK-LABEL: func.func @fb_gelu_0(%in0: memref<4x8xf32>, %in1: memref<8xf32>, %out0: memref<4x8xf32>, %out1: memref<4xf32>)
// CHECK: bufferization.to_tensor %in0 restrict
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK: func.call @__fb_tanh_f32
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK: bufferization.materialize_in_destination {{.*}} in restrict writable %out0
// CHECK: bufferization.materialize_in_destination {{.*}} in restrict writable %out1
// CHECK-NOT: prim.
// CHECK-NOT: fused.region
// DYN: func.func @fb_gelu_0(%in0: memref<?x?xf32>, %in1: memref<?xf32>, %out0: memref<?x?xf32>, %out1: memref<?xf32>)
func.func @main(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %r:2 = fused.region @gelu (%a, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%x: tensor<4x8xf32>, %y: tensor<8xf32>):
    %m = prim.add %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %t = prim.tanh %m : tensor<4x8xf32> -> tensor<4x8xf32>
    %s = prim.reduce_max %t {axes = [1]} : tensor<4x8xf32> -> tensor<4xf32>
    fused.yield %t, %s : tensor<4x8xf32>, tensor<4xf32>
  }
  func.return %r#0, %r#1 : tensor<4x8xf32>, tensor<4xf32>
}
