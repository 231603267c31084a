// A DynamicReshape whose target the graph computes from symbolic dims keeps the dims the importer
// proved (`dims`, -1 for a dim known at run time only) in its result type; the forms parse back.
// RUN: ge-opt %s | filecheck %s
// RUN: ge-opt %s | ge-opt | filecheck %s
// RUN: ge-opt %s --print-op-generic | ge-opt | filecheck %s

builtin.module {
  ascend_graph.graph @heads {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<?x?x768xf32>
    %dims = ascend_graph.shape %x {name = "dims"} : (tensor<?x?x768xf32>) -> tensor<3xi64>
    %lead = ascend_graph.strided_slice_d %dims {begin = array<i64: 0>, end = array<i64: 2>, strides = array<i64: 1>, name = "lead"} : (tensor<3xi64>) -> tensor<2xi64>
    %rest = ascend_graph.const {value = dense<[12, 64]> : tensor<2xi64>, name = "rest"} : tensor<2xi64>
    %target = ascend_graph.concat_d %lead, %rest {concat_dim = 0 : i64, name = "target"} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
    %y = ascend_graph.reshape_dynamic %x, %target {allowzero = false, dims = array<i64: -1, -1, 12, 64>, name = "split_heads"} : (tensor<?x?x768xf32>, tensor<4xi64>) -> tensor<?x?x12x64xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<?x?x12x64xf32>
  }
}

// CHECK:      %target = ascend_graph.concat_d %lead, %rest {concat_dim = 0 : i64, name = "target"} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
// CHECK-NEXT: %y = ascend_graph.reshape_dynamic %x, %target {allowzero = false, dims = array<i64: -1, -1, 12, 64>, name = "split_heads"} : (tensor<?x?x768xf32>, tensor<4xi64>) -> tensor<?x?x12x64xf32>
// CHECK-NEXT: ascend_graph.net_output %y {names = ["y"]} : tensor<?x?x12x64xf32>
