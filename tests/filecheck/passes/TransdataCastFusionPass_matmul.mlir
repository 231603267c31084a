// A matmul's TransData FRACTAL_NZ -> ND and the Cast after it, paired by TransdataCastFusionPass,
// join the matmul's kernel scope through MatmulTransdataFusionPass (its epilogue casts, then stores ND).
// RUN: ge-opt %s -p 'format-selection{soc_version="Ascend310P3"},TransdataCastFusionPass{soc_version="Ascend310P3"},MatmulTransdataFusionPass{soc_version="Ascend310P3"}' 2>/dev/null | filecheck %s

builtin.module {
  ascend_graph.graph @matmul_cast {
    %0 = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<2x4xf16>
    %1 = ascend_graph.const {value = dense<[[0.000000e+00, 2.500000e-01, 5.000000e-01], [7.500000e-01, 1.000000e+00, 1.250000e+00], [1.500000e+00, 1.750000e+00, 2.000000e+00], [2.250000e+00, 2.500000e+00, 2.750000e+00]]> : tensor<4x3xf16>, name = "const_0"} : tensor<4x3xf16>
    %2 = ascend_graph.matmul_v2 %0, %1 {transpose_x1 = false, transpose_x2 = false, name = "MatMulV2_0"} : (tensor<2x4xf16>, tensor<4x3xf16>) -> tensor<2x3xf16>
    %3 = ascend_graph.cast %2 {dst_type = f32, name = "Cast_0"} : (tensor<2x3xf16>) -> tensor<2x3xf32>
    ascend_graph.net_output %3 {names = ["out_0"]} : tensor<2x3xf32>
  }
}

// CHECK: %[[MM:[A-Za-z0-9_.$-]+]] = ascend_graph.matmul_v2 %{{.*}} {_fusion_scope = [[S:[0-9]+]] : i64,
// CHECK-NEXT: %[[ND:[A-Za-z0-9_.$-]+]] = ascend_graph.trans_data %[[MM]] {_fusion_scope = [[S]] : i64, src_format = "FRACTAL_NZ", dst_format = "ND", name = "MatMulV2_0/TransData_ND"}
// CHECK-NEXT: %[[OUT:[A-Za-z0-9_.$-]+]] = ascend_graph.cast %[[ND]] {_fusion_scope = [[S]] : i64, dst_type = f32, name = "Cast_0"}
// CHECK-NEXT: ascend_graph.net_output %[[OUT]]
