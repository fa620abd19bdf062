// case: {"args": [["f32", [3, 8]], ["f32", [3, 8]], ["f32", [8]], ["f32", [3, 1]]], "ops": [["reduce_max", [0], {"axis": 1}, "f32", [3, 1]], ["sub", [1, 4], {}, "f32", [3, 8]], ["const", [], {"value": 1.0}, "f32", []], ["abs", [5], {}, "f32", [3, 8]], ["add", [7, 6], {}, "f32", [3, 8]], ["log", [8], {}, "f32", [3, 8]], ["max", [9, 2], {}, "f32", [3, 8]]], "outputs": [10], "seed": 7, "regime": "specials"}
func.func @main(%a0: tensor<3x8xf32>, %a1: tensor<3x8xf32>, %a2: tensor<8xf32>, %a3: tensor<3x1xf32>) -> (tensor<3x8xf32>) {
  %v0 = prim.reduce_max %a0 {axes = [1], keepdims} : tensor<3x8xf32> -> tensor<3x1xf32>
  %v1 = prim.sub %a1, %v0 : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  %v2 = prim.constant dense<1.0> : tensor<f32>
  %v3 = prim.abs %v1 : tensor<3x8xf32> -> tensor<3x8xf32>
  %v4 = prim.add %v3, %v2 : (tensor<3x8xf32>, tensor<f32>) -> tensor<3x8xf32>
  %v5 = prim.log %v4 : tensor<3x8xf32> -> tensor<3x8xf32>
  %v6 = prim.max %v5, %a2 : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  func.return %v6 : tensor<3x8xf32>
}
