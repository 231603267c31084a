// GELU as exported, x * 0.5 * (1 + erf(x / sqrt(2))), becomes one Gelu.
// RUN: ge-opt %models/tiny_bert.onnx -p GeluONNXFusionPass | filecheck %s

// CHECK-LABEL: ascend_graph.graph @tiny_bert
// CHECK-NOT: ascend_graph.erf
// CHECK: ascend_graph.gelu
// CHECK-NOT: ascend_graph.erf
// CHECK: ascend_graph.net_output
