// `fuse{gate=all}` wraps a user op (`mylib.cube`, `mylib.hypot2`, from the plugin test/api/user_ops.py)
// with its prim neighbours into one fused.region, through `fusebind-opt --plugin`.
// RUN: env PYTHONPATH=%S/../../api fusebind-opt %s --plugin user_ops -p "fuse{gate=all}" | filecheck %s --check-prefix=FUSED

func.func @f(%a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %c = mylib.cube %a : tensor<64xf32> -> tensor<64xf32>
  %m = prim.mul %c, %b : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %h = mylib.hypot2 %m, %a : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return %h : tensor<64xf32>
}

// FUSED:      func.func @f(
// FUSED-NEXT:   fused.region @ew_mylib_cube_mul_mylib_hypot2 id 65536
// FUSED:          mylib.cube
// FUSED-NEXT:     prim.mul
// FUSED-NEXT:     mylib.hypot2
// FUSED-NEXT:     fused.yield
// FUSED-NOT:    mylib.cube
// FUSED:        func.return

