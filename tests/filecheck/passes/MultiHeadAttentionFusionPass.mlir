// The masked 4-head self-attention block (projections, head split, scores, softmax, merge) becomes one op.
// RUN: ge-opt %models/tiny_bert.onnx -p MultiHeadAttentionFusionPass | filecheck %s

// CHECK-LABEL: ascend_graph.graph @tiny_bert
// CHECK-NOT: ascend_graph.softmax_v2
// CHECK: ascend_graph.multi_head_attention
// CHECK-NOT: ascend_graph.softmax_v2
// CHECK-NOT: ascend_graph.transpose_d
// CHECK: ascend_graph.net_output
