// Every kernel-making op is tiled for the LCM of the SoC's slice sizes (8 on an
// Ascend310P3: slices of 1, 2, 4 or 8 cores); views make no kernel and stay unmarked.
// Lowered, a Relu of two 16-element blocks of work still splits into 8 blocks (6 idle),
// so that it runs in whole waves on any slice.
// RUN: ge-opt %s -p 'virtual-instance{soc_version=Ascend310P3}' | filecheck %s
// RUN: ge-opt %s -p 'virtual-instance{soc_version=Ascend310P3},lower-to-kernel{soc_version=Ascend310P3}' | filecheck %s --check-prefix=LOWERED
// RUN: ge-opt %s -p 'lower-to-kernel{soc_version=Ascend310P3}' | filecheck %s --check-prefix=WHOLE

builtin.module {
  ascend_graph.graph @tiny {
    %0 = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x16xf16>
    %1 = ascend_graph.relu %0 {name = "relu"} : (tensor<2x16xf16>) -> tensor<2x16xf16>
    %2 = ascend_graph.reshape %1 {shape = array<i64: 32>, name = "flat"} : (tensor<2x16xf16>) -> tensor<32xf16>
    ascend_graph.net_output %2 {names = ["y"]} : tensor<32xf16>
  }
}

// CHECK: ascend_graph.relu %{{.*}} {_virtual_cores = 8 : i64, name = "relu"}
// CHECK: ascend_graph.reshape %{{.*}} {shape = array<i64: 32>, name = "flat"}

// LOWERED: ascend_kernel.kernel @te_relu_0 attributes {op_types = ["Relu"], block_dim = 8 : i64, core_type = "AiCore"
// WHOLE: ascend_kernel.kernel @te_relu_0 attributes {op_types = ["Relu"], block_dim = 2 : i64, core_type = "AiCore"
