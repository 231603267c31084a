// ascend_kernel round trip: kernels with their compute and pipe-program regions and their launches, as
// lower-to-kernel makes them for Ascend910B1 (a fused vector kernel; a convolution with its FIX epilogue, and a flag across the cores).
// RUN: ge-opt %s --split-input-file | filecheck %s
// RUN: ge-opt %s --split-input-file | ge-opt --split-input-file | filecheck %s
// RUN: ge-opt %s --split-input-file --print-op-generic | ge-opt --split-input-file | filecheck %s

builtin.module {
  ascend_graph.graph @lower {
    %0 = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<4x16xf32>
    %1 = ascend_kernel.launch @te_add_relu_0(%0) {names = ["Add_0", "Relu_0"]} : (tensor<4x16xf32>) -> tensor<4x16xf32>
    ascend_graph.net_output %1 {names = ["out_0"]} : tensor<4x16xf32>
  }
  ascend_kernel.kernel @te_add_relu_0 attributes {op_types = ["Add", "Relu"], block_dim = 8 : i64, core_type = "VectorCore", impl_mode = "high_performance", tiling = {rows = 64 : i64, row = 1 : i64, elements = 64 : i64, block_rows = 8 : i64, tile_rows = 8 : i64, tiles = 1 : i64, ub_bytes = 160 : i64}, args = [#ascend_kernel.arg<"input", f32, array<i64: 4, 16>, "ND">, #ascend_kernel.arg<"output", f32, array<i64: 4, 16>, "ND">], soc = "Ascend910B1", workspace = 0 : i64} compute {
  ^bb0(%2: tensor<4x16xf32>):
    %3 = ascend_graph.add %2, %2 {_fusion_scope = 0 : i64, name = "Add_0"} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    %4 = ascend_graph.relu %3 {_fusion_scope = 0 : i64, name = "Relu_0"} : (tensor<4x16xf32>) -> tensor<4x16xf32>
    ascend_kernel.yield %4 : tensor<4x16xf32>
  } program {
  ^bb0(%5: !ascend_kernel.buffer<"GM">, %6: !ascend_kernel.buffer<"GM">):
    %7 = ascend_kernel.alloc 32 bytes at 0 : !ascend_kernel.buffer<"UB">
    %8 = ascend_kernel.alloc 32 bytes at 32 : !ascend_kernel.buffer<"UB">
    %9 = ascend_kernel.alloc 32 bytes at 64 : !ascend_kernel.buffer<"UB">
    %10 = ascend_kernel.alloc 32 bytes at 96 : !ascend_kernel.buffer<"UB">
    %11 = ascend_kernel.alloc 32 bytes at 128 : !ascend_kernel.buffer<"UB">
    ascend_kernel.scalar 32 instrs
    ascend_kernel.set_flag "V" -> "MTE2", 0
    ascend_kernel.set_flag "MTE3" -> "V", 0
    ascend_kernel.scalar 10 instrs
    ascend_kernel.wait_flag "V" -> "MTE2", 0
    ascend_kernel.copy "MTE2" %5 -> %7, 32 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
    ascend_kernel.set_flag "MTE2" -> "V", 0
    ascend_kernel.wait_flag "MTE2" -> "V", 0
    ascend_kernel.wait_flag "MTE3" -> "V", 0
    ascend_kernel.vec "VADD" "FP32_FP32_FP32"(%9, %7, %7) x 8 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
    ascend_kernel.vec "VRELU" "FP32_FP32"(%10, %9) x 8 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
    ascend_kernel.set_flag "V" -> "MTE2", 0
    ascend_kernel.set_flag "V" -> "MTE3", 0
    ascend_kernel.wait_flag "V" -> "MTE3", 0
    ascend_kernel.copy "MTE3" %10 -> %6, 32 bytes : !ascend_kernel.buffer<"UB"> -> !ascend_kernel.buffer<"GM">
    ascend_kernel.set_flag "MTE3" -> "V", 0
    ascend_kernel.wait_flag "V" -> "MTE2", 0
    ascend_kernel.wait_flag "MTE3" -> "V", 0
  }
}
// -----
builtin.module {
  ascend_graph.graph @conv_bias_add {
    %0 = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<1x2x4x4xf32>
    %1 = ascend_kernel.launch @te_trans_data_0(%0) {names = ["input_0/TransData_NC1HWC0"]} : (tensor<1x2x4x4xf32>) -> tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>
    %2 = ascend_graph.const {value = #ascend_graph.weight<"const_0.FRACTAL_Z", "cc64e0cbaf11f371">, name = "const_0"} : tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_Z", "NCHW", array<i64: 2, 2, 1, 1>>>
    %3 = ascend_graph.const {value = dense<[5.000000e-01, -5.000000e-01]> : tensor<2xf32>, name = "Conv2D_0.bias"} : tensor<2xf32>
    %4 = ascend_kernel.launch @te_conv2d_0(%1, %2, %3) {names = ["Conv2D_0"]} : (tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>, tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_Z", "NCHW", array<i64: 2, 2, 1, 1>>>, tensor<2xf32>) -> tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>
    %5 = ascend_kernel.launch @te_trans_data_1(%4) {names = ["Conv2D_0/TransData_NCHW"]} : (tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>) -> tensor<1x2x4x4xf32>
    ascend_graph.net_output %5 {names = ["out_0"]} : tensor<1x2x4x4xf32>
  }
  ascend_kernel.kernel @te_trans_data_0 attributes {op_types = ["TransData"], block_dim = 4 : i64, core_type = "VectorCore", impl_mode = "high_performance", tiling = {rows = 32 : i64, row = 1 : i64, elements = 32 : i64, block_rows = 8 : i64, tile_rows = 8 : i64, tiles = 1 : i64, ub_bytes = 320 : i64}, args = [#ascend_kernel.arg<"input", f32, array<i64: 1, 2, 4, 4>, "NCHW">, #ascend_kernel.arg<"output", f32, array<i64: 1, 1, 4, 4, 8>, "NC1HWC0">], soc = "Ascend910B1", workspace = 0 : i64} compute {
  ^bb0(%6: tensor<1x2x4x4xf32>):
    %7 = ascend_graph.trans_data %6 {src_format = "NCHW", dst_format = "NC1HWC0", name = "input_0/TransData_NC1HWC0"} : (tensor<1x2x4x4xf32>) -> tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>
    ascend_kernel.yield %7 : tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>
  } program {
  ^bb0(%8: !ascend_kernel.buffer<"GM">, %9: !ascend_kernel.buffer<"GM">):
    %10 = ascend_kernel.alloc 32 bytes at 0 : !ascend_kernel.buffer<"UB">
    %11 = ascend_kernel.alloc 32 bytes at 32 : !ascend_kernel.buffer<"UB">
    %12 = ascend_kernel.alloc 128 bytes at 64 : !ascend_kernel.buffer<"UB">
    %13 = ascend_kernel.alloc 128 bytes at 192 : !ascend_kernel.buffer<"UB">
    ascend_kernel.scalar 32 instrs
    ascend_kernel.set_flag "V" -> "MTE2", 0
    ascend_kernel.set_flag "MTE3" -> "V", 0
    ascend_kernel.scalar 9 instrs
    ascend_kernel.wait_flag "V" -> "MTE2", 0
    ascend_kernel.copy "MTE2" %8 -> %10, 32 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
    ascend_kernel.set_flag "MTE2" -> "V", 0
    ascend_kernel.wait_flag "MTE2" -> "V", 0
    ascend_kernel.wait_flag "MTE3" -> "V", 0
    ascend_kernel.vec "VNCHWCONV" "UINT32_UINT32"(%12, %10) x 32 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
    ascend_kernel.set_flag "V" -> "MTE2", 0
    ascend_kernel.set_flag "V" -> "MTE3", 0
    ascend_kernel.wait_flag "V" -> "MTE3", 0
    ascend_kernel.copy "MTE3" %12 -> %9, 128 bytes : !ascend_kernel.buffer<"UB"> -> !ascend_kernel.buffer<"GM">
    ascend_kernel.set_flag "MTE3" -> "V", 0
    ascend_kernel.wait_flag "V" -> "MTE2", 0
    ascend_kernel.wait_flag "MTE3" -> "V", 0
  }
  ascend_kernel.kernel @te_conv2d_0 attributes {op_types = ["Conv2D"], block_dim = 1 : i64, core_type = "AiCore", impl_mode = "high_performance", tiling = {batch = 1 : i64, m = 16 : i64, k = 8 : i64, n = 16 : i64, batch_dim = 1 : i64, m_dim = 1 : i64, n_dim = 1 : i64, block_batch = 1 : i64, block_m = 16 : i64, block_n = 16 : i64, m0 = 16 : i64, n0 = 16 : i64, k0 = 8 : i64, k1 = 8 : i64, b_resident = 1 : i64, epilogue = 0 : i64}, args = [#ascend_kernel.arg<"input", f32, array<i64: 1, 1, 4, 4, 8>, "NC1HWC0">, #ascend_kernel.arg<"input", f32, array<i64: 1, 1, 16, 8>, "FRACTAL_Z">, #ascend_kernel.arg<"input", f32, array<i64: 2>, "ND">, #ascend_kernel.arg<"output", f32, array<i64: 1, 1, 4, 4, 8>, "NC1HWC0">], soc = "Ascend910B1", workspace = 0 : i64} compute {
  ^bb0(%6: tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>, %7: tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_Z", "NCHW", array<i64: 2, 2, 1, 1>>>, %8: tensor<2xf32>):
    %9 = ascend_graph.conv2d %6, %7, %8 {strides = array<i64: 1, 1, 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1, 1>, groups = 1 : i64, name = "Conv2D_0"} : (tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>, tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_Z", "NCHW", array<i64: 2, 2, 1, 1>>>, tensor<2xf32>) -> tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>
    ascend_kernel.yield %9 : tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>
  } program {
  ^bb0(%10: !ascend_kernel.buffer<"GM">, %11: !ascend_kernel.buffer<"GM">, %12: !ascend_kernel.buffer<"GM">, %13: !ascend_kernel.buffer<"GM">):
    %14 = ascend_kernel.alloc 512 bytes at 0 : !ascend_kernel.buffer<"L1">
    %15 = ascend_kernel.alloc 512 bytes at 512 : !ascend_kernel.buffer<"L1">
    %16 = ascend_kernel.alloc 512 bytes at 1024 : !ascend_kernel.buffer<"L1">
    %17 = ascend_kernel.alloc 512 bytes at 1536 : !ascend_kernel.buffer<"L1">
    %18 = ascend_kernel.alloc 512 bytes at 0 : !ascend_kernel.buffer<"L0A">
    %19 = ascend_kernel.alloc 512 bytes at 512 : !ascend_kernel.buffer<"L0A">
    %20 = ascend_kernel.alloc 512 bytes at 0 : !ascend_kernel.buffer<"L0B">
    %21 = ascend_kernel.alloc 512 bytes at 512 : !ascend_kernel.buffer<"L0B">
    %22 = ascend_kernel.alloc 1024 bytes at 0 : !ascend_kernel.buffer<"L0C">
    %23 = ascend_kernel.alloc 1024 bytes at 1024 : !ascend_kernel.buffer<"L0C">
    %24 = ascend_kernel.alloc 64 bytes at 2048 : !ascend_kernel.buffer<"L1">
    %25 = ascend_kernel.alloc 64 bytes at 0 : !ascend_kernel.buffer<"BT">
    ascend_kernel.scalar 32 instrs
    ascend_kernel.set_flag "MTE1" -> "MTE2", 2
    ascend_kernel.scalar 18 instrs
    ascend_kernel.wait_flag "MTE1" -> "MTE2", 2
    ascend_kernel.copy "MTE2" %11 -> %16, 512 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"L1">
    ascend_kernel.set_flag "MTE2" -> "MTE1", 2
    ascend_kernel.wait_flag "MTE2" -> "MTE1", 2
    ascend_kernel.set_flag "MTE1" -> "MTE2", 4
    ascend_kernel.wait_flag "MTE1" -> "MTE2", 4
    ascend_kernel.copy "MTE2" %12 -> %24, 64 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"L1">
    ascend_kernel.set_flag "MTE2" -> "MTE1", 4
    ascend_kernel.wait_flag "MTE2" -> "MTE1", 4
    ascend_kernel.set_flag "M" -> "MTE1", 4
    ascend_kernel.wait_flag "M" -> "MTE1", 4
    ascend_kernel.copy "MTE1" %24 -> %25, 64 bytes : !ascend_kernel.buffer<"L1"> -> !ascend_kernel.buffer<"BT">
    ascend_kernel.set_flag "MTE1" -> "M", 4
    ascend_kernel.wait_flag "MTE1" -> "M", 4
    ascend_kernel.set_flag "MTE1" -> "MTE2", 0
    ascend_kernel.set_flag "MTE1" -> "MTE2", 1
    ascend_kernel.set_flag "M" -> "MTE1", 0
    ascend_kernel.set_flag "M" -> "MTE1", 1
    ascend_kernel.set_flag "FIX" -> "M", 0
    ascend_kernel.scalar 12 instrs
    ascend_kernel.wait_flag "FIX" -> "M", 0
    ascend_kernel.scalar 10 instrs
    ascend_kernel.wait_flag "MTE1" -> "MTE2", 0
    ascend_kernel.copy "MTE2" %10 -> %14, 512 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"L1">
    ascend_kernel.set_flag "MTE2" -> "MTE1", 0
    ascend_kernel.wait_flag "MTE2" -> "MTE1", 0
    ascend_kernel.scalar 8 instrs
    ascend_kernel.wait_flag "M" -> "MTE1", 0
    ascend_kernel.copy "MTE1" %14 -> %18, 512 bytes : !ascend_kernel.buffer<"L1"> -> !ascend_kernel.buffer<"L0A">
    ascend_kernel.copy "MTE1" %16 -> %20, 512 bytes : !ascend_kernel.buffer<"L1"> -> !ascend_kernel.buffer<"L0B">
    ascend_kernel.set_flag "MTE1" -> "M", 0
    ascend_kernel.wait_flag "MTE1" -> "M", 0
    ascend_kernel.mmad %18, %20 -> %22, 16 x 8 x 16, f32 : !ascend_kernel.buffer<"L0A">, !ascend_kernel.buffer<"L0B"> -> !ascend_kernel.buffer<"L0C">
    ascend_kernel.set_flag "M" -> "MTE1", 0
    ascend_kernel.set_flag "MTE1" -> "MTE2", 0
    ascend_kernel.set_flag "M" -> "FIX", 0
    ascend_kernel.wait_flag "M" -> "FIX", 0
    ascend_kernel.copy "FIX" %22 -> %13, 1024 bytes : !ascend_kernel.buffer<"L0C"> -> !ascend_kernel.buffer<"GM">
    ascend_kernel.set_flag "FIX" -> "MTE2", 1 core "vector"
    ascend_kernel.wait_flag "FIX" -> "MTE2", 1 core "vector"
    ascend_kernel.set_flag "FIX" -> "M", 0
    ascend_kernel.wait_flag "FIX" -> "M", 0
    ascend_kernel.wait_flag "MTE1" -> "MTE2", 0
    ascend_kernel.wait_flag "MTE1" -> "MTE2", 1
    ascend_kernel.wait_flag "M" -> "MTE1", 0
    ascend_kernel.wait_flag "M" -> "MTE1", 1
    ascend_kernel.set_flag "MTE1" -> "MTE2", 2
    ascend_kernel.wait_flag "MTE1" -> "MTE2", 2
  }
  ascend_kernel.kernel @te_trans_data_1 attributes {op_types = ["TransData"], block_dim = 4 : i64, core_type = "VectorCore", impl_mode = "high_performance", tiling = {rows = 32 : i64, row = 1 : i64, elements = 32 : i64, block_rows = 8 : i64, tile_rows = 8 : i64, tiles = 1 : i64, ub_bytes = 320 : i64}, args = [#ascend_kernel.arg<"input", f32, array<i64: 1, 1, 4, 4, 8>, "NC1HWC0">, #ascend_kernel.arg<"output", f32, array<i64: 1, 2, 4, 4>, "NCHW">], soc = "Ascend910B1", workspace = 0 : i64} compute {
  ^bb0(%6: tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>):
    %7 = ascend_graph.trans_data %6 {src_format = "NC1HWC0", dst_format = "NCHW", name = "Conv2D_0/TransData_NCHW"} : (tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>) -> tensor<1x2x4x4xf32>
    ascend_kernel.yield %7 : tensor<1x2x4x4xf32>
  } program {
  ^bb0(%8: !ascend_kernel.buffer<"GM">, %9: !ascend_kernel.buffer<"GM">):
    %10 = ascend_kernel.alloc 128 bytes at 0 : !ascend_kernel.buffer<"UB">
    %11 = ascend_kernel.alloc 128 bytes at 128 : !ascend_kernel.buffer<"UB">
    %12 = ascend_kernel.alloc 32 bytes at 256 : !ascend_kernel.buffer<"UB">
    %13 = ascend_kernel.alloc 32 bytes at 288 : !ascend_kernel.buffer<"UB">
    ascend_kernel.scalar 32 instrs
    ascend_kernel.set_flag "V" -> "MTE2", 0
    ascend_kernel.set_flag "MTE3" -> "V", 0
    ascend_kernel.scalar 9 instrs
    ascend_kernel.wait_flag "V" -> "MTE2", 0
    ascend_kernel.copy "MTE2" %8 -> %10, 128 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
    ascend_kernel.set_flag "MTE2" -> "V", 0
    ascend_kernel.wait_flag "MTE2" -> "V", 0
    ascend_kernel.wait_flag "MTE3" -> "V", 0
    ascend_kernel.vec "VNCHWCONV" "UINT32_UINT32"(%12, %10) x 8 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
    ascend_kernel.set_flag "V" -> "MTE2", 0
    ascend_kernel.set_flag "V" -> "MTE3", 0
    ascend_kernel.wait_flag "V" -> "MTE3", 0
    ascend_kernel.copy "MTE3" %12 -> %9, 32 bytes : !ascend_kernel.buffer<"UB"> -> !ascend_kernel.buffer<"GM">
    ascend_kernel.set_flag "MTE3" -> "V", 0
    ascend_kernel.wait_flag "V" -> "MTE2", 0
    ascend_kernel.wait_flag "MTE3" -> "V", 0
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
// CHECK: // {{-----}}
// CHECK: builtin.module
// CHECK-NEXT: ascend_graph.graph @conv_bias_add {
// CHECK-NEXT: %[[V0:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[V1:[A-Za-z0-9_.$-]+]] = ascend_kernel.launch @te_trans_data_0(%[[V0]]) {names = ["input_0/TransData_NC1HWC0"]} : (tensor<1x2x4x4xf32>) -> tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>
// CHECK-NEXT: %[[V2:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = #ascend_graph.weight<"const_0.FRACTAL_Z", "cc64e0cbaf11f371">, name = "const_0"} : tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_Z", "NCHW", array<i64: 2, 2, 1, 1>>>
// CHECK-NEXT: %[[V3:[A-Za-z0-9_.$-]+]] = ascend_graph.const {value = dense<[5.000000e-01, -5.000000e-01]> : tensor<2xf32>, name = "Conv2D_0.bias"} : tensor<2xf32>
// CHECK-NEXT: %[[V4:[A-Za-z0-9_.$-]+]] = ascend_kernel.launch @te_conv2d_0(%[[V1]], %[[V2]], %[[V3]]) {names = ["Conv2D_0"]} : (tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>, tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_Z", "NCHW", array<i64: 2, 2, 1, 1>>>, tensor<2xf32>) -> tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>
// CHECK-NEXT: %[[V5:[A-Za-z0-9_.$-]+]] = ascend_kernel.launch @te_trans_data_1(%[[V4]]) {names = ["Conv2D_0/TransData_NCHW"]} : (tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT: ascend_graph.net_output %[[V5]] {names = ["out_0"]} : tensor<1x2x4x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: ascend_kernel.kernel @te_trans_data_0 attributes {op_types = ["TransData"], block_dim = 4 : i64, core_type = "VectorCore", impl_mode = "high_performance", tiling = {rows = 32 : i64, row = 1 : i64, elements = 32 : i64, block_rows = 8 : i64, tile_rows = 8 : i64, tiles = 1 : i64, ub_bytes = 320 : i64}, args = [#ascend_kernel.arg<"input", f32, array<i64: 1, 2, 4, 4>, "NCHW">, #ascend_kernel.arg<"output", f32, array<i64: 1, 1, 4, 4, 8>, "NC1HWC0">], soc = "Ascend910B1", workspace = 0 : i64} compute {
// CHECK-NEXT: ^bb0(%[[V6:[A-Za-z0-9_.$-]+]]: tensor<1x2x4x4xf32>):
// CHECK-NEXT: %[[V7:[A-Za-z0-9_.$-]+]] = ascend_graph.trans_data %[[V6]] {src_format = "NCHW", dst_format = "NC1HWC0", name = "input_0/TransData_NC1HWC0"} : (tensor<1x2x4x4xf32>) -> tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>
// CHECK-NEXT: ascend_kernel.yield %[[V7]] : tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>
// CHECK-NEXT: } program {
// CHECK-NEXT: ^bb0(%[[V8:[A-Za-z0-9_.$-]+]]: !ascend_kernel.buffer<"GM">, %[[V9:[A-Za-z0-9_.$-]+]]: !ascend_kernel.buffer<"GM">):
// CHECK-NEXT: %[[V10:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 32 bytes at 0 : !ascend_kernel.buffer<"UB">
// CHECK-NEXT: %[[V11:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 32 bytes at 32 : !ascend_kernel.buffer<"UB">
// CHECK-NEXT: %[[V12:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 128 bytes at 64 : !ascend_kernel.buffer<"UB">
// CHECK-NEXT: %[[V13:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 128 bytes at 192 : !ascend_kernel.buffer<"UB">
// CHECK-NEXT: ascend_kernel.scalar 32 instrs
// CHECK-NEXT: ascend_kernel.set_flag "V" -> "MTE2", 0
// CHECK-NEXT: ascend_kernel.set_flag "MTE3" -> "V", 0
// CHECK-NEXT: ascend_kernel.scalar 9 instrs
// CHECK-NEXT: ascend_kernel.wait_flag "V" -> "MTE2", 0
// CHECK-NEXT: ascend_kernel.copy "MTE2" %[[V8]] -> %[[V10]], 32 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
// CHECK-NEXT: ascend_kernel.set_flag "MTE2" -> "V", 0
// CHECK-NEXT: ascend_kernel.wait_flag "MTE2" -> "V", 0
// CHECK-NEXT: ascend_kernel.wait_flag "MTE3" -> "V", 0
// CHECK-NEXT: ascend_kernel.vec "VNCHWCONV" "UINT32_UINT32"(%[[V12]], %[[V10]]) x 32 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
// CHECK-NEXT: ascend_kernel.set_flag "V" -> "MTE2", 0
// CHECK-NEXT: ascend_kernel.set_flag "V" -> "MTE3", 0
// CHECK-NEXT: ascend_kernel.wait_flag "V" -> "MTE3", 0
// CHECK-NEXT: ascend_kernel.copy "MTE3" %[[V12]] -> %[[V9]], 128 bytes : !ascend_kernel.buffer<"UB"> -> !ascend_kernel.buffer<"GM">
// CHECK-NEXT: ascend_kernel.set_flag "MTE3" -> "V", 0
// CHECK-NEXT: ascend_kernel.wait_flag "V" -> "MTE2", 0
// CHECK-NEXT: ascend_kernel.wait_flag "MTE3" -> "V", 0
// CHECK-NEXT: }
// CHECK-NEXT: ascend_kernel.kernel @te_conv2d_0 attributes {op_types = ["Conv2D"], block_dim = 1 : i64, core_type = "AiCore", impl_mode = "high_performance", tiling = {batch = 1 : i64, m = 16 : i64, k = 8 : i64, n = 16 : i64, batch_dim = 1 : i64, m_dim = 1 : i64, n_dim = 1 : i64, block_batch = 1 : i64, block_m = 16 : i64, block_n = 16 : i64, m0 = 16 : i64, n0 = 16 : i64, k0 = 8 : i64, k1 = 8 : i64, b_resident = 1 : i64, epilogue = 0 : i64}, args = [#ascend_kernel.arg<"input", f32, array<i64: 1, 1, 4, 4, 8>, "NC1HWC0">, #ascend_kernel.arg<"input", f32, array<i64: 1, 1, 16, 8>, "FRACTAL_Z">, #ascend_kernel.arg<"input", f32, array<i64: 2>, "ND">, #ascend_kernel.arg<"output", f32, array<i64: 1, 1, 4, 4, 8>, "NC1HWC0">], soc = "Ascend910B1", workspace = 0 : i64} compute {
// CHECK-NEXT: ^bb0(%[[V6]]: tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>, %[[V7]]: tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_Z", "NCHW", array<i64: 2, 2, 1, 1>>>, %[[V8]]: tensor<2xf32>):
// CHECK-NEXT: %[[V9]] = ascend_graph.conv2d %[[V6]], %[[V7]], %[[V8]] {strides = array<i64: 1, 1, 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1, 1>, groups = 1 : i64, name = "Conv2D_0"} : (tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>, tensor<1x1x16x8xf32, #ascend_graph.format<"FRACTAL_Z", "NCHW", array<i64: 2, 2, 1, 1>>>, tensor<2xf32>) -> tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>
// CHECK-NEXT: ascend_kernel.yield %[[V9]] : tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>
// CHECK-NEXT: } program {
// CHECK-NEXT: ^bb0(%[[V10]]: !ascend_kernel.buffer<"GM">, %[[V11]]: !ascend_kernel.buffer<"GM">, %[[V12]]: !ascend_kernel.buffer<"GM">, %[[V13]]: !ascend_kernel.buffer<"GM">):
// CHECK-NEXT: %[[V14:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 512 bytes at 0 : !ascend_kernel.buffer<"L1">
// CHECK-NEXT: %[[V15:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 512 bytes at 512 : !ascend_kernel.buffer<"L1">
// CHECK-NEXT: %[[V16:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 512 bytes at 1024 : !ascend_kernel.buffer<"L1">
// CHECK-NEXT: %[[V17:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 512 bytes at 1536 : !ascend_kernel.buffer<"L1">
// CHECK-NEXT: %[[V18:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 512 bytes at 0 : !ascend_kernel.buffer<"L0A">
// CHECK-NEXT: %[[V19:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 512 bytes at 512 : !ascend_kernel.buffer<"L0A">
// CHECK-NEXT: %[[V20:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 512 bytes at 0 : !ascend_kernel.buffer<"L0B">
// CHECK-NEXT: %[[V21:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 512 bytes at 512 : !ascend_kernel.buffer<"L0B">
// CHECK-NEXT: %[[V22:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 1024 bytes at 0 : !ascend_kernel.buffer<"L0C">
// CHECK-NEXT: %[[V23:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 1024 bytes at 1024 : !ascend_kernel.buffer<"L0C">
// CHECK-NEXT: %[[V24:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 64 bytes at 2048 : !ascend_kernel.buffer<"L1">
// CHECK-NEXT: %[[V25:[A-Za-z0-9_.$-]+]] = ascend_kernel.alloc 64 bytes at 0 : !ascend_kernel.buffer<"BT">
// CHECK-NEXT: ascend_kernel.scalar 32 instrs
// CHECK-NEXT: ascend_kernel.set_flag "MTE1" -> "MTE2", 2
// CHECK-NEXT: ascend_kernel.scalar 18 instrs
// CHECK-NEXT: ascend_kernel.wait_flag "MTE1" -> "MTE2", 2
// CHECK-NEXT: ascend_kernel.copy "MTE2" %[[V11]] -> %[[V16]], 512 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"L1">
// CHECK-NEXT: ascend_kernel.set_flag "MTE2" -> "MTE1", 2
// CHECK-NEXT: ascend_kernel.wait_flag "MTE2" -> "MTE1", 2
// CHECK-NEXT: ascend_kernel.set_flag "MTE1" -> "MTE2", 4
// CHECK-NEXT: ascend_kernel.wait_flag "MTE1" -> "MTE2", 4
// CHECK-NEXT: ascend_kernel.copy "MTE2" %[[V12]] -> %[[V24]], 64 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"L1">
// CHECK-NEXT: ascend_kernel.set_flag "MTE2" -> "MTE1", 4
// CHECK-NEXT: ascend_kernel.wait_flag "MTE2" -> "MTE1", 4
// CHECK-NEXT: ascend_kernel.set_flag "M" -> "MTE1", 4
// CHECK-NEXT: ascend_kernel.wait_flag "M" -> "MTE1", 4
// CHECK-NEXT: ascend_kernel.copy "MTE1" %[[V24]] -> %[[V25]], 64 bytes : !ascend_kernel.buffer<"L1"> -> !ascend_kernel.buffer<"BT">
// CHECK-NEXT: ascend_kernel.set_flag "MTE1" -> "M", 4
// CHECK-NEXT: ascend_kernel.wait_flag "MTE1" -> "M", 4
// CHECK-NEXT: ascend_kernel.set_flag "MTE1" -> "MTE2", 0
// CHECK-NEXT: ascend_kernel.set_flag "MTE1" -> "MTE2", 1
// CHECK-NEXT: ascend_kernel.set_flag "M" -> "MTE1", 0
// CHECK-NEXT: ascend_kernel.set_flag "M" -> "MTE1", 1
// CHECK-NEXT: ascend_kernel.set_flag "FIX" -> "M", 0
// CHECK-NEXT: ascend_kernel.scalar 12 instrs
// CHECK-NEXT: ascend_kernel.wait_flag "FIX" -> "M", 0
// CHECK-NEXT: ascend_kernel.scalar 10 instrs
// CHECK-NEXT: ascend_kernel.wait_flag "MTE1" -> "MTE2", 0
// CHECK-NEXT: ascend_kernel.copy "MTE2" %[[V10]] -> %[[V14]], 512 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"L1">
// CHECK-NEXT: ascend_kernel.set_flag "MTE2" -> "MTE1", 0
// CHECK-NEXT: ascend_kernel.wait_flag "MTE2" -> "MTE1", 0
// CHECK-NEXT: ascend_kernel.scalar 8 instrs
// CHECK-NEXT: ascend_kernel.wait_flag "M" -> "MTE1", 0
// CHECK-NEXT: ascend_kernel.copy "MTE1" %[[V14]] -> %[[V18]], 512 bytes : !ascend_kernel.buffer<"L1"> -> !ascend_kernel.buffer<"L0A">
// CHECK-NEXT: ascend_kernel.copy "MTE1" %[[V16]] -> %[[V20]], 512 bytes : !ascend_kernel.buffer<"L1"> -> !ascend_kernel.buffer<"L0B">
// CHECK-NEXT: ascend_kernel.set_flag "MTE1" -> "M", 0
// CHECK-NEXT: ascend_kernel.wait_flag "MTE1" -> "M", 0
// CHECK-NEXT: ascend_kernel.mmad %[[V18]], %[[V20]] -> %[[V22]], 16 x 8 x 16, f32 : !ascend_kernel.buffer<"L0A">, !ascend_kernel.buffer<"L0B"> -> !ascend_kernel.buffer<"L0C">
// CHECK-NEXT: ascend_kernel.set_flag "M" -> "MTE1", 0
// CHECK-NEXT: ascend_kernel.set_flag "MTE1" -> "MTE2", 0
// CHECK-NEXT: ascend_kernel.set_flag "M" -> "FIX", 0
// CHECK-NEXT: ascend_kernel.wait_flag "M" -> "FIX", 0
// CHECK-NEXT: ascend_kernel.copy "FIX" %[[V22]] -> %[[V13]], 1024 bytes : !ascend_kernel.buffer<"L0C"> -> !ascend_kernel.buffer<"GM">
// CHECK-NEXT: ascend_kernel.set_flag "FIX" -> "MTE2", 1 core "vector"
// CHECK-NEXT: ascend_kernel.wait_flag "FIX" -> "MTE2", 1 core "vector"
// CHECK-NEXT: ascend_kernel.set_flag "FIX" -> "M", 0
// CHECK-NEXT: ascend_kernel.wait_flag "FIX" -> "M", 0
// CHECK-NEXT: ascend_kernel.wait_flag "MTE1" -> "MTE2", 0
// CHECK-NEXT: ascend_kernel.wait_flag "MTE1" -> "MTE2", 1
// CHECK-NEXT: ascend_kernel.wait_flag "M" -> "MTE1", 0
// CHECK-NEXT: ascend_kernel.wait_flag "M" -> "MTE1", 1
// CHECK-NEXT: ascend_kernel.set_flag "MTE1" -> "MTE2", 2
// CHECK-NEXT: ascend_kernel.wait_flag "MTE1" -> "MTE2", 2
// CHECK-NEXT: }
// CHECK-NEXT: ascend_kernel.kernel @te_trans_data_1 attributes {op_types = ["TransData"], block_dim = 4 : i64, core_type = "VectorCore", impl_mode = "high_performance", tiling = {rows = 32 : i64, row = 1 : i64, elements = 32 : i64, block_rows = 8 : i64, tile_rows = 8 : i64, tiles = 1 : i64, ub_bytes = 320 : i64}, args = [#ascend_kernel.arg<"input", f32, array<i64: 1, 1, 4, 4, 8>, "NC1HWC0">, #ascend_kernel.arg<"output", f32, array<i64: 1, 2, 4, 4>, "NCHW">], soc = "Ascend910B1", workspace = 0 : i64} compute {
// CHECK-NEXT: ^bb0(%[[V6]]: tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>):
// CHECK-NEXT: %[[V7]] = ascend_graph.trans_data %[[V6]] {src_format = "NC1HWC0", dst_format = "NCHW", name = "Conv2D_0/TransData_NCHW"} : (tensor<1x1x4x4x8xf32, #ascend_graph.format<"NC1HWC0", "NCHW", array<i64: 1, 2, 4, 4>>>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT: ascend_kernel.yield %[[V7]] : tensor<1x2x4x4xf32>
// CHECK-NEXT: } program {
// CHECK-NEXT: ^bb0(%[[V8]]: !ascend_kernel.buffer<"GM">, %[[V9]]: !ascend_kernel.buffer<"GM">):
// CHECK-NEXT: %[[V10]] = ascend_kernel.alloc 128 bytes at 0 : !ascend_kernel.buffer<"UB">
// CHECK-NEXT: %[[V11]] = ascend_kernel.alloc 128 bytes at 128 : !ascend_kernel.buffer<"UB">
// CHECK-NEXT: %[[V12]] = ascend_kernel.alloc 32 bytes at 256 : !ascend_kernel.buffer<"UB">
// CHECK-NEXT: %[[V13]] = ascend_kernel.alloc 32 bytes at 288 : !ascend_kernel.buffer<"UB">
// CHECK-NEXT: ascend_kernel.scalar 32 instrs
// CHECK-NEXT: ascend_kernel.set_flag "V" -> "MTE2", 0
// CHECK-NEXT: ascend_kernel.set_flag "MTE3" -> "V", 0
// CHECK-NEXT: ascend_kernel.scalar 9 instrs
// CHECK-NEXT: ascend_kernel.wait_flag "V" -> "MTE2", 0
// CHECK-NEXT: ascend_kernel.copy "MTE2" %[[V8]] -> %[[V10]], 128 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
// CHECK-NEXT: ascend_kernel.set_flag "MTE2" -> "V", 0
// CHECK-NEXT: ascend_kernel.wait_flag "MTE2" -> "V", 0
// CHECK-NEXT: ascend_kernel.wait_flag "MTE3" -> "V", 0
// CHECK-NEXT: ascend_kernel.vec "VNCHWCONV" "UINT32_UINT32"(%[[V12]], %[[V10]]) x 8 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
// CHECK-NEXT: ascend_kernel.set_flag "V" -> "MTE2", 0
// CHECK-NEXT: ascend_kernel.set_flag "V" -> "MTE3", 0
// CHECK-NEXT: ascend_kernel.wait_flag "V" -> "MTE3", 0
// CHECK-NEXT: ascend_kernel.copy "MTE3" %[[V12]] -> %[[V9]], 32 bytes : !ascend_kernel.buffer<"UB"> -> !ascend_kernel.buffer<"GM">
// CHECK-NEXT: ascend_kernel.set_flag "MTE3" -> "V", 0
// CHECK-NEXT: ascend_kernel.wait_flag "V" -> "MTE2", 0
// CHECK-NEXT: ascend_kernel.wait_flag "MTE3" -> "V", 0
// CHECK-NEXT: }
// CHECK-NEXT: }
