// The ops a model with symbolic dims imports to where the graph computes sizes from its dynamic
// dims: DynamicReshape, BroadcastTo and StridedSliceV2 keep the dims the importer proved (`dims`,
// -1 for a dim known at run time only) in their result types; Range reads its bounds at run time.
// The custom and generic forms parse back.
// RUN: ge-opt %s | filecheck %s
// RUN: ge-opt %s | ge-opt | filecheck %s
// RUN: ge-opt %s --print-op-generic | ge-opt | filecheck %s

builtin.module {
  ascend_graph.graph @encoder {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<?x?x768xf32>
    %mask = ascend_graph.data {index = 1 : i64, name = "mask"} : tensor<?x1x1x?xf32>
    %dims = ascend_graph.shape %x {name = "dims"} : (tensor<?x?x768xf32>) -> tensor<3xi64>
    %lead = ascend_graph.strided_slice_d %dims {begin = array<i64: 0>, end = array<i64: 2>, strides = array<i64: 1>, name = "lead"} : (tensor<3xi64>) -> tensor<2xi64>
    %rest = ascend_graph.const {value = dense<[12, 64]> : tensor<2xi64>, name = "rest"} : tensor<2xi64>
    %target = ascend_graph.concat_d %lead, %rest {concat_dim = 0 : i64, name = "target"} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
    %y = ascend_graph.reshape_dynamic %x, %target {allowzero = false, dims = array<i64: -1, -1, 12, 64>, name = "split_heads"} : (tensor<?x?x768xf32>, tensor<4xi64>) -> tensor<?x?x12x64xf32>
    %seq = ascend_graph.strided_slice_d %dims {begin = array<i64: 1>, end = array<i64: 2>, strides = array<i64: 1>, name = "seq"} : (tensor<3xi64>) -> tensor<1xi64>
    %zero = ascend_graph.const {value = dense<0> : tensor<1xi64>, name = "zero"} : tensor<1xi64>
    %one = ascend_graph.const {value = dense<1> : tensor<1xi64>, name = "one"} : tensor<1xi64>
    %table = ascend_graph.const {value = dense<7> : tensor<1x512xi64>, name = "table"} : tensor<1x512xi64>
    %positions = ascend_graph.strided_slice_v2 %table, %zero, %seq, %one, %one {dims = array<i64: 1, -1>, name = "positions"} : (tensor<1x512xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x?xi64>
    %sizes = ascend_graph.concat_d %lead, %one, %seq {concat_dim = 0 : i64, name = "sizes"} : (tensor<2xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
    %grown = ascend_graph.broadcast_to %mask, %sizes {dims = array<i64: -1, -1, 1, -1>, name = "grown"} : (tensor<?x1x1x?xf32>, tensor<4xi64>) -> tensor<?x?x1x?xf32>
    %start = ascend_graph.const {value = dense<0> : tensor<i64>, name = "start"} : tensor<i64>
    %step = ascend_graph.const {value = dense<1> : tensor<i64>, name = "step"} : tensor<i64>
    %limit = ascend_graph.squeeze %seq {axis = array<i64: 0>, name = "limit"} : (tensor<1xi64>) -> tensor<i64>
    %ids = ascend_graph.range %start, %limit, %step {name = "ids"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
    ascend_graph.net_output %y, %positions, %grown, %ids {names = ["y", "positions", "grown", "ids"]} : tensor<?x?x12x64xf32>, tensor<1x?xi64>, tensor<?x?x1x?xf32>, tensor<?xi64>
  }
}

// CHECK:      %y = ascend_graph.reshape_dynamic %x, %target {allowzero = false, dims = array<i64: -1, -1, 12, 64>, name = "split_heads"} : (tensor<?x?x768xf32>, tensor<4xi64>) -> tensor<?x?x12x64xf32>
// CHECK:      %positions = ascend_graph.strided_slice_v2 %table, %zero, %seq, %one, %one {dims = array<i64: 1, -1>, name = "positions"} : (tensor<1x512xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x?xi64>
// CHECK:      %grown = ascend_graph.broadcast_to %mask, %sizes {dims = array<i64: -1, -1, 1, -1>, name = "grown"} : (tensor<?x1x1x?xf32>, tensor<4xi64>) -> tensor<?x?x1x?xf32>
// CHECK:      %ids = ascend_graph.range %start, %limit, %step {name = "ids"} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
// CHECK-NEXT: ascend_graph.net_output %y, %positions, %grown, %ids
