// What the ascend_graph verifier refuses: each message names the op, its node name and the rule.
// RUN: ge-opt %s --split-input-file --verify-diagnostics | filecheck %s

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x3xf32>
    %y = ascend_graph.relu %x {name = "r"} : (tensor<2x3xf32>) -> tensor<2x4xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<2x4xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x3xf32>
    %y = ascend_graph.transpose_d %x {perm = array<i64: 0, 0>, name = "t"} : (tensor<2x3xf32>) -> tensor<2x2xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<2x2xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x3xf32>
    %h = ascend_graph.data {index = 1 : i64, name = "h"} : tensor<2x3xf16>
    %y = ascend_graph.add %x, %h {name = "sum"} : (tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<2x3xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<2x3xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x3xf32>
    %y = ascend_graph.add %x, %x {name = "sum"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<3x3xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %c = ascend_graph.const {value = dense<1.000000e+00> : tensor<3xf32>, name = "c"} : tensor<4xf32>
    ascend_graph.net_output %c {names = ["y"]} : tensor<4xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x3xf32>
    %y = ascend_graph.reshape %x {shape = array<i64: 4, -1>, name = "reshape"} : (tensor<2x3xf32>) -> tensor<4x2xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<4x2xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<1x16x4x4xf16>
    %y = ascend_graph.trans_data %x {src_format = "NCHW", dst_format = "NC1HWC0", name = "t"} : (tensor<1x16x4x4xf16>) -> tensor<1x1x4x4x16xf16, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 32, 4, 4>>>
    ascend_graph.net_output %y {names = ["y"]} : tensor<1x1x4x4x16xf16, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 32, 4, 4>>>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x3xf32>
    %y = ascend_graph.softmax_v2 %x {axes = array<i64: 2>, name = "softmax"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<2x3xf32>
  }
}

// CHECK: in the input: Relu 'r': result 0 has shape [2, 4], but the inputs give [2, 3]
// CHECK: // {{-----}}
// CHECK: in the input: TransposeD 't': perm [0, 0] is not a permutation of 0..1
// CHECK: // {{-----}}
// CHECK: in the input: Add 'sum': the two operands have different element types ['f16', 'f32']
// CHECK: // {{-----}}
// CHECK: in the input: Add 'sum': result 0 has shape [3, 3], but the inputs give [2, 3]
// CHECK: // {{-----}}
// CHECK: in the input: Const 'c': inline value type tensor<3xf32> is not tensor<4xf32>
// CHECK: // {{-----}}
// CHECK: in the input: Reshape 'reshape': cannot reshape [2, 3] to [4, -1]
// CHECK: // {{-----}}
// CHECK: in the input: TransData 't': result 0 has shape [1, 32, 4, 4], but the inputs give [1, 16, 4, 4]
// CHECK: // {{-----}}
// CHECK: in the input: SoftmaxV2 'softmax': axes 2 is out of range for rank 2

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<?x?x768xf32>
    %t = ascend_graph.data {index = 1 : i64, name = "t"} : tensor<4xi64>
    %y = ascend_graph.reshape_dynamic %x, %t {allowzero = false, dims = array<i64: -1, 12, 64>, name = "heads"} : (tensor<?x?x768xf32>, tensor<4xi64>) -> tensor<?x12x64xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<?x12x64xf32>
  }
}

// CHECK: // {{-----}}
// CHECK: in the input: DynamicReshape 'heads': dims [-1, 12, 64] need 4 entries, each a size or -1

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<?x3xf32>
    %t = ascend_graph.data {index = 1 : i64, name = "t"} : tensor<2xi64>
    %y = ascend_graph.broadcast_to %x, %t {dims = array<i64: -1, 4>, name = "grow"} : (tensor<?x3xf32>, tensor<2xi64>) -> tensor<?x4xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<?x4xf32>
  }
}

// CHECK: // {{-----}}
// CHECK: in the input: BroadcastTo 'grow': dims [-1, 4] contradict the inferred [?, 3]

// -----

builtin.module {
  ascend_graph.graph @g {
    %a = ascend_graph.data {index = 0 : i64, name = "a"} : tensor<i64>
    %b = ascend_graph.data {index = 1 : i64, name = "b"} : tensor<1xi64>
    %y = ascend_graph.range %a, %b, %a {name = "ids"} : (tensor<i64>, tensor<1xi64>, tensor<i64>) -> tensor<?xi64>
    ascend_graph.net_output %y {names = ["y"]} : tensor<?xi64>
  }
}

// CHECK: // {{-----}}
// CHECK: in the input: Range 'ids': start, limit and delta must be scalars, not [], [1], []
