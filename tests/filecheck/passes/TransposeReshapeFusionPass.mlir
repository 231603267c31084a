// Transpose then Reshape becomes one ConfusionTransposeD.
// RUN: ge-opt %s -p 'TransposeReshapeFusionPass' | filecheck %s

builtin.module {
  ascend_graph.graph @transpose_reshape {
    %0 = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<1x2x4x4xf32>
    %1 = ascend_graph.transpose_d %0 {perm = array<i64: 0, 2, 1, 3>, name = "TransposeD_0"} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
    %2 = ascend_graph.reshape %1 {shape = array<i64: 1, 4, 8>, name = "Reshape_0"} : (tensor<1x4x2x4xf32>) -> tensor<1x4x8xf32>
    ascend_graph.net_output %2 {names = ["out_0"]} : tensor<1x4x8xf32>
  }
}

// CHECK: builtin.module
// CHECK-NEXT: ascend_graph.graph @transpose_reshape {
// CHECK-NEXT: %[[V0:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_.$-]+]] = ascend_graph.confusion_transpose_d %[[V0]] {perm = array<i64: 0, 2, 1, 3>, shape = array<i64: 1, 4, 8>, transpose_first = true, name = "Reshape_0"} : (tensor<1x2x4x4xf32>) -> tensor<1x4x8xf32>
// CHECK-NEXT: ascend_graph.net_output %[[V1]] {names = ["out_0"]} : tensor<1x4x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
