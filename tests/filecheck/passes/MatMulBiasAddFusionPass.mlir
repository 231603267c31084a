// MatMulV2 followed by a bias Add: the bias joins the matmul.
// RUN: ge-opt %s -p 'MatMulBiasAddFusionPass' | filecheck %s

builtin.module {
  ascend_graph.graph @matmul_bias_add {
    %0 = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<2x4xf32>
    %1 = ascend_graph.const {value = dense<[[0.000000e+00, 2.500000e-01, 5.000000e-01], [7.500000e-01, 1.000000e+00, 1.250000e+00], [1.500000e+00, 1.750000e+00, 2.000000e+00], [2.250000e+00, 2.500000e+00, 2.750000e+00]]> : tensor<4x3xf32>, name = "const_0"} : tensor<4x3xf32>
    %2 = ascend_graph.matmul_v2 %0, %1 {transpose_x1 = false, transpose_x2 = false, name = "MatMulV2_0"} : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %3 = ascend_graph.const {value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>, name = "const_1"} : tensor<3xf32>
    %4 = ascend_graph.add %2, %3 {name = "Add_0"} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    ascend_graph.net_output %4 {names = ["out_0"]} : tensor<2x3xf32>
  }
}

// CHECK: builtin.module
// CHECK-NEXT: ascend_graph.graph @matmul_bias_add {
// CHECK-NEXT: %[[V0:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<2x4xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = dense<{{\[\[}}0.000000e+00, 2.500000e-01, 5.000000e-01], [7.500000e-01, 1.000000e+00, 1.250000e+00], [1.500000e+00, 1.750000e+00, 2.000000e+00], [2.250000e+00, 2.500000e+00, 2.750000e+00]]> : tensor<4x3xf32>, name = "const_0"} : tensor<4x3xf32>
// CHECK-NEXT: %[[V2:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>, name = "const_1"} : tensor<3xf32>
// CHECK-NEXT: %[[V3:[A-Za-z0-9_.$-]+]] = ascend_graph.matmul_v2 %[[V0]], %[[V1]], %[[V2]] {transpose_x1 = false, transpose_x2 = false, name = "MatMulV2_0"} : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: ascend_graph.net_output %[[V3]] {names = ["out_0"]} : tensor<2x3xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
