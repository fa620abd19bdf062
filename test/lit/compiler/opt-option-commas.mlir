// Pass options are separated by spaces, as in MLIR. The documented pipeline of
// examples/opt_pipeline.py parses; its old comma form is refused with the fix.
// RUN: fusebind-opt %s -p 'fuse{gate=all remarks=true}' 2>&1 | filecheck %s --check-prefix=SPACES
// RUN: not fusebind-opt %s -p 'fuse{gate=all,remarks=true},annotate-cost' 2>&1 | filecheck %s --check-prefix=COMMAS
// SPACES: remark:
// SPACES: fused.region
// COMMAS: fusebind-opt: error: Error parsing pass pipeline specification:
// COMMAS: Malformed pass arguments, expected either a space or `}` here
// COMMAS-NEXT: pass options are separated by spaces, as in MLIR: write 'fuse{gate=all remarks=true},annotate-cost'
// COMMAS-NOT: Traceback

func.func @chain(%a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %m = prim.mul %a, %b : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %r = prim.relu %m : tensor<64xf32> -> tensor<64xf32>
  func.return %r : tensor<64xf32>
}
