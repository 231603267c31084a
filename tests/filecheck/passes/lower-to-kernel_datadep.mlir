// A data-dependent chain: precision selection places every op reading NonZero's result (directly or
// through another such op) on the AI CPU, and each lowers to an AiCpu kernel whose arguments declare the
// upper bounds of its data-dependent values (the shape rule on its operands' bounds: 12 of the 3x4 input).
// RUN: ge-opt %s -p 'precision-selection{soc_version="Ascend910B1"},lower-to-kernel{soc_version="Ascend910B1"}' | filecheck %s

builtin.module {
  ascend_graph.graph @chain {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<3x4xf32>
    %nz = ascend_graph.non_zero %x {name = "nz"} : (tensor<3x4xf32>) -> tensor<2x?xi64>
    %t = ascend_graph.transpose_d %nz {perm = array<i64: 1, 0>, name = "t"} : (tensor<2x?xi64>) -> tensor<?x2xi64>
    %g = ascend_graph.gather_nd %x, %t {batch_dims = 0 : i64, name = "g"} : (tensor<3x4xf32>, tensor<?x2xi64>) -> tensor<?xf32>
    %y = ascend_graph.relu %g {name = "relu"} : (tensor<?xf32>) -> tensor<?xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<?xf32>
  }
}

// CHECK:      %nz = ascend_kernel.launch @aicpu_non_zero_0(%x) {names = ["nz"]} : (tensor<3x4xf32>) -> tensor<2x?xi64>
// CHECK-NEXT: %t = ascend_kernel.launch @aicpu_transpose_d_0(%nz) {names = ["t"]} : (tensor<2x?xi64>) -> tensor<?x2xi64>
// CHECK-NEXT: %g = ascend_kernel.launch @aicpu_gather_nd_0(%x, %t) {names = ["g"]} : (tensor<3x4xf32>, tensor<?x2xi64>) -> tensor<?xf32>
// CHECK-NEXT: %y = ascend_kernel.launch @aicpu_relu_0(%g) {names = ["relu"]} : (tensor<?xf32>) -> tensor<?xf32>
// CHECK:      ascend_kernel.kernel @aicpu_non_zero_0 {{.*}} core_type = "AiCpu", {{.*}} args = [#ascend_kernel.arg<"input", f32, array<i64: 3, 4>, "ND">, #ascend_kernel.arg<"output", i64, array<i64: 2, 12>, "ND">]
// CHECK:      ascend_kernel.kernel @aicpu_transpose_d_0 {{.*}} core_type = "AiCpu", {{.*}} args = [#ascend_kernel.arg<"input", i64, array<i64: 2, 12>, "ND">, #ascend_kernel.arg<"output", i64, array<i64: 12, 2>, "ND">]
// CHECK:      ascend_graph.transpose_d %{{.*}} {_precision_reason = "reads the data-dependent result of NonZero 'nz': AI CPU", _engine = "DNN_VM_AICPU"
// CHECK:      ascend_kernel.kernel @aicpu_gather_nd_0 {{.*}} args = [#ascend_kernel.arg<"input", f32, array<i64: 3, 4>, "ND">, #ascend_kernel.arg<"input", i64, array<i64: 12, 2>, "ND">, #ascend_kernel.arg<"output", f32, array<i64: 12>, "ND">]
// CHECK:      ascend_kernel.kernel @aicpu_relu_0 {{.*}} args = [#ascend_kernel.arg<"input", f32, array<i64: 12>, "ND">, #ascend_kernel.arg<"output", f32, array<i64: 12>, "ND">]
// CHECK:      ascend_graph.relu %{{.*}} {_precision_reason = "reads the data-dependent result of GatherNd 'g': AI CPU", _engine = "DNN_VM_AICPU"
