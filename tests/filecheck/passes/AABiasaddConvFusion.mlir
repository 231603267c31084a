// Conv2D followed by a per-channel Add: the Add becomes the conv's bias.
// RUN: ge-opt %s -p 'AABiasaddConvFusion' | filecheck %s

builtin.module {
  ascend_graph.graph @conv_bias_add {
    %0 = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<1x2x4x4xf32>
    %1 = ascend_graph.const {value = dense<[[[[5.000000e-01]], [[1.000000e+00]]], [[[1.500000e+00]], [[2.000000e+00]]]]> : tensor<2x2x1x1xf32>, name = "const_0"} : tensor<2x2x1x1xf32>
    %2 = ascend_graph.conv2d %0, %1 {strides = array<i64: 1, 1, 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1, 1>, groups = 1 : i64, name = "Conv2D_0"} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
    %3 = ascend_graph.const {value = dense<[[[[5.000000e-01]], [[-5.000000e-01]]]]> : tensor<1x2x1x1xf32>, name = "const_1"} : tensor<1x2x1x1xf32>
    %4 = ascend_graph.add %2, %3 {name = "Add_0"} : (tensor<1x2x4x4xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x4x4xf32>
    ascend_graph.net_output %4 {names = ["out_0"]} : tensor<1x2x4x4xf32>
  }
}

// CHECK: builtin.module
// CHECK-NEXT: ascend_graph.graph @conv_bias_add {
// CHECK-NEXT: %[[V0:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = dense<{{\[\[}}{{\[\[}}5.000000e-01]], {{\[\[}}1.000000e+00]]], {{\[\[}}[1.500000e+00]], {{\[\[}}2.000000e+00]]]]> : tensor<2x2x1x1xf32>, name = "const_0"} : tensor<2x2x1x1xf32>
// CHECK-NEXT: %[[V2:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = dense<[5.000000e-01, -5.000000e-01]> : tensor<2xf32>, name = "Conv2D_0.bias"} : tensor<2xf32>
// CHECK-NEXT: %[[V3:[A-Za-z0-9_.$-]+]] = ascend_graph.conv2d %[[V0]], %[[V1]], %[[V2]] {strides = array<i64: 1, 1, 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1, 1>, groups = 1 : i64, name = "Conv2D_0"} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT: ascend_graph.net_output %[[V3]] {names = ["out_0"]} : tensor<1x2x4x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
