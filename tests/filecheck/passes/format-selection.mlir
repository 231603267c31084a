// Conv2D works in NC1HWC0 with a FRACTAL_Z filter; TransData at the boundaries.
// RUN: ge-opt %s -p 'format-selection{soc_version="Ascend310P3"}' | filecheck %s

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
// CHECK-NEXT: %[[V1:[A-Za-z0-9_.$-]+]] = ascend_graph.trans_data %[[V0]] {src_format = "NCHW", dst_format = "NC1HWC0", name = "input_0/TransData_NC1HWC0"} : (tensor<1x2x4x4xf32>) -> tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>
// CHECK-NEXT: %[[V2:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = #ascend_graph.weight<"const_0.FRACTAL_Z", "cc64e0cbaf11f371">, name = "const_0"} : tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_Z", "NCHW", array<i64: 2, 2, 1, 1>>>
// CHECK-NEXT: %[[V3:[A-Za-z0-9_.$-]+]] = ascend_graph.conv2d %[[V1]], %[[V2]] {strides = array<i64: 1, 1, 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1, 1>, groups = 1 : i64, name = "Conv2D_0"} : (tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>, tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_Z", "NCHW", array<i64: 2, 2, 1, 1>>>) -> tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>
// CHECK-NEXT: %[[V4:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = #ascend_graph.weight<"const_1.NC1HWC0", "93edf81387017f63">, name = "const_1"} : tensor<1x1x1x1x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 1, 1>>>
// CHECK-NEXT: %[[V5:[A-Za-z0-9_.$-]+]] = ascend_graph.add %[[V3]], %[[V4]] {name = "Add_0"} : (tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>, tensor<1x1x1x1x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 1, 1>>>) -> tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>
// CHECK-NEXT: %[[V6:[A-Za-z0-9_.$-]+]] = ascend_graph.trans_data %[[V5]] {src_format = "NC1HWC0", dst_format = "NCHW", name = "Add_0/TransData_NCHW"} : (tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT: ascend_graph.net_output %[[V6]] {names = ["out_0"]} : tensor<1x2x4x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
