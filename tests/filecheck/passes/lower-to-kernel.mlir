// A fused Add+Relu scope becomes one ascend_kernel.kernel and its launch.
// RUN: ge-opt %s -p 'AutomaticUbFusion,lower-to-kernel{soc_version="Ascend910B1"}' | filecheck %s

builtin.module {
  ascend_graph.graph @lower {
    %0 = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<4x16xf32>
    %1 = ascend_graph.add %0, %0 {name = "Add_0"} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    %2 = ascend_graph.relu %1 {name = "Relu_0"} : (tensor<4x16xf32>) -> tensor<4x16xf32>
    ascend_graph.net_output %2 {names = ["out_0"]} : tensor<4x16xf32>
  }
}

// CHECK: builtin.module
// CHECK-NEXT: ascend_graph.graph @lower {
// CHECK-NEXT: %[[V0:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<4x16xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_.$-]+]] = ascend_kernel.launch @te_add_relu_0(%[[V0]]) {names = ["Add_0", "Relu_0"]} : (tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: ascend_graph.net_output %[[V1]] {names = ["out_0"]} : tensor<4x16xf32>
// CHECK-NEXT: }
// CHECK-NEXT: ascend_kernel.kernel @te_add_relu_0 attributes {op_types = ["Add", "Relu"], block_dim = 8 : i64, core_type = "VectorCore", impl_mode = "high_performance", tiling = {rows = 64 : i64, row = 1 : i64, elements = 64 : i64, block_rows = 8 : i64, tile_rows = 8 : i64, tiles = 1 : i64, ub_bytes = 160 : i64}, args = [#ascend_kernel.arg<"input", f32, array<i64: 4, 16>, "ND">, #ascend_kernel.arg<"output", f32, array<i64: 4, 16>, "ND">], soc = "Ascend910B1", workspace = 0 : i64} compute {
// CHECK-NEXT: ^bb0(%[[V2:[A-Za-z0-9_.$-]+]]: tensor<4x16xf32>):
// CHECK-NEXT: %[[V3:[A-Za-z0-9_.$-]+]] = ascend_graph.add %[[V2]], %[[V2]] {_fusion_scope = 0 : i64, name = "Add_0"} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[V4:[A-Za-z0-9_.$-]+]] = ascend_graph.relu %[[V3]] {_fusion_scope = 0 : i64, name = "Relu_0"} : (tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: ascend_kernel.yield %[[V4]] : tensor<4x16xf32>
// CHECK-NEXT: } program {
// CHECK-NEXT: ^bb0(%[[V5:[A-Za-z0-9_.$-]+]]: !ascend_kernel.buffer<"GM">, %[[V6:[A-Za-z0-9_.$-]+]]: !ascend_kernel.buffer<"GM">):
// CHECK-NEXT: %[[V7:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 32 bytes at 0 : !ascend_kernel.buffer<"UB">
// CHECK-NEXT: %[[V8:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 32 bytes at 32 : !ascend_kernel.buffer<"UB">
// CHECK-NEXT: %[[V9:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 32 bytes at 64 : !ascend_kernel.buffer<"UB">
// CHECK-NEXT: %[[V10:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 32 bytes at 96 : !ascend_kernel.buffer<"UB">
// CHECK-NEXT: %[[V11:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 32 bytes at 128 : !ascend_kernel.buffer<"UB">
// CHECK-NEXT: ascend_kernel.scalar 32 instrs
// CHECK-NEXT: ascend_kernel.set_flag "V" -> "MTE2", 0
// CHECK-NEXT: ascend_kernel.set_flag "MTE3" -> "V", 0
// CHECK-NEXT: ascend_kernel.scalar 10 instrs
// CHECK-NEXT: ascend_kernel.wait_flag "V" -> "MTE2", 0
// CHECK-NEXT: ascend_kernel.copy "MTE2" %[[V5]] -> %[[V7]], 32 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
// CHECK-NEXT: ascend_kernel.set_flag "MTE2" -> "V", 0
// CHECK-NEXT: ascend_kernel.wait_flag "MTE2" -> "V", 0
// CHECK-NEXT: ascend_kernel.wait_flag "MTE3" -> "V", 0
// CHECK-NEXT: ascend_kernel.vec "VADD" "FP32_FP32_FP32"(%[[V9]], %[[V7]], %[[V7]]) x 8 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
// CHECK-NEXT: ascend_kernel.vec "VRELU" "FP32_FP32"(%[[V10]], %[[V9]]) x 8 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
// CHECK-NEXT: ascend_kernel.set_flag "V" -> "MTE2", 0
// CHECK-NEXT: ascend_kernel.set_flag "V" -> "MTE3", 0
// CHECK-NEXT: ascend_kernel.wait_flag "V" -> "MTE3", 0
// CHECK-NEXT: ascend_kernel.copy "MTE3" %[[V10]] -> %[[V6]], 32 bytes : !ascend_kernel.buffer<"UB"> -> !ascend_kernel.buffer<"GM">
// CHECK-NEXT: ascend_kernel.set_flag "MTE3" -> "V", 0
// CHECK-NEXT: ascend_kernel.wait_flag "V" -> "MTE2", 0
// CHECK-NEXT: ascend_kernel.wait_flag "MTE3" -> "V", 0
// CHECK-NEXT: }
// CHECK-NEXT: }
