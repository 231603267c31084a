// A residual block's Conv2D + Add (of the shortcut) + Relu share one UB fusion scope.
// RUN: ge-opt %models/tiny_resnet.onnx -p 'ConvBatchnormFusionPass,TbeConvDoubleInFusionPass' | filecheck %s

// CHECK-LABEL: ascend_graph.graph @tiny_resnet
// CHECK: %[[CONV:[A-Za-z0-9_.$-]+]] = ascend_graph.conv2d {{.*}} {_fusion_scope = [[SCOPE:[0-9]+]] : i64, {{.*}}name = "layer1.1.conv"}
// CHECK-NEXT: %[[SUM:[A-Za-z0-9_.$-]+]] = ascend_graph.add %[[CONV]], {{.*}} {_fusion_scope = [[SCOPE]] : i64,
// CHECK-NEXT: ascend_graph.relu %[[SUM]] {_fusion_scope = [[SCOPE]] : i64,
