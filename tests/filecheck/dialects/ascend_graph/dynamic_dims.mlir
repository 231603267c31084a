// Dynamic dims and the ops that keep them: Shape of a dynamic input, and a Reshape whose target the
// graph computes from it (DynamicReshape, the target an operand); a device format's dynamic origin dim
// prints as `?`, not as INT64_MIN. The custom and generic forms parse back.
// RUN: ge-opt %s | filecheck %s
// RUN: ge-opt %s | ge-opt | filecheck %s
// RUN: ge-opt %s --print-op-generic | ge-opt | filecheck %s

builtin.module {
  ascend_graph.graph @dynamic {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<?x?x16xf32>
    %dims = ascend_graph.shape %x {name = "dims"} : (tensor<?x?x16xf32>) -> tensor<3xi64>
    %rest = ascend_graph.const {value = dense<[4, 4]> : tensor<2xi64>, name = "rest"} : tensor<2xi64>
    %lead = ascend_graph.strided_slice_d %dims {begin = array<i64: 0>, end = array<i64: 2>, strides = array<i64: 1>, name = "lead"} : (tensor<3xi64>) -> tensor<2xi64>
    %target = ascend_graph.concat_d %lead, %rest {concat_dim = 0 : i64, name = "target"} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
    %y = ascend_graph.reshape_dynamic %x, %target {allowzero = false, name = "split_heads"} : (tensor<?x?x16xf32>, tensor<4xi64>) -> tensor<?x?x?x?xf32>
    %nz = ascend_graph.trans_data %x {src_format = "ND", dst_format = "FRACTAL_NZ", name = "nz"} : (tensor<?x?x16xf32>) -> tensor<?x2x?x16x8xf32, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: ?, ?, 16>>>
    ascend_graph.net_output %y, %nz {names = ["y", "nz"]} : tensor<?x?x?x?xf32>, tensor<?x2x?x16x8xf32, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: ?, ?, 16>>>
  }
}

// CHECK:      %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<?x?x16xf32>
// CHECK-NEXT: %dims = ascend_graph.shape %x {name = "dims"} : (tensor<?x?x16xf32>) -> tensor<3xi64>
// CHECK:      %target = ascend_graph.concat_d %lead, %rest {concat_dim = 0 : i64, name = "target"} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
// CHECK-NEXT: %y = ascend_graph.reshape_dynamic %x, %target {allowzero = false, name = "split_heads"} : (tensor<?x?x16xf32>, tensor<4xi64>) -> tensor<?x?x?x?xf32>
// CHECK-NEXT: %nz = ascend_graph.trans_data %x {src_format = "ND", dst_format = "FRACTAL_NZ", name = "nz"} : (tensor<?x?x16xf32>) -> tensor<?x2x?x16x8xf32, #ascend_graph.format<"FRACTAL_NZ", "ND", array<i64: ?, ?, 16>>>
// CHECK-NOT:  9223372036854775808
