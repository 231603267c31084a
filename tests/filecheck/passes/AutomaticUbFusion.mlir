// An elementwise chain that fits the UB becomes one scope.
// RUN: ge-opt %s -p 'AutomaticUbFusion' | filecheck %s

builtin.module {
  ascend_graph.graph @elementwise_chain {
    %0 = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<4x16xf32>
    %1 = ascend_graph.const {value = dense<1.000000e+00> : tensor<1xf32>, name = "const_0"} : tensor<1xf32>
    %2 = ascend_graph.add %0, %1 {name = "Add_0"} : (tensor<4x16xf32>, tensor<1xf32>) -> tensor<4x16xf32>
    %3 = ascend_graph.relu %2 {name = "Relu_0"} : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %4 = ascend_graph.const {value = dense<5.000000e-01> : tensor<1xf32>, name = "const_1"} : tensor<1xf32>
    %5 = ascend_graph.mul %3, %4 {name = "Mul_0"} : (tensor<4x16xf32>, tensor<1xf32>) -> tensor<4x16xf32>
    ascend_graph.net_output %5 {names = ["out_0"]} : tensor<4x16xf32>
  }
}

// CHECK: builtin.module
// CHECK-NEXT: ascend_graph.graph @elementwise_chain {
// CHECK-NEXT: %[[V0:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<4x16xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = dense<1.000000e+00> : tensor<1xf32>, name = "const_0"} : tensor<1xf32>
// CHECK-NEXT: %[[V2:[A-Za-z0-9_.$-]+]] = ascend_graph.add %[[V0]], %[[V1]] {_fusion_scope = 0 : i64, name = "Add_0"} : (tensor<4x16xf32>, tensor<1xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[V3:[A-Za-z0-9_.$-]+]] = ascend_graph.relu %[[V2]] {_fusion_scope = 0 : i64, name = "Relu_0"} : (tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[V4:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = dense<5.000000e-01> : tensor<1xf32>, name = "const_1"} : tensor<1xf32>
// CHECK-NEXT: %[[V5:[A-Za-z0-9_.$-]+]] = ascend_graph.mul %[[V3]], %[[V4]] {_fusion_scope = 0 : i64, name = "Mul_0"} : (tensor<4x16xf32>, tensor<1xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: ascend_graph.net_output %[[V5]] {names = ["out_0"]} : tensor<4x16xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
