// Round trip of fused.region / fused.yield / #fused.cost, custom and generic.
// RUN: fusebind-opt %s | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | fusebind-opt | filecheck %s
// RUN: fusebind-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// GENERIC: "fused.region"(%a, %b) <{fused_id = 3 : i64, name = "gelu", cost = #fused.cost<flops = 40, bytes = 48, ns = 1.5>}> ({
// GENERIC-NEXT: ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
// GENERIC: "fused.yield"(%z) : (tensor<4xf32>) -> ()
// GENERIC: "fused.region"(%a) <{fused_id = 0 : i64, name = ""}> ({

// CHECK-LABEL: func.func @one_result(
// CHECK-NEXT: %r = fused.region @gelu id 3 (%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> cost #fused.cost<flops = 40, bytes = 48, ns = 1.5> {
// CHECK-NEXT: ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
// CHECK-NEXT: %z = prim.add %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: fused.yield %z : tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: func.return %r : tensor<4xf32>
func.func @one_result(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %r = fused.region @gelu id 3 (%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> cost #fused.cost<flops = 40, bytes = 48, ns = 1.5> {
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    %z = prim.add %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fused.yield %z : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}

// CHECK-LABEL: func.func @two_results_unassigned(
// CHECK-NEXT: %r, %s = fused.region @"" (%a) : (tensor<?x8xf64>) -> (tensor<?x8xf64>, tensor<?xf64>) {
// CHECK-NEXT: ^bb0(%x: tensor<?x8xf64>):
// CHECK-NEXT: %e = prim.exp %x : tensor<?x8xf64> -> tensor<?x8xf64>
// CHECK-NEXT: %m = prim.reduce_max %e {axes = [1]} : tensor<?x8xf64> -> tensor<?xf64>
// CHECK-NEXT: fused.yield %e, %m : tensor<?x8xf64>, tensor<?xf64>
// CHECK-NEXT: }
func.func @two_results_unassigned(%a: tensor<?x8xf64>) -> tensor<?xf64> {
  %r, %s = fused.region @"" (%a) : (tensor<?x8xf64>) -> (tensor<?x8xf64>, tensor<?xf64>) {
  ^bb0(%x: tensor<?x8xf64>):
    %e = prim.exp %x : tensor<?x8xf64> -> tensor<?x8xf64>
    %m = prim.reduce_max %e {axes = [1]} : tensor<?x8xf64> -> tensor<?xf64>
    fused.yield %e, %m : tensor<?x8xf64>, tensor<?xf64>
  }
  func.return %s : tensor<?xf64>
}

// CHECK-LABEL: func.func @no_operands_quoted_name(
// CHECK-NEXT: %r = fused.region @"my kernel" id 1000 () : () -> tensor<2xi32> cost #fused.cost<flops = 0, bytes = 8, ns = 0.25> {
// CHECK-NEXT: %c = prim.constant dense<[1, 2]> : tensor<2xi32>
// CHECK-NEXT: fused.yield %c : tensor<2xi32>
// CHECK-NEXT: }
func.func @no_operands_quoted_name() -> tensor<2xi32> {
  %r = fused.region @"my kernel" id 1000 () : () -> tensor<2xi32> cost #fused.cost<flops = 0, bytes = 8, ns = 0.25> {
    %c = prim.constant dense<[1, 2]> : tensor<2xi32>
    fused.yield %c : tensor<2xi32>
  }
  func.return %r : tensor<2xi32>
}
