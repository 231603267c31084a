// The engine partition: an op on the AI CPU engine (`_engine = "DNN_VM_AICPU"`) between two AI Core ops
// stays out of the UB scope AutomaticUbFusion would make of the three, and lowers to an AiCpu kernel of its
// own (one block, no tiling, an empty program), the AI Core ops to a kernel each.
// RUN: ge-opt %s -p 'AutomaticUbFusion,lower-to-kernel{soc_version="Ascend910B1"}' | filecheck %s

builtin.module {
  ascend_graph.graph @partition {
    %0 = ascend_graph.data {index = 0 : i64, name = "input_0"} : tensor<4x16xf32>
    %1 = ascend_graph.relu %0 {name = "Relu_0"} : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %2 = ascend_graph.mul %1, %1 {_engine = "DNN_VM_AICPU", name = "Mul_0"} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    %3 = ascend_graph.add %2, %0 {name = "Add_0"} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    ascend_graph.net_output %3 {names = ["out_0"]} : tensor<4x16xf32>
  }
}

// CHECK:      %1 = ascend_kernel.launch @te_relu_0(%0) {names = ["Relu_0"]}
// CHECK-NEXT: %2 = ascend_kernel.launch @aicpu_mul_0(%1) {names = ["Mul_0"]}
// CHECK-NEXT: %3 = ascend_kernel.launch @te_add_0(%2, %0) {names = ["Add_0"]}
// CHECK:      ascend_kernel.kernel @aicpu_mul_0 attributes {op_types = ["Mul"], block_dim = 1 : i64, core_type = "AiCpu", impl_mode = "high_performance", tiling = {},
// CHECK:      ascend_graph.mul %{{.*}}, %{{.*}} {_engine = "DNN_VM_AICPU", name = "Mul_0"}
// CHECK:      } program {
// CHECK-NEXT: ^bb0(%{{.*}}: !ascend_kernel.buffer<"GM">, %{{.*}}: !ascend_kernel.buffer<"GM">):
// CHECK-NEXT: }
// CHECK-NOT:  _fusion_scope
