// A SplitD along dim 0 with aligned pieces launches nothing: its outputs are slices of its input.
// RUN: ge-opt %s -p 'FusionVirtualOpSetSwitch' | filecheck %s

builtin.module {
  ascend_graph.graph @split {
    %0 = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<4x32xf16>
    %1 = ascend_graph.relu %0 {name = "relu_in"} : (tensor<4x32xf16>) -> tensor<4x32xf16>
    %2, %3 = ascend_graph.split_d %1 {split_dim = 0 : i64, num_split = 2 : i64, name = "split"} : (tensor<4x32xf16>) -> (tensor<2x32xf16>, tensor<2x32xf16>)
    %4 = ascend_graph.relu %2 {name = "relu_a"} : (tensor<2x32xf16>) -> tensor<2x32xf16>
    %5 = ascend_graph.relu %3 {name = "relu_b"} : (tensor<2x32xf16>) -> tensor<2x32xf16>
    ascend_graph.net_output %4, %5 {names = ["a", "b"]} : tensor<2x32xf16>, tensor<2x32xf16>
  }
}

// CHECK: builtin.module
// CHECK-NEXT: ascend_graph.graph @split {
// CHECK-NEXT: %[[V0:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<4x32xf16>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_.$-]+]] = ascend_graph.relu %[[V0]] {name = "relu_in"} : (tensor<4x32xf16>) -> tensor<4x32xf16>
// CHECK-NEXT: %[[V2:[A-Za-z0-9_.$-]+]], %[[V3:[A-Za-z0-9_.$-]+]] = ascend_graph.split_d %[[V1]] {_no_task = true, _nopadding_continuous_output = true, _output_reuse_input = true, _reuse_input_on_dim_index = 0 : i64, split_dim = 0 : i64, num_split = 2 : i64, name = "split"} : (tensor<4x32xf16>) -> (tensor<2x32xf16>, tensor<2x32xf16>)
// CHECK-NEXT: %[[V4:[A-Za-z0-9_.$-]+]] = ascend_graph.relu %[[V2]] {name = "relu_a"} : (tensor<2x32xf16>) -> tensor<2x32xf16>
// CHECK-NEXT: %[[V5:[A-Za-z0-9_.$-]+]] = ascend_graph.relu %[[V3]] {name = "relu_b"} : (tensor<2x32xf16>) -> tensor<2x32xf16>
// CHECK-NEXT: ascend_graph.net_output %[[V4]], %[[V5]] {names = ["a", "b"]} : tensor<2x32xf16>, tensor<2x32xf16>
// CHECK-NEXT: }
// CHECK-NEXT: }
