// Conv2D + Relu (after the BatchNorm folds into the conv) share one UB fusion scope; the pass runs after TbeConvDoubleInFusionPass, as in GE.
// RUN: ge-opt %models/tiny_resnet.onnx -p 'ConvBatchnormFusionPass,TbeConvDoubleInFusionPass,TbeCommonRules0FusionPass' | filecheck %s

// CHECK-LABEL: ascend_graph.graph @tiny_resnet
// CHECK: %[[CONV:[A-Za-z0-9_.$-]+]] = ascend_graph.conv2d {{.*}} {_fusion_scope = [[SCOPE:[0-9]+]] : i64, {{.*}}name = "stem.conv"}
// CHECK-NEXT: ascend_graph.relu %[[CONV]] {_fusion_scope = [[SCOPE]] : i64,
