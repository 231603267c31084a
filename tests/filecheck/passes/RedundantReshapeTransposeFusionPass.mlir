// A Reshape of a Reshape is one Reshape.
// RUN: ge-opt %s -p 'RedundantReshapeTransposeFusionPass' | filecheck %s

builtin.module {
  ascend_graph.graph @reshape_chain {
    %0 = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<2x3xf32>
    %1 = ascend_graph.reshape %0 {shape = array<i64: 6>, name = "Reshape_0"} : (tensor<2x3xf32>) -> tensor<6xf32>
    %2 = ascend_graph.reshape %1 {shape = array<i64: 3, 2>, name = "Reshape_1"} : (tensor<6xf32>) -> tensor<3x2xf32>
    ascend_graph.net_output %2 {names = ["out_0"]} : tensor<3x2xf32>
  }
}

// CHECK: builtin.module
// CHECK-NEXT: ascend_graph.graph @reshape_chain {
// CHECK-NEXT: %[[V0:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<2x3xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_.$-]+]] = ascend_graph.reshape %[[V0]] {shape = array<i64: 3, 2>, name = "Reshape_1"} : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: ascend_graph.net_output %[[V1]] {names = ["out_0"]} : tensor<3x2xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
