// Dedup (two identical chains share one id), cost-based rejection, region size bound.
// RUN: fusebind-opt %s -p 'fuse{gate=all}' | filecheck %s --check-prefix=DEDUP
// RUN: fusebind-opt %s -p 'fuse{gate=none remarks=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=QUEUE
// RUN: fusebind-opt %s -p 'fuse{gate=all launch-ns=0.0 gflops=0.000001 remarks=true}' 2>&1 | filecheck %s --check-prefix=COST
// RUN: fusebind-opt %s -p 'fuse{gate=all max-ops=2 remarks=true}' 2>&1 | filecheck %s --check-prefix=SIZE
// DEDUP: fused.region @ew_exp_neg id [[ID:[0-9]+]] (%a)
// DEDUP: fused.region @ew_exp_neg id [[ID]] (%b)
// DEDUP: fused.yield
// DEDUP-NEXT: }
// DEDUP-NEXT: func.return
// DEDUP-NOT: prim.neg
// DEDUP-LABEL: func.func @long(
// QUEUE: remark: gated id [[QID:[0-9]+]] (no kernel on cpu): @ew_exp_neg in @twins
// QUEUE: remark: gated id [[QID]] (no kernel on cpu): @ew_exp_neg in @twins
// COST: remark: rejected @ew_exp_neg (unprofitable: fused {{.*}}us >= unfused {{.*}}us, Layer-1) in @twins
// COST-NOT: fused.region
// SIZE: remark: rejected @ew_abs (too-big: 3 ops > max-ops 2) in @long
// SIZE-LABEL: func.func @long(
// SIZE-NEXT: fused.region @ew_exp_neg id
// SIZE: fused.region @ew_abs_tanh id
func.func @twins(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %x1 = prim.exp %a : tensor<8xf32> -> tensor<8xf32>
  %y1 = prim.neg %x1 : tensor<8xf32> -> tensor<8xf32>
  %x2 = prim.exp %b : tensor<8xf32> -> tensor<8xf32>
  %y2 = prim.neg %x2 : tensor<8xf32> -> tensor<8xf32>
  func.return %y1, %y2 : tensor<8xf32>, tensor<8xf32>
}
func.func @long(%a: tensor<8xf32>) -> tensor<8xf32> {
  %x1 = prim.exp %a : tensor<8xf32> -> tensor<8xf32>
  %x2 = prim.neg %x1 : tensor<8xf32> -> tensor<8xf32>
  %x3 = prim.abs %x2 : tensor<8xf32> -> tensor<8xf32>
  %x4 = prim.tanh %x3 : tensor<8xf32> -> tensor<8xf32>
  func.return %x4 : tensor<8xf32>
}
