// force_fp16 (the default): float16 inside, casts at the graph's boundary.
// RUN: ge-opt %s -p 'precision-selection{soc_version="Ascend910B1"}' | filecheck %s

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
// CHECK-NEXT: %[[V1:[A-Za-z0-9_.$-]+]] = ascend_graph.cast %[[V0]] {_precision_reason = "dtype boundary", dst_type = f16, name = "input_0_cast_float16"} : (tensor<4x16xf32>) -> tensor<4x16xf16>
// CHECK-NEXT: %[[V2:[A-Za-z0-9_.$-]+]] = ascend_graph.const {_precision_reason = "dtype boundary: converted in the weight store", value = dense<1.000000e+00> : tensor<1xf16>, name = "const_0_float16"} : tensor<1xf16>
// CHECK-NEXT: %[[V3:[A-Za-z0-9_.$-]+]] = ascend_graph.add %[[V1]], %[[V2]] {_precision_reason = "precision_mode=force_fp16 (default)", name = "Add_0"} : (tensor<4x16xf16>, tensor<1xf16>) -> tensor<4x16xf16>
// CHECK-NEXT: %[[V4:[A-Za-z0-9_.$-]+]] = ascend_graph.relu %[[V3]] {_precision_reason = "precision_mode=force_fp16 (default)", name = "Relu_0"} : (tensor<4x16xf16>) -> tensor<4x16xf16>
// CHECK-NEXT: %[[V5:[A-Za-z0-9_.$-]+]] = ascend_graph.const {_precision_reason = "dtype boundary: converted in the weight store", value = dense<5.000000e-01> : tensor<1xf16>, name = "const_1_float16"} : tensor<1xf16>
// CHECK-NEXT: %[[V6:[A-Za-z0-9_.$-]+]] = ascend_graph.mul %[[V4]], %[[V5]] {_precision_reason = "precision_mode=force_fp16 (default)", name = "Mul_0"} : (tensor<4x16xf16>, tensor<1xf16>) -> tensor<4x16xf16>
// CHECK-NEXT: %[[V7:[A-Za-z0-9_.$-]+]] = ascend_graph.cast %[[V6]] {_precision_reason = "dtype boundary", dst_type = f32, name = "Mul_0_cast_float32"} : (tensor<4x16xf16>) -> tensor<4x16xf32>
// CHECK-NEXT: ascend_graph.net_output %[[V7]] {names = ["out_0"]} : tensor<4x16xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
