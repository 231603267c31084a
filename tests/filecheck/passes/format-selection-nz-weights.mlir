// On a part with a FIX pipe (Ascend910B1) a matmul takes its activations as they come
// (ND from the graph input, which MTE2 converts in flight; NZ from the first matmul),
// its constant weight in FRACTAL_NZ laid out in the weight store, and makes its result
// in FRACTAL_NZ where a user computes in NZ (the second matmul), else in ND (the
// graph's output): no TransData.
// RUN: ge-opt %s -p 'format-selection{soc_version="Ascend910B1"}' | filecheck %s

builtin.module {
  ascend_graph.graph @projection {
    %0 = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<4x32xf16>
    %1 = ascend_graph.const {value = dense<5.000000e-01> : tensor<32x16xf16>, name = "w"} : tensor<32x16xf16>
    %2 = ascend_graph.data {index = 1 : i64, name = "y"} : tensor<16x8xf16>
    %3 = ascend_graph.matmul_v2 %0, %1 {transpose_x1 = false, transpose_x2 = false, name = "MatMul_0"} : (tensor<4x32xf16>, tensor<32x16xf16>) -> tensor<4x16xf16>
    %4 = ascend_graph.matmul_v2 %3, %2 {transpose_x1 = false, transpose_x2 = false, name = "MatMul_1"} : (tensor<4x16xf16>, tensor<16x8xf16>) -> tensor<4x8xf16>
    ascend_graph.net_output %4 {names = ["out_0"]} : tensor<4x8xf16>
  }
}

// CHECK: %[[X:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<4x32xf16>
// CHECK-NEXT: %[[W:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = #ascend_graph.weight<"w.FRACTAL_NZ", "{{[0-9a-f]+}}">, name = "w"} : tensor<1x2x16x16xf16, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: 32, 16>>>
// CHECK-NEXT: %[[Y:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 1 : i64, name = "y"} : tensor<16x8xf16>
// CHECK-NEXT: %[[M0:[A-Za-z0-9_.$-]+]] = ascend_graph.matmul_v2 %[[X]], %[[W]] {{.*}} : (tensor<4x32xf16>, tensor<1x2x16x16xf16, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: 32, 16>>>) -> tensor<1x1x16x16xf16, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: 4, 16>>>
// CHECK-NEXT: %[[M1:[A-Za-z0-9_.$-]+]] = ascend_graph.matmul_v2 %[[M0]], %[[Y]] {{.*}} : (tensor<1x1x16x16xf16, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: 4, 16>>>, tensor<16x8xf16>) -> tensor<4x8xf16>
// CHECK-NEXT: ascend_graph.net_output %[[M1]]
// CHECK-NOT: trans_data
