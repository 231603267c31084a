// ReduceMax, Sub, Exp, ReduceSum, Div as exported: one SoftmaxV2.
// RUN: ge-opt %s -p 'SoftmaxFusionPass' | filecheck %s

builtin.module {
  ascend_graph.graph @softmax {
    %0 = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<2x8xf32>
    %1 = ascend_graph.reduce_max_d %0 {axes = array<i64: -1>, keep_dims = true, name = "ReduceMaxD_0"} : (tensor<2x8xf32>) -> tensor<2x1xf32>
    %2 = ascend_graph.sub %0, %1 {name = "Sub_0"} : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    %3 = ascend_graph.exp %2 {name = "Exp_0"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %4 = ascend_graph.reduce_sum_d %3 {axes = array<i64: -1>, keep_dims = true, name = "ReduceSumD_0"} : (tensor<2x8xf32>) -> tensor<2x1xf32>
    %5 = ascend_graph.div %3, %4 {name = "Div_0"} : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    ascend_graph.net_output %5 {names = ["out_0"]} : tensor<2x8xf32>
  }
}

// CHECK: builtin.module
// CHECK-NEXT: ascend_graph.graph @softmax {
// CHECK-NEXT: %[[V0:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<2x8xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_.$-]+]] = ascend_graph.softmax_v2 %[[V0]] {axes = array<i64: 1>, name = "Div_0"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: ascend_graph.net_output %[[V1]] {names = ["out_0"]} : tensor<2x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
