// The LayerNorm written out as ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add becomes one LayerNorm.
// RUN: ge-opt %models/tiny_bert.onnx -p LayerNormONNXFusionPass | filecheck %s

// CHECK-LABEL: ascend_graph.graph @tiny_bert
// CHECK-NOT: ascend_graph.reduce_mean_d
// CHECK-NOT: ascend_graph.sqrt
// CHECK-COUNT-3: ascend_graph.layer_norm
// CHECK-NOT: ascend_graph.reduce_mean_d
// CHECK: ascend_graph.net_output
