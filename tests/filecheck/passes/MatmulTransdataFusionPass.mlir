// The matmul scope takes the TransData FRACTAL_NZ -> ND after it and writes ND itself.
// RUN: ge-opt %s -p 'format-selection{soc_version="Ascend310P3"},TbeMatmulElemwiseFusionPass,MatmulTransdataFusionPass' | filecheck %s

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
// CHECK-NEXT: %[[V1:[A-Za-z0-9_.$-]+]] = ascend_graph.trans_data %[[V0]] {src_format = "ND", dst_format = "FRACTAL_NZ", name = "input_0/TransData_FRACTAL_NZ"} : (tensor<2x4xf32>) -> tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: 2, 4>>>
// CHECK-NEXT: %[[V2:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = #ascend_graph.weight<"const_0.FRACTAL_NZ", "55289e739f315bfd">, name = "const_0"} : tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: 4, 3>>>
// CHECK-NEXT: %[[V3:[A-Za-z0-9_.$-]+]] = ascend_graph.matmul_v2 %[[V1]], %[[V2]] {_fusion_scope = 0 : i64, transpose_x1 = false, transpose_x2 = false, name = "MatMulV2_0"} : (tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: 2, 4>>>, tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: 4, 3>>>) -> tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: 2, 3>>>
// CHECK-NEXT: %[[V4:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>, name = "const_1"} : tensor<3xf32>
// CHECK-NEXT: %[[V5:[A-Za-z0-9_.$-]+]] = ascend_graph.add %[[V3]], %[[V4]] {_fusion_scope = 0 : i64, name = "Add_0"} : (tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: 2, 3>>>, tensor<3xf32>) -> tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: 2, 3>>>
// CHECK-NEXT: %[[V6:[A-Za-z0-9_.$-]+]] = ascend_graph.trans_data %[[V5]] {_fusion_scope = 0 : i64, src_format = "FRACTAL_NZ", dst_format = "ND", name = "Add_0/TransData_ND"} : (tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: 2, 3>>>) -> tensor<2x3xf32>
// CHECK-NEXT: ascend_graph.net_output %[[V6]] {names = ["out_0"]} : tensor<2x3xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
