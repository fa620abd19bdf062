func.func @f(%a: tensor<4x4xf32>) -> tensor<4xf32> {
  %r = prim.reduce_sum %a {axes = [-7]} : tensor<4x4xf32> -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}
