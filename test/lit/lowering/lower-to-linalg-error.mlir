// A region the emitter cannot lower is a diagnostic naming the stage, not a traceback.
// RUN: not fusebind-opt %s -p lower-to-linalg 2>&1 | filecheck %s
// CHECK: error: pass 'lower-to-linalg' failed: LoweringError: lowering failed at stage 'emit': {{.*}}reshape needs static shapes
// CHECK: reproduce with: {{.*}}-m fusebind.lowering.repro --stage emit
func.func @main(%a: tensor<?x4xf32>) -> tensor<?xf32> {
  %r = fused.region @flat (%a) : (tensor<?x4xf32>) -> tensor<?xf32> {
  ^bb0(%x: tensor<?x4xf32>):
    %f = prim.reshape %x : tensor<?x4xf32> -> tensor<?xf32>
    fused.yield %f : tensor<?xf32>
  }
  func.return %r : tensor<?xf32>
}
