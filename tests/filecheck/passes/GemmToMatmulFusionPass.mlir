// The classifier's Gemm (transB, no scaling) becomes MatMulV2 + bias.
// RUN: ge-opt %models/tiny_resnet.onnx -p GemmToMatmulFusionPass | filecheck %s

// CHECK-LABEL: ascend_graph.graph @tiny_resnet
// CHECK-NOT: ascend_graph.gemm
// CHECK: ascend_graph.matmul_v2 %{{.*}}, %{{.*}}, %{{.*}} {{.*}}name = "fc"}
// CHECK-NOT: ascend_graph.gemm
// CHECK: ascend_graph.net_output
