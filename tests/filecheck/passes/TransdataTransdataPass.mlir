// A TransData and its inverse cancel.
// RUN: ge-opt %s -p 'TransdataTransdataPass' | filecheck %s

builtin.module {
  ascend_graph.graph @transdata_pair {
    %0 = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<1x16x4x4xf16>
    %1 = ascend_graph.trans_data %0 {src_format = "NCHW", dst_format = "NC1HWC0", name = "to_5hd"} : (tensor<1x16x4x4xf16>) -> tensor<1x1x4x4x16xf16, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 16, 4, 4>>>
    %2 = ascend_graph.trans_data %1 {src_format = "NC1HWC0", dst_format = "NCHW", name = "to_nchw"} : (tensor<1x1x4x4x16xf16, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 16, 4, 4>>>) -> tensor<1x16x4x4xf16>
    %3 = ascend_graph.relu %2 {name = "relu"} : (tensor<1x16x4x4xf16>) -> tensor<1x16x4x4xf16>
    ascend_graph.net_output %3 {names = ["y"]} : tensor<1x16x4x4xf16>
  }
}

// CHECK: builtin.module
// CHECK-NEXT: ascend_graph.graph @transdata_pair {
// CHECK-NEXT: %[[V0:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<1x16x4x4xf16>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_.$-]+]] = ascend_graph.relu %[[V0]] {name = "relu"} : (tensor<1x16x4x4xf16>) -> tensor<1x16x4x4xf16>
// CHECK-NEXT: ascend_graph.net_output %[[V1]] {names = ["y"]} : tensor<1x16x4x4xf16>
// CHECK-NEXT: }
// CHECK-NEXT: }
