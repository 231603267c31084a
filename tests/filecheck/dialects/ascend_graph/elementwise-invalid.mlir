// What the ascend_graph verifier refuses of the elementwise, bitwise, triangular, cumulative, one-hot and
// determinant ops: each message names the op, its node name and the rule.
// RUN: ge-opt %s --split-input-file --verify-diagnostics | filecheck %s

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2xf32>
    %y = ascend_graph.bitwise_and %x, %x {name = "and"} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<2xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2xi32>
    %y = ascend_graph.is_nan %x {name = "nan"} : (tensor<2xi32>) -> tensor<2xi1>
    ascend_graph.net_output %y {names = ["y"]} : tensor<2xi1>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2xf32>
    %y = ascend_graph.tril %x {diagonal = 0 : i64, name = "tril"} : (tensor<2xf32>) -> tensor<2xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<2xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x3xf32>
    %y = ascend_graph.hardmax %x {axes = array<i64: 0, 0>, name = "hardmax"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<2x3xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x3xf32>
    %y = ascend_graph.cumsum %x {axis = 2 : i64, exclusive = false, reverse = false, name = "cumsum"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<2x3xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2xf32>
    %y = ascend_graph.bitcast %x {dst_type = i64, name = "bitcast"} : (tensor<2xf32>) -> tensor<2xi64>
    ascend_graph.net_output %y {names = ["y"]} : tensor<2xi64>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x3xf32>
    %y = ascend_graph.matrix_determinant %x {name = "det"} : (tensor<2x3xf32>) -> tensor<2xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<2xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<3xf32>
    %v = ascend_graph.const {value = dense<[0.0, 1.0, 2.0]> : tensor<3xf32>, name = "values"} : tensor<3xf32>
    %y = ascend_graph.one_hot %x, %v {depth = 4 : i64, axis = -1 : i64, name = "one_hot"} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3x4xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<3x4xf32>
  }
}

// CHECK: in the input: BitwiseAnd 'and': needs integer operands, got f32, f32
// CHECK: // {{-----}}
// CHECK: in the input: IsNan 'nan': needs a floating-point input, got i32
// CHECK: // {{-----}}
// CHECK: in the input: Tril 'tril': needs a matrix (rank >= 2), got shape [2]
// CHECK: // {{-----}}
// CHECK: in the input: Hardmax 'hardmax': axes [0, 0] repeat an axis
// CHECK: // {{-----}}
// CHECK: in the input: Cumsum 'cumsum': axis 2 is out of range for rank 2
// CHECK: // {{-----}}
// CHECK: in the input: Bitcast 'bitcast': f32 has 32 bits and i64 64; a bitcast keeps the width
// CHECK: // {{-----}}
// CHECK: in the input: MatrixDeterminant 'det': needs square matrices in the last two dims, got shape [2, 3]
// CHECK: // {{-----}}
// CHECK: in the input: OneHot 'one_hot': indices must be integers, not f32
