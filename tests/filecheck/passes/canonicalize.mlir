// ascend_graph's folds and canonicalization patterns.
// RUN: ge-opt %s -p 'canonicalize' | filecheck %s

builtin.module {
  ascend_graph.graph @identities {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x3xf32>
    %one = ascend_graph.const {value = dense<1.000000e+00> : tensor<1xf32>, name = "one"} : tensor<1xf32>
    %zero = ascend_graph.const {value = dense<0.000000e+00> : tensor<3xf32>, name = "zero"} : tensor<3xf32>
    %wide = ascend_graph.const {value = dense<1.000000e+00> : tensor<2x2x3xf32>, name = "wide"} : tensor<2x2x3xf32>
    %0 = ascend_graph.mul %x, %one {name = "times_one"} : (tensor<2x3xf32>, tensor<1xf32>) -> tensor<2x3xf32>
    %1 = ascend_graph.add %zero, %0 {name = "plus_zero"} : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %2 = ascend_graph.div %1, %one {name = "by_one"} : (tensor<2x3xf32>, tensor<1xf32>) -> tensor<2x3xf32>
    %3 = ascend_graph.identity %2 {name = "identity"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %4 = ascend_graph.cast %3 {dst_type = f32, name = "same_cast"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %5 = ascend_graph.neg %4 {name = "neg"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %6 = ascend_graph.neg %5 {name = "neg_neg"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %7 = ascend_graph.reshape %6 {shape = array<i64: 6>, name = "flat"} : (tensor<2x3xf32>) -> tensor<6xf32>
    %8 = ascend_graph.reshape %7 {shape = array<i64: 3, 2>, name = "back"} : (tensor<6xf32>) -> tensor<3x2xf32>
    %9 = ascend_graph.mul %x, %wide {name = "broadcast_by_one"} : (tensor<2x3xf32>, tensor<2x2x3xf32>) -> tensor<2x2x3xf32>
    ascend_graph.net_output %8, %9 {names = ["y", "z"]} : tensor<3x2xf32>, tensor<2x2x3xf32>
  }
}

// CHECK: builtin.module
// CHECK-NEXT: ascend_graph.graph @identities {
// CHECK-NEXT: %[[V0:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x3xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = dense<1.000000e+00> : tensor<2x2x3xf32>, name = "wide"} : tensor<2x2x3xf32>
// CHECK-NEXT: %[[V2:[A-Za-z0-9_.$-]+]] = ascend_graph.reshape %[[V0]] {shape = array<i64: 3, 2>, name = "back"} : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: %[[V3:[A-Za-z0-9_.$-]+]] = ascend_graph.mul %[[V0]], %[[V1]] {name = "broadcast_by_one"} : (tensor<2x3xf32>, tensor<2x2x3xf32>) -> tensor<2x2x3xf32>
// CHECK-NEXT: ascend_graph.net_output %[[V2]], %[[V3]] {names = ["y", "z"]} : tensor<3x2xf32>, tensor<2x2x3xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
