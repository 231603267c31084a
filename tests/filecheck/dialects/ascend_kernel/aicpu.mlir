// AI CPU kernels round trip: core type AiCpu, one block, no tiling and an empty program, as
// lower-to-kernel makes them for Ascend910B1 (a uint32 Add, then a NonZero of data-dependent shape).
// RUN: ge-opt %s | filecheck %s
// RUN: ge-opt %s | ge-opt | filecheck %s
// RUN: ge-opt %s --print-op-generic | ge-opt | filecheck %s

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<4xui32>
    %s = ascend_kernel.launch @aicpu_add_0(%x) {names = ["add_u32"]} : (tensor<4xui32>) -> tensor<4xui32>
    %nz = ascend_kernel.launch @aicpu_non_zero_0(%s) {names = ["nonzero"]} : (tensor<4xui32>) -> tensor<1x?xi64>
    ascend_graph.net_output %nz {names = ["nz"]} : tensor<1x?xi64>
  }
  ascend_kernel.kernel @aicpu_add_0 attributes {op_types = ["Add"], block_dim = 1 : i64, core_type = "AiCpu", impl_mode = "high_performance", tiling = {}, args = [#ascend_kernel.arg<"input", ui32, array<i64: 4>, "ND">, #ascend_kernel.arg<"output", ui32, array<i64: 4>, "ND">], soc = "Ascend910B1", workspace = 0 : i64} compute {
  ^bb0(%0: tensor<4xui32>):
    %s_1 = ascend_graph.add %0, %0 {_engine = "DNN_VM_AICPU", name = "add_u32"} : (tensor<4xui32>, tensor<4xui32>) -> tensor<4xui32>
    ascend_kernel.yield %s_1 : tensor<4xui32>
  } program {
  ^bb0(%1: !ascend_kernel.buffer<"GM">, %2: !ascend_kernel.buffer<"GM">):
  }
  ascend_kernel.kernel @aicpu_non_zero_0 attributes {op_types = ["NonZero"], block_dim = 1 : i64, core_type = "AiCpu", impl_mode = "high_performance", tiling = {}, args = [#ascend_kernel.arg<"input", ui32, array<i64: 4>, "ND">, #ascend_kernel.arg<"output", i64, array<i64: 1, -9223372036854775808>, "ND">], soc = "Ascend910B1", workspace = 0 : i64} compute {
  ^bb0(%0: tensor<4xui32>):
    %nz_1 = ascend_graph.non_zero %0 {_engine = "DNN_VM_AICPU", name = "nonzero"} : (tensor<4xui32>) -> tensor<1x?xi64>
    ascend_kernel.yield %nz_1 : tensor<1x?xi64>
  } program {
  ^bb0(%1: !ascend_kernel.buffer<"GM">, %2: !ascend_kernel.buffer<"GM">):
  }
}

// CHECK:      %s = ascend_kernel.launch @aicpu_add_0(%x) {names = ["add_u32"]} : (tensor<4xui32>) -> tensor<4xui32>
// CHECK-NEXT: %nz = ascend_kernel.launch @aicpu_non_zero_0(%s) {names = ["nonzero"]} : (tensor<4xui32>) -> tensor<1x?xi64>
// CHECK:      ascend_kernel.kernel @aicpu_add_0 attributes {op_types = ["Add"], block_dim = 1 : i64, core_type = "AiCpu", impl_mode = "high_performance", tiling = {},
// CHECK:      ascend_graph.add %0, %0 {_engine = "DNN_VM_AICPU", name = "add_u32"}
// CHECK:      } program {
// CHECK-NEXT: ^bb0(%{{.*}}: !ascend_kernel.buffer<"GM">, %{{.*}}: !ascend_kernel.buffer<"GM">):
// CHECK-NEXT: }
// CHECK:      ascend_kernel.kernel @aicpu_non_zero_0 attributes {op_types = ["NonZero"], block_dim = 1 : i64, core_type = "AiCpu"
// CHECK-SAME: #ascend_kernel.arg<"output", i64, array<i64: 1, -9223372036854775808>, "ND">
// CHECK:      ascend_graph.non_zero %0 {_engine = "DNN_VM_AICPU", name = "nonzero"} : (tensor<4xui32>) -> tensor<1x?xi64>
