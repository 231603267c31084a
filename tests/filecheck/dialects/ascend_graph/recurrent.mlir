// The recurrent ops (DynamicRNN, DynamicGRUV2, RNN) round trip: the custom and the generic form parse
// back to the same IR, the optional operands after their keywords.
// RUN: ge-opt %s | filecheck %s
// RUN: ge-opt %s | ge-opt | filecheck %s
// RUN: ge-opt %s --print-op-generic | ge-opt | filecheck %s

builtin.module {
  ascend_graph.graph @recurrent {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<5x3x8xf32>
    %lengths = ascend_graph.data {index = 1 : i64, name = "lengths"} : tensor<3xi32>
    %h0 = ascend_graph.data {index = 2 : i64, name = "h0"} : tensor<1x3x4xf32>
    %w = ascend_graph.data {index = 3 : i64, name = "w"} : tensor<12x16xf32>
    %b = ascend_graph.data {index = 4 : i64, name = "b"} : tensor<16xf32>
    %p = ascend_graph.data {index = 5 : i64, name = "p"} : tensor<4xf32>
    %y, %h, %c = ascend_graph.dynamic_rnn %x, %w b %b seq_length %lengths init_h %h0 init_c %h0 wci %p wcf %p wco %p {direction = "UNIDIRECTIONAL", activations = ["Sigmoid", "Tanh", "Tanh"], activation_alpha = array<f32: 0.0, 0.0, 0.0>, activation_beta = array<f32: 0.0, 0.0, 0.0>, cell_clip = 3.0 : f32, input_forget = false, name = "lstm"} : (tensor<5x3x8xf32>, tensor<12x16xf32> b tensor<16xf32> seq_length tensor<3xi32> init_h tensor<1x3x4xf32> init_c tensor<1x3x4xf32> wci tensor<4xf32> wcf tensor<4xf32> wco tensor<4xf32>) -> (tensor<5x3x4xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32>)
    %wi = ascend_graph.data {index = 6 : i64, name = "wi"} : tensor<8x12xf32>
    %wh = ascend_graph.data {index = 7 : i64, name = "wh"} : tensor<4x12xf32>
    %bh = ascend_graph.data {index = 8 : i64, name = "bh"} : tensor<12xf32>
    %gy, %gh = ascend_graph.dynamic_gru_v2 %x, %wi, %wh bias_hidden %bh init_h %h0 {direction = "REDIRECTIONAL", activations = ["HardSigmoid", "Tanh"], activation_alpha = array<f32: 0.2, 0.0>, activation_beta = array<f32: 0.5, 0.0>, reset_after = true, name = "gru"} : (tensor<5x3x8xf32>, tensor<8x12xf32>, tensor<4x12xf32> bias_hidden tensor<12xf32> init_h tensor<1x3x4xf32>) -> (tensor<5x3x4xf32>, tensor<1x3x4xf32>)
    %wr = ascend_graph.data {index = 9 : i64, name = "wr"} : tensor<12x4xf32>
    %ry, %rh = ascend_graph.rnn %x, %wr {direction = "UNIDIRECTIONAL", activations = ["Tanh"], activation_alpha = array<f32: 0.0>, activation_beta = array<f32: 0.0>, name = "rnn"} : (tensor<5x3x8xf32>, tensor<12x4xf32>) -> (tensor<5x3x4xf32>, tensor<1x3x4xf32>)
    ascend_graph.net_output %y, %h, %c, %gy, %gh, %ry, %rh {names = ["y", "h", "c", "gy", "gh", "ry", "rh"]} : tensor<5x3x4xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32>, tensor<5x3x4xf32>, tensor<1x3x4xf32>, tensor<5x3x4xf32>, tensor<1x3x4xf32>
  }
}

// CHECK:      %y, %h, %c = ascend_graph.dynamic_rnn %x, %w b %b seq_length %lengths init_h %h0 init_c %h0 wci %p wcf %p wco %p {direction = "UNIDIRECTIONAL", activations = ["Sigmoid", "Tanh", "Tanh"]
// CHECK-SAME: cell_clip = 3.000000e+00 : f32, input_forget = false, name = "lstm"}
// CHECK-SAME: -> (tensor<5x3x4xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32>)
// CHECK:      %gy, %gh = ascend_graph.dynamic_gru_v2 %x, %wi, %wh bias_hidden %bh init_h %h0 {direction = "REDIRECTIONAL", activations = ["HardSigmoid", "Tanh"]
// CHECK-SAME: activation_alpha = array<f32: 2.000000e-01, 0.000000e+00>, activation_beta = array<f32: 5.000000e-01, 0.000000e+00>, reset_after = true
// CHECK:      %ry, %rh = ascend_graph.rnn %x, %wr {direction = "UNIDIRECTIONAL", activations = ["Tanh"]
// CHECK-SAME: : (tensor<5x3x8xf32>, tensor<12x4xf32>) -> (tensor<5x3x4xf32>, tensor<1x3x4xf32>)
