// float32 -> float64 -> float32 holds every value: the casts go.
// RUN: ge-opt %s -p 'CastCastFusionPass' | filecheck %s

builtin.module {
  ascend_graph.graph @cast_chain {
    %0 = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<2x3xf32>
    %1 = ascend_graph.cast %0 {dst_type = f64, name = "Cast_0"} : (tensor<2x3xf32>) -> tensor<2x3xf64>
    %2 = ascend_graph.cast %1 {dst_type = f32, name = "Cast_1"} : (tensor<2x3xf64>) -> tensor<2x3xf32>
    ascend_graph.net_output %2 {names = ["out_0"]} : tensor<2x3xf32>
  }
}

// CHECK: builtin.module
// CHECK-NEXT: ascend_graph.graph @cast_chain {
// CHECK-NEXT: %[[V0:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<2x3xf32>
// CHECK-NEXT: ascend_graph.net_output %[[V0]] {names = ["out_0"]} : tensor<2x3xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
