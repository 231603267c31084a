// An op whose operands are all constants is evaluated at compile time.
// RUN: ge-opt %s -p 'constant-folding' | filecheck %s

builtin.module {
  ascend_graph.graph @constant_folding {
    %0 = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<2x3xf32>
    %1 = ascend_graph.const {value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>, name = "const_0"} : tensor<3xf32>
    %2 = ascend_graph.const {value = dense<2.000000e+00> : tensor<1xf32>, name = "const_1"} : tensor<1xf32>
    %3 = ascend_graph.mul %1, %2 {name = "Mul_0"} : (tensor<3xf32>, tensor<1xf32>) -> tensor<3xf32>
    %4 = ascend_graph.add %0, %3 {name = "Add_0"} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    ascend_graph.net_output %4 {names = ["out_0"]} : tensor<2x3xf32>
  }
}

// CHECK: builtin.module
// CHECK-NEXT: ascend_graph.graph @constant_folding {
// CHECK-NEXT: %[[V0:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<2x3xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = dense<[2.000000e+00, 4.000000e+00, 6.000000e+00]> : tensor<3xf32>, name = "Mul_0"} : tensor<3xf32>
// CHECK-NEXT: %[[V2:[A-Za-z0-9_.$-]+]] = ascend_graph.add %[[V0]], %[[V1]] {name = "Add_0"} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: ascend_graph.net_output %[[V2]] {names = ["out_0"]} : tensor<2x3xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
