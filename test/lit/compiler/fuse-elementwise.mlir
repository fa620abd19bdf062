// Elementwise chains with a broadcast: fused when the gate is open, queued when closed.
// RUN: fusebind-opt %s -p 'fuse{gate=all}' | filecheck %s
// RUN: fusebind-opt %s -p 'fuse{gate=none remarks=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=GATED
// RUN: fusebind-opt %s -p 'fuse{gate=none}' | filecheck %s --check-prefix=CLOSED
// CHECK-LABEL: func.func @chain(
// CHECK-NEXT: fused.region @ew_add_exp_relu id 65536 (%a, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> cost #fused.cost
// CHECK-NEXT: ^bb0
// CHECK-NEXT: prim.add
// CHECK-NEXT: prim.exp
// CHECK-NEXT: prim.relu
// CHECK-NEXT: fused.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return
// CHECK-NOT: prim.
// GATED: remark: gated id 65536 (no kernel on cpu): @ew_add_exp_relu in @chain, 3 ops: prim.add, prim.exp, prim.relu; queued
// CLOSED-NOT: fused.region
// CLOSED: prim.add
// CLOSED-NEXT: prim.exp
// CLOSED-NEXT: prim.relu
func.func @chain(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %x = prim.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = prim.exp %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %z = prim.relu %y : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %z : tensor<4x8xf32>
}
