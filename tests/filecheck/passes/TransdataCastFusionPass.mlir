// A Cast and the TransData it alone feeds, and a TransData and the Cast it alone feeds, each
// become one kernel scope; a Cast whose value is also a graph output stays its own kernel.
// RUN: ge-opt %s -p 'TransdataCastFusionPass{soc_version="Ascend310P3"}' | filecheck %s

builtin.module {
  ascend_graph.graph @cast_trans_data {
    %0 = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<1x3x4x4xf32>
    %1 = ascend_graph.cast %0 {dst_type = f16, name = "Cast_0"} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf16>
    %2 = ascend_graph.trans_data %1 {src_format = "NCHW", dst_format = "NC1HWC0", name = "TransData_0"} : (tensor<1x3x4x4xf16>) -> tensor<1x1x4x4x16xf16, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 3, 4, 4>>>
    %3 = ascend_graph.trans_data %2 {src_format = "NC1HWC0", dst_format = "NCHW", name = "TransData_1"} : (tensor<1x1x4x4x16xf16, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 3, 4, 4>>>) -> tensor<1x3x4x4xf16>
    %4 = ascend_graph.cast %3 {dst_type = f32, name = "Cast_1"} : (tensor<1x3x4x4xf16>) -> tensor<1x3x4x4xf32>
    ascend_graph.net_output %4 {names = ["out_0"]} : tensor<1x3x4x4xf32>
  }
  ascend_graph.graph @cast_used_twice {
    %0 = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<1x3x4x4xf32>
    %1 = ascend_graph.cast %0 {dst_type = f16, name = "Cast_0"} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf16>
    %2 = ascend_graph.trans_data %1 {src_format = "NCHW", dst_format = "NC1HWC0", name = "TransData_0"} : (tensor<1x3x4x4xf16>) -> tensor<1x1x4x4x16xf16, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 3, 4, 4>>>
    ascend_graph.net_output %1, %2 {names = ["out_0", "out_1"]} : tensor<1x3x4x4xf16>, tensor<1x1x4x4x16xf16, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 3, 4, 4>>>
  }
}

// CHECK: ascend_graph.graph @cast_trans_data {
// CHECK-NEXT: %[[V0:[A-Za-z0-9_.$-]+]] = ascend_graph.data
// CHECK-NEXT: %[[V1:[A-Za-z0-9_.$-]+]] = ascend_graph.cast %[[V0]] {_fusion_scope = [[S0:[0-9]+]] : i64, dst_type = f16, name = "Cast_0"}
// CHECK-NEXT: %[[V2:[A-Za-z0-9_.$-]+]] = ascend_graph.trans_data %[[V1]] {_fusion_scope = [[S0]] : i64, src_format = "NCHW", dst_format = "NC1HWC0", name = "TransData_0"}
// CHECK-NEXT: %[[V3:[A-Za-z0-9_.$-]+]] = ascend_graph.trans_data %[[V2]] {_fusion_scope = [[S1:[0-9]+]] : i64, src_format = "NC1HWC0", dst_format = "NCHW", name = "TransData_1"}
// CHECK-NEXT: %[[V4:[A-Za-z0-9_.$-]+]] = ascend_graph.cast %[[V3]] {_fusion_scope = [[S1]] : i64, dst_type = f32, name = "Cast_1"}
// CHECK-NEXT: ascend_graph.net_output %[[V4]]
// CHECK: ascend_graph.graph @cast_used_twice {
// CHECK-NEXT: ascend_graph.data
// CHECK-NEXT: ascend_graph.cast %{{.*}} {dst_type = f16, name = "Cast_0"}
// CHECK-NEXT: ascend_graph.trans_data %{{.*}} {src_format = "NCHW", dst_format = "NC1HWC0", name = "TransData_0"}
