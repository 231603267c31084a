// The attention, rotary embedding and top-k ops round-trip: custom and generic form parse back to the same IR.
// RUN: ge-opt %s | filecheck %s
// RUN: ge-opt %s | ge-opt | filecheck %s
// RUN: ge-opt %s --print-op-generic | ge-opt | filecheck %s

builtin.module {
  ascend_graph.graph @attention {
    %q = ascend_graph.data {index = 0 : i64, name = "q"} : tensor<1x4x2x8xf32>
    %k = ascend_graph.data {index = 1 : i64, name = "k"} : tensor<1x2x3x8xf32>
    %v = ascend_graph.data {index = 2 : i64, name = "v"} : tensor<1x2x3x6xf32>
    %m = ascend_graph.data {index = 3 : i64, name = "m"} : tensor<2x3xi1>
    %l = ascend_graph.data {index = 4 : i64, name = "l"} : tensor<1xi64>
    %f = ascend_graph.data {index = 5 : i64, name = "f"} : tensor<1x1x2x2xf32>
    %x = ascend_graph.data {index = 6 : i64, name = "x"} : tensor<1x3x16xf32>
    %c = ascend_graph.data {index = 7 : i64, name = "c"} : tensor<1x3x2xf32>
    %s = ascend_graph.data {index = 8 : i64, name = "s"} : tensor<1x3x2xf32>
    %y, %qk = ascend_graph.fused_infer_attention_score %q, %k, %v mask %m kv_lengths %l {num_heads = 4 : i64, num_key_value_heads = 2 : i64, scale = 0.353553385 : f32, softcap = 2.000000e+00 : f32, next_tokens = 1 : i64, qk_output_mode = 2 : i64, name = "attn"} : (tensor<1x4x2x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x6xf32> mask tensor<2x3xi1> kv_lengths tensor<1xi64>) -> tensor<1x4x2x6xf32>, tensor<1x4x2x3xf32>
    %y2 = ascend_graph.fused_infer_attention_score %q, %k, %v mask %f {num_heads = 4 : i64, num_key_value_heads = 2 : i64, scale = 1.000000e+00 : f32, name = "attn2"} : (tensor<1x4x2x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x6xf32> mask tensor<1x1x2x2xf32>) -> tensor<1x4x2x6xf32>
    %y3 = ascend_graph.fused_infer_attention_score %q, %k, %v {num_heads = 4 : i64, num_key_value_heads = 2 : i64, scale = 1.000000e+00 : f32, name = "attn3"} : (tensor<1x4x2x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x6xf32>) -> tensor<1x4x2x6xf32>
    %r = ascend_graph.rotary_position_embedding %x, %c, %s {layout = "BSH", num_heads = 2 : i64, rotary_dim = 4 : i64, interleaved = true, name = "rope"} : (tensor<1x3x16xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>) -> tensor<1x3x16xf32>
    %values, %indices = ascend_graph.top_k_v2 %x {k = 2 : i64, dim = -1 : i64, largest = false, sorted = true, name = "topk"} : (tensor<1x3x16xf32>) -> (tensor<1x3x2xf32>, tensor<1x3x2xi64>)
    ascend_graph.net_output %y, %qk, %y2, %y3, %r, %values, %indices {names = ["y", "qk", "y2", "y3", "r", "values", "indices"]} : tensor<1x4x2x6xf32>, tensor<1x4x2x3xf32>, tensor<1x4x2x6xf32>, tensor<1x4x2x6xf32>, tensor<1x3x16xf32>, tensor<1x3x2xf32>, tensor<1x3x2xi64>
  }
}

// CHECK:      %y, %qk = ascend_graph.fused_infer_attention_score %q, %k, %v mask %m kv_lengths %l {num_heads = 4 : i64, num_key_value_heads = 2 : i64, scale = 0.353553385 : f32, softcap = 2.000000e+00 : f32, next_tokens = 1 : i64, qk_output_mode = 2 : i64, name = "attn"} : (tensor<1x4x2x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x6xf32> mask tensor<2x3xi1> kv_lengths tensor<1xi64>) -> tensor<1x4x2x6xf32>, tensor<1x4x2x3xf32>
// CHECK-NEXT: %y2 = ascend_graph.fused_infer_attention_score %q, %k, %v mask %f {num_heads = 4 : i64, num_key_value_heads = 2 : i64, scale = 1.000000e+00 : f32, name = "attn2"} : (tensor<1x4x2x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x6xf32> mask tensor<1x1x2x2xf32>) -> tensor<1x4x2x6xf32>
// CHECK-NEXT: %y3 = ascend_graph.fused_infer_attention_score %q, %k, %v {num_heads = 4 : i64, num_key_value_heads = 2 : i64, scale = 1.000000e+00 : f32, name = "attn3"} : (tensor<1x4x2x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x6xf32>) -> tensor<1x4x2x6xf32>
// CHECK-NEXT: %r = ascend_graph.rotary_position_embedding %x, %c, %s {layout = "BSH", num_heads = 2 : i64, rotary_dim = 4 : i64, interleaved = true, name = "rope"} : (tensor<1x3x16xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>) -> tensor<1x3x16xf32>
// CHECK-NEXT: %values, %indices = ascend_graph.top_k_v2 %x {k = 2 : i64, dim = -1 : i64, largest = false, sorted = true, name = "topk"} : (tensor<1x3x16xf32>) -> (tensor<1x3x2xf32>, tensor<1x3x2xi64>)
