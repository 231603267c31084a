// ViT's sequence-first attention: the MultiHeadAttention runs BSH on the hidden states
// themselves, the out-projection (Reshape, Gemm as MatMulV2, ConfusionTransposeD) is one
// BatchMatMulV2 of its [N, L, E] rows and both swaps go; a transpose that moves only a
// size-1 axis becomes a Reshape.
// RUN: ge-opt %s -p AttentionLayoutFusionPass | filecheck %s

builtin.module {
  ascend_graph.graph @vit_attention {
    %x = ascend_graph.data {index = 0 : i64, name = "hidden"} : tensor<2x5x8xf32>
    %swap = ascend_graph.transpose_d %x {perm = array<i64: 1, 0, 2>, name = "Transpose"} : (tensor<2x5x8xf32>) -> tensor<5x2x8xf32>
    %w = ascend_graph.const {value = dense<0.125> : tensor<8x8xf32>, name = "w"} : tensor<8x8xf32>
    %b = ascend_graph.const {value = dense<0.5> : tensor<8xf32>, name = "b"} : tensor<8xf32>
    %mha = ascend_graph.multi_head_attention %swap, %swap, %swap weights(%w, %w, %w) biases(%b, %b, %b) {head_num = 2 : i64, scale = 5.000000e-01 : f64, input_layout = "SBH", name = "Reshape_9"} : (tensor<5x2x8xf32>, tensor<5x2x8xf32>, tensor<5x2x8xf32> weights(tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) biases(tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)) -> tensor<5x2x8xf32>
    %rows = ascend_graph.reshape %mha {shape = array<i64: 10, 8>, name = "Reshape_10"} : (tensor<5x2x8xf32>) -> tensor<10x8xf32>
    %proj = ascend_graph.matmul_v2 %rows, %w, %b {transpose_x1 = false, transpose_x2 = true, name = "Gemm"} : (tensor<10x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<10x8xf32>
    %back = ascend_graph.confusion_transpose_d %proj {perm = array<i64: 1, 0, 2>, shape = array<i64: 5, 2, 8>, transpose_first = false, name = "Transpose_8"} : (tensor<10x8xf32>) -> tensor<2x5x8xf32>
    %sum = ascend_graph.add %back, %x {name = "Add"} : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
    %y = ascend_graph.data {index = 1 : i64, name = "single"} : tensor<1x5x8xf32>
    %moved = ascend_graph.transpose_d %y {perm = array<i64: 1, 0, 2>, name = "Transpose_1"} : (tensor<1x5x8xf32>) -> tensor<5x1x8xf32>
    ascend_graph.net_output %sum, %moved {names = ["out", "moved"]} : tensor<2x5x8xf32>, tensor<5x1x8xf32>
  }
}

// CHECK-LABEL: ascend_graph.graph @vit_attention
// CHECK-NEXT: %[[X:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 0 : i64, name = "hidden"} : tensor<2x5x8xf32>
// CHECK-NOT: ascend_graph.transpose_d
// CHECK: %[[MHA:[A-Za-z0-9_.$-]+]] = ascend_graph.multi_head_attention %[[X]], %[[X]], %[[X]] weights({{.*}}) biases({{.*}}) {head_num = 2 : i64, scale = 5.000000e-01 : f64, input_layout = "BSH", name = "Reshape_9"} : (tensor<2x5x8xf32>, {{.*}}) -> tensor<2x5x8xf32>
// CHECK-NEXT: %[[PROJ:[A-Za-z0-9_.$-]+]] = ascend_graph.batch_matmul %[[MHA]], {{.*}} {adj_x1 = false, adj_x2 = true, name = "Gemm"} : (tensor<2x5x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
// CHECK-NEXT: %[[SUM:[A-Za-z0-9_.$-]+]] = ascend_graph.add %[[PROJ]], %[[X]] {name = "Add"}
// CHECK-NEXT: %[[Y:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 1 : i64, name = "single"} : tensor<1x5x8xf32>
// CHECK-NEXT: %[[MOVED:[A-Za-z0-9_.$-]+]] = ascend_graph.reshape %[[Y]] {shape = array<i64: 5, 1, 8>, name = "Transpose_1"} : (tensor<1x5x8xf32>) -> tensor<5x1x8xf32>
// CHECK-NEXT: ascend_graph.net_output %[[SUM]], %[[MOVED]] {names = ["out", "moved"]}
// CHECK-NOT: ascend_graph.transpose_d
// CHECK-NOT: ascend_graph.confusion_transpose_d
