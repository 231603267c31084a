// Every Conv2D -> BatchNormalization of the bundled ResNet folds into the conv (scaled filter, new bias).
// RUN: ge-opt %models/tiny_resnet.onnx -p ConvBatchnormFusionPass | filecheck %s
// RUN: ge-opt %models/tiny_resnet.onnx | filecheck %s --check-prefix=BEFORE

// BEFORE-COUNT-6: ascend_graph.batch_norm

// CHECK-LABEL: ascend_graph.graph @tiny_resnet
// CHECK-NOT: ascend_graph.batch_norm
// CHECK: %[[FILTER:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = #ascend_graph.weight<"stem.conv.filter",
// CHECK: %[[BIAS:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = {{.*}}name = "stem.conv.bias"}
// CHECK: ascend_graph.conv2d %input, %[[FILTER]], %[[BIAS]] {{.*}}name = "stem.conv"}
// CHECK-NOT: ascend_graph.batch_norm
// CHECK: ascend_graph.net_output
