// enable_small_channel=1 marks an ungrouped Conv2D of at most 4 input channels (C0 8 for
// float32) with _small_channel; a wider one, a grouped one, and the default stay unmarked.
// RUN: ge-opt %s -p 'format-selection{soc_version="Ascend310P3" enable_small_channel=1}' | filecheck %s
// RUN: ge-opt %s -p 'format-selection{soc_version="Ascend310P3"}' | filecheck %s --check-prefix=OFF

builtin.module {
  ascend_graph.graph @convs {
    %0 = ascend_graph.data {index = 0 : i64, name = "rgb"} : tensor<1x3x4x4xf32>
    %1 = ascend_graph.const {value = dense<1.000000e+00> : tensor<8x3x3x3xf32>, name = "w_rgb"} : tensor<8x3x3x3xf32>
    %2 = ascend_graph.conv2d %0, %1 {strides = array<i64: 1, 1, 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1, 1, 1>, groups = 1 : i64, name = "small"} : (tensor<1x3x4x4xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x4x4xf32>
    %3 = ascend_graph.const {value = dense<1.000000e+00> : tensor<8x8x3x3xf32>, name = "w_wide"} : tensor<8x8x3x3xf32>
    %4 = ascend_graph.conv2d %2, %3 {strides = array<i64: 1, 1, 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1, 1, 1>, groups = 1 : i64, name = "wide"} : (tensor<1x8x4x4xf32>, tensor<8x8x3x3xf32>) -> tensor<1x8x4x4xf32>
    %5 = ascend_graph.data {index = 1 : i64, name = "pair"} : tensor<1x4x4x4xf32>
    %6 = ascend_graph.const {value = dense<1.000000e+00> : tensor<4x2x3x3xf32>, name = "w_grouped"} : tensor<4x2x3x3xf32>
    %7 = ascend_graph.conv2d %5, %6 {strides = array<i64: 1, 1, 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1, 1, 1>, groups = 2 : i64, name = "grouped"} : (tensor<1x4x4x4xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x4x4xf32>
    ascend_graph.net_output %4, %7 {names = ["out_0", "out_1"]} : tensor<1x8x4x4xf32>, tensor<1x4x4x4xf32>
  }
}

// CHECK: ascend_graph.conv2d %{{.*}}, %{{.*}} {_small_channel = true, {{.*}}name = "small"}
// CHECK-NOT: _small_channel
// CHECK: ascend_graph.conv2d %{{.*}}, %{{.*}} {strides = {{.*}}name = "wide"}
// CHECK: ascend_graph.conv2d %{{.*}}, %{{.*}} {strides = {{.*}}name = "grouped"}

// OFF-NOT: _small_channel
