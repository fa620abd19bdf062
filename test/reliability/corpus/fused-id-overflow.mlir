func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = fused.region @g id 18446744073709551616 (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    fused.yield %x : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}
