// ascend_graph round trip of the indexing and signal ops (GatherNd, ScatterNdUpdate, ScatterElements,
// TensorScatter, ReverseSequence, DFT, STFT): the custom and the generic form parse back to the same IR.
// RUN: ge-opt %s | filecheck %s
// RUN: ge-opt %s | ge-opt | filecheck %s
// RUN: ge-opt %s --print-op-generic | ge-opt | filecheck %s

builtin.module {
  ascend_graph.graph @indexing {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x3xf32>
    %su = ascend_graph.data {index = 1 : i64, name = "su"} : tensor<1x3xf32>
    %eu = ascend_graph.data {index = 2 : i64, name = "eu"} : tensor<2x3xf32>
    %cache = ascend_graph.data {index = 3 : i64, name = "cache"} : tensor<2x4x2xf32>
    %upd = ascend_graph.data {index = 4 : i64, name = "upd"} : tensor<2x1x2xf32>
    %sig = ascend_graph.data {index = 5 : i64, name = "sig"} : tensor<1x8x1xf32>
    %sig1 = ascend_graph.data {index = 6 : i64, name = "sig1"} : tensor<1x8x1xf32>
    %gi = ascend_graph.const {value = dense<[[1], [0]]> : tensor<2x1xi64>, name = "gi"} : tensor<2x1xi64>
    %g = ascend_graph.gather_nd %x, %gi {batch_dims = 1 : i64, name = "gather"} : (tensor<2x3xf32>, tensor<2x1xi64>) -> tensor<2xf32>
    %si = ascend_graph.const {value = dense<1> : tensor<1x1xi64>, name = "si"} : tensor<1x1xi64>
    %s = ascend_graph.scatter_nd_update %x, %si, %su {reduction = "add", name = "scatter_nd"} : (tensor<2x3xf32>, tensor<1x1xi64>, tensor<1x3xf32>) -> tensor<2x3xf32>
    %ei = ascend_graph.const {value = dense<0> : tensor<2x3xi64>, name = "ei"} : tensor<2x3xi64>
    %e = ascend_graph.scatter_elements %x, %ei, %eu {axis = 1 : i64, reduction = "max", name = "scatter_elements"} : (tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %wi = ascend_graph.const {value = dense<[0, 3]> : tensor<2xi64>, name = "wi"} : tensor<2xi64>
    %t = ascend_graph.tensor_scatter %cache, %upd, %wi {axis = -2 : i64, mode = "circular", name = "kv"} : (tensor<2x4x2xf32>, tensor<2x1x2xf32>, tensor<2xi64>) -> tensor<2x4x2xf32>
    %lens = ascend_graph.const {value = dense<[1, 2]> : tensor<2xi64>, name = "lens"} : tensor<2xi64>
    %r = ascend_graph.reverse_sequence %x, %lens {batch_dim = 0 : i64, seq_dim = 1 : i64, name = "reverse"} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
    %d = ascend_graph.dft %sig {axis = 1 : i64, length = 8 : i64, inverse = false, onesided = true, name = "dft"} : (tensor<1x8x1xf32>) -> tensor<1x5x2xf32>
    %w = ascend_graph.const {value = dense<[0.000000e+00, 5.000000e-01, 1.000000e+00, 5.000000e-01]> : tensor<4xf32>, name = "hann"} : tensor<4xf32>
    %f = ascend_graph.stft %sig1, %w {frame_step = 2 : i64, frame_length = 4 : i64, onesided = true, name = "stft"} : (tensor<1x8x1xf32>, tensor<4xf32>) -> tensor<1x3x3x2xf32>
    ascend_graph.net_output %g, %s, %e, %t, %r, %d, %f {names = ["g", "s", "e", "t", "r", "d", "f"]} : tensor<2xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x4x2xf32>, tensor<2x3xf32>, tensor<1x5x2xf32>, tensor<1x3x3x2xf32>
  }
}

// CHECK: %g = ascend_graph.gather_nd %x, %gi {batch_dims = 1 : i64, name = "gather"} : (tensor<2x3xf32>, tensor<2x1xi64>) -> tensor<2xf32>
// CHECK: %s = ascend_graph.scatter_nd_update %x, %si, %su {reduction = "add", name = "scatter_nd"} : (tensor<2x3xf32>, tensor<1x1xi64>, tensor<1x3xf32>) -> tensor<2x3xf32>
// CHECK: %e = ascend_graph.scatter_elements %x, %ei, %eu {axis = 1 : i64, reduction = "max", name = "scatter_elements"} : (tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: %t = ascend_graph.tensor_scatter %cache, %upd, %wi {axis = -2 : i64, mode = "circular", name = "kv"} : (tensor<2x4x2xf32>, tensor<2x1x2xf32>, tensor<2xi64>) -> tensor<2x4x2xf32>
// CHECK: %r = ascend_graph.reverse_sequence %x, %lens {batch_dim = 0 : i64, seq_dim = 1 : i64, name = "reverse"} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
// CHECK: %d = ascend_graph.dft %sig {axis = 1 : i64, length = 8 : i64, inverse = false, onesided = true, name = "dft"} : (tensor<1x8x1xf32>) -> tensor<1x5x2xf32>
// CHECK: %f = ascend_graph.stft %sig1, %w {frame_step = 2 : i64, frame_length = 4 : i64, onesided = true, name = "stft"} : (tensor<1x8x1xf32>, tensor<4xf32>) -> tensor<1x3x3x2xf32>
