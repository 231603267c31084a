// What the ascend_kernel verifier refuses on any SoC (whether a kernel fits its SoC's memories, paths and
// event ids is verify_fits, run by lower-to-kernel and the backend; tests/test_ascend_kernel.py covers it).
// RUN: ge-opt %s --split-input-file --verify-diagnostics | filecheck %s

builtin.module {
  ascend_graph.graph @main {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<4x32xf16>
    %y = ascend_kernel.launch @add(%x, %x) {names = ["add0"]} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_graph.net_output %y {names = ["y"]} : tensor<4x32xf16>
  }
  ascend_kernel.kernel @add attributes {op_types = ["Add"], block_dim = 1 : i64, core_type = "AiCore",
      impl_mode = "high_performance", tiling = {tile = 128 : i64}, soc = "Ascend910A", workspace = 0 : i64,
      args = [#ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">, #ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">,
              #ascend_kernel.arg<"output", f16, array<i64: 4, 32>, "ND">]} compute {
  ^bb0(%a: tensor<4x32xf16>, %b: tensor<4x32xf16>):
    %s = ascend_graph.add %a, %b {name = "add0"} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_kernel.yield %s : tensor<4x32xf16>
  } program {
  ^bb0(%ga: !ascend_kernel.buffer<"GM">, %gb: !ascend_kernel.buffer<"GM">, %gy: !ascend_kernel.buffer<"GM">):
    %u0 = ascend_kernel.alloc 256 bytes at 0 : !ascend_kernel.buffer<"UB">
    %u1 = ascend_kernel.alloc 256 bytes at 256 : !ascend_kernel.buffer<"UB">
    ascend_kernel.scalar 32 instrs
    ascend_kernel.set_flag "V" -> "MTE2", 0
    ascend_kernel.loop 2 times {
      ascend_kernel.wait_flag "V" -> "MTE2", 0
      ascend_kernel.copy "MTE2" %ga -> %u0, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.copy "MTE2" %gb -> %u1, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "MTE2" -> "V", 1
      ascend_kernel.wait_flag "MTE2" -> "V", 1
      ascend_kernel.vec "VADD" "FP16_FP16_FP16"(%u0, %u0, %u1) x 128 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "V" -> "MTE3", 0
      ascend_kernel.wait_flag "V" -> "MTE3", 0
      ascend_kernel.copy "MTE3" %u0 -> %gy, 256 bytes : !ascend_kernel.buffer<"UB"> -> !ascend_kernel.buffer<"GM">
      
    }
    ascend_kernel.wait_flag "V" -> "MTE2", 0
  }
}

// -----

builtin.module {
  ascend_graph.graph @main {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<4x32xf16>
    %y = ascend_kernel.launch @add(%x, %x) {names = ["add0"]} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_graph.net_output %y {names = ["y"]} : tensor<4x32xf16>
  }
  ascend_kernel.kernel @add attributes {op_types = ["Add"], block_dim = 1 : i64, core_type = "AiCore",
      impl_mode = "high_performance", tiling = {tile = 128 : i64}, soc = "Ascend910A", workspace = 0 : i64,
      args = [#ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">, #ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">,
              #ascend_kernel.arg<"output", f16, array<i64: 4, 32>, "ND">]} compute {
  ^bb0(%a: tensor<4x32xf16>, %b: tensor<4x32xf16>):
    %s = ascend_graph.add %a, %b {name = "add0"} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_kernel.yield %s : tensor<4x32xf16>
  } program {
  ^bb0(%ga: !ascend_kernel.buffer<"GM">, %gb: !ascend_kernel.buffer<"GM">, %gy: !ascend_kernel.buffer<"GM">):
    %u0 = ascend_kernel.alloc 256 bytes at 0 : !ascend_kernel.buffer<"UB">
    %u1 = ascend_kernel.alloc 256 bytes at 256 : !ascend_kernel.buffer<"UB">
    ascend_kernel.scalar 32 instrs
    ascend_kernel.set_flag "V" -> "MTE2", 0
    ascend_kernel.loop 2 times {
      ascend_kernel.wait_flag "V" -> "MTE2", 0
      ascend_kernel.copy "MTE2" %ga -> %u0, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.copy "MTE2" %gb -> %u1, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "MTE2" -> "V", 1
      ascend_kernel.wait_flag "MTE2" -> "V", 1
      ascend_kernel.vec "VADD" "FP16_FP16_FP16"(%u0, %u0, %u1) x 128 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "V" -> "MTE3", 0
      ascend_kernel.wait_flag "V" -> "MTE3", 0
      ascend_kernel.copy "MTE3" %u0 -> %gy, 256 bytes : !ascend_kernel.buffer<"UB"> -> !ascend_kernel.buffer<"GM">
      ascend_kernel.set_flag "V" -> "MTE2", 0
    }
    
  }
}

// -----

builtin.module {
  ascend_graph.graph @main {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<4x32xf16>
    %y = ascend_kernel.launch @add(%x, %x) {names = ["add0"]} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_graph.net_output %y {names = ["y"]} : tensor<4x32xf16>
  }
  ascend_kernel.kernel @add attributes {op_types = ["Add"], block_dim = 1 : i64, core_type = "AiCore",
      impl_mode = "high_performance", tiling = {tile = 128 : i64}, soc = "Ascend910A", workspace = 0 : i64,
      args = [#ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">, #ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">,
              #ascend_kernel.arg<"output", f16, array<i64: 4, 32>, "ND">]} compute {
  ^bb0(%a: tensor<4x32xf16>, %b: tensor<4x32xf16>):
    %s = ascend_graph.add %a, %b {name = "add0"} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_kernel.yield %s : tensor<4x32xf16>
  } program {
  ^bb0(%ga: !ascend_kernel.buffer<"GM">, %gb: !ascend_kernel.buffer<"GM">, %gy: !ascend_kernel.buffer<"GM">):
    %u0 = ascend_kernel.alloc 256 bytes at 0 : !ascend_kernel.buffer<"UB">
    %u1 = ascend_kernel.alloc 256 bytes at 256 : !ascend_kernel.buffer<"UB">
    ascend_kernel.scalar 32 instrs
    ascend_kernel.set_flag "V" -> "MTE2", 0
    ascend_kernel.loop 2 times {
      ascend_kernel.wait_flag "V" -> "MTE2", 0
      ascend_kernel.copy "MTE2" %ga -> %u0, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.copy "MTE2" %gb -> %u1, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "MTE2" -> "V", 1
      ascend_kernel.wait_flag "MTE2" -> "V", 1
      ascend_kernel.vec "VADD" "FP16_FP16_FP16"(%u0, %u0, %u1) x 128 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "V" -> "MTE3", 0
      ascend_kernel.wait_flag "V" -> "MTE3", 0
      ascend_kernel.copy "MTE3" %u0 -> %gy, 256 bytes : !ascend_kernel.buffer<"UB"> -> !ascend_kernel.buffer<"GM">
      ascend_kernel.set_flag "V" -> "MTE2", 0
    }
    ascend_kernel.wait_flag "V" -> "MTE2", 0
    ascend_kernel.wait_flag "V" -> "MTE2", 0
  }
}

// -----

builtin.module {
  ascend_graph.graph @main {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<4x32xf16>
    %y = ascend_kernel.launch @add(%x, %x) {names = ["add0"]} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_graph.net_output %y {names = ["y"]} : tensor<4x32xf16>
  }
  ascend_kernel.kernel @add attributes {op_types = ["Add"], block_dim = 1 : i64, core_type = "AiCore",
      impl_mode = "high_performance", tiling = {tile = 128 : i64}, soc = "Ascend910A", workspace = 0 : i64,
      args = [#ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">, #ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">,
              #ascend_kernel.arg<"output", f16, array<i64: 4, 32>, "ND">]} compute {
  ^bb0(%a: tensor<4x32xf16>, %b: tensor<4x32xf16>):
    %s = ascend_graph.add %a, %b {name = "add0"} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_kernel.yield %s : tensor<4x32xf16>
  } program {
  ^bb0(%ga: !ascend_kernel.buffer<"GM">, %gb: !ascend_kernel.buffer<"GM">, %gy: !ascend_kernel.buffer<"GM">):
    %u0 = ascend_kernel.alloc 256 bytes at 0 : !ascend_kernel.buffer<"UB">
    %u1 = ascend_kernel.alloc 256 bytes at 256 : !ascend_kernel.buffer<"UB">
    ascend_kernel.scalar 32 instrs
    ascend_kernel.set_flag "V" -> "MTE2", 0
    ascend_kernel.loop 2 times {
      ascend_kernel.wait_flag "V" -> "MTE2", 0
      ascend_kernel.copy "MTE2" %ga -> %u0, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.copy "MTE2" %gb -> %u1, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "MTE2" -> "V", 1
      ascend_kernel.wait_flag "MTE2" -> "V", 1
      ascend_kernel.vec "VADD" "FP16_FP16_FP16"(%u0, %u0, %u1) x 128 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "V" -> "MTE3", 0
      ascend_kernel.wait_flag "V" -> "MTE3", 0
      ascend_kernel.copy "MTE3" %u0 -> %gy, 256 bytes : !ascend_kernel.buffer<"UB"> -> !ascend_kernel.buffer<"GM">
      ascend_kernel.set_flag "V" -> "MTE2", 0
      ascend_kernel.set_flag "V" -> "MTE2", 0
    }
    ascend_kernel.wait_flag "V" -> "MTE2", 0
  }
}

// -----

builtin.module {
  ascend_graph.graph @main {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<4x32xf16>
    %y = ascend_kernel.launch @add(%x) {names = ["add0"]} : (tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_graph.net_output %y {names = ["y"]} : tensor<4x32xf16>
  }
  ascend_kernel.kernel @add attributes {op_types = ["Add"], block_dim = 1 : i64, core_type = "AiCore",
      impl_mode = "high_performance", tiling = {tile = 128 : i64}, soc = "Ascend910A", workspace = 0 : i64,
      args = [#ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">, #ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">,
              #ascend_kernel.arg<"output", f16, array<i64: 4, 32>, "ND">]} compute {
  ^bb0(%a: tensor<4x32xf16>, %b: tensor<4x32xf16>):
    %s = ascend_graph.add %a, %b {name = "add0"} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_kernel.yield %s : tensor<4x32xf16>
  } program {
  ^bb0(%ga: !ascend_kernel.buffer<"GM">, %gb: !ascend_kernel.buffer<"GM">, %gy: !ascend_kernel.buffer<"GM">):
    %u0 = ascend_kernel.alloc 256 bytes at 0 : !ascend_kernel.buffer<"UB">
    %u1 = ascend_kernel.alloc 256 bytes at 256 : !ascend_kernel.buffer<"UB">
    ascend_kernel.scalar 32 instrs
    ascend_kernel.set_flag "V" -> "MTE2", 0
    ascend_kernel.loop 2 times {
      ascend_kernel.wait_flag "V" -> "MTE2", 0
      ascend_kernel.copy "MTE2" %ga -> %u0, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.copy "MTE2" %gb -> %u1, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "MTE2" -> "V", 1
      ascend_kernel.wait_flag "MTE2" -> "V", 1
      ascend_kernel.vec "VADD" "FP16_FP16_FP16"(%u0, %u0, %u1) x 128 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "V" -> "MTE3", 0
      ascend_kernel.wait_flag "V" -> "MTE3", 0
      ascend_kernel.copy "MTE3" %u0 -> %gy, 256 bytes : !ascend_kernel.buffer<"UB"> -> !ascend_kernel.buffer<"GM">
      ascend_kernel.set_flag "V" -> "MTE2", 0
    }
    ascend_kernel.wait_flag "V" -> "MTE2", 0
  }
}

// -----

builtin.module {
  ascend_graph.graph @main {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<4x32xf16>
    %y = ascend_kernel.launch @missing(%x, %x) {names = ["add0"]} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_graph.net_output %y {names = ["y"]} : tensor<4x32xf16>
  }
  ascend_kernel.kernel @add attributes {op_types = ["Add"], block_dim = 1 : i64, core_type = "AiCore",
      impl_mode = "high_performance", tiling = {tile = 128 : i64}, soc = "Ascend910A", workspace = 0 : i64,
      args = [#ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">, #ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">,
              #ascend_kernel.arg<"output", f16, array<i64: 4, 32>, "ND">]} compute {
  ^bb0(%a: tensor<4x32xf16>, %b: tensor<4x32xf16>):
    %s = ascend_graph.add %a, %b {name = "add0"} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_kernel.yield %s : tensor<4x32xf16>
  } program {
  ^bb0(%ga: !ascend_kernel.buffer<"GM">, %gb: !ascend_kernel.buffer<"GM">, %gy: !ascend_kernel.buffer<"GM">):
    %u0 = ascend_kernel.alloc 256 bytes at 0 : !ascend_kernel.buffer<"UB">
    %u1 = ascend_kernel.alloc 256 bytes at 256 : !ascend_kernel.buffer<"UB">
    ascend_kernel.scalar 32 instrs
    ascend_kernel.set_flag "V" -> "MTE2", 0
    ascend_kernel.loop 2 times {
      ascend_kernel.wait_flag "V" -> "MTE2", 0
      ascend_kernel.copy "MTE2" %ga -> %u0, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.copy "MTE2" %gb -> %u1, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "MTE2" -> "V", 1
      ascend_kernel.wait_flag "MTE2" -> "V", 1
      ascend_kernel.vec "VADD" "FP16_FP16_FP16"(%u0, %u0, %u1) x 128 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "V" -> "MTE3", 0
      ascend_kernel.wait_flag "V" -> "MTE3", 0
      ascend_kernel.copy "MTE3" %u0 -> %gy, 256 bytes : !ascend_kernel.buffer<"UB"> -> !ascend_kernel.buffer<"GM">
      ascend_kernel.set_flag "V" -> "MTE2", 0
    }
    ascend_kernel.wait_flag "V" -> "MTE2", 0
  }
}

// -----

builtin.module {
  ascend_graph.graph @main {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<4x32xf16>
    %y = ascend_kernel.launch @add(%x, %x) {names = ["add0"]} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_graph.net_output %y {names = ["y"]} : tensor<4x32xf16>
  }
  ascend_kernel.kernel @add attributes {op_types = ["Add"], block_dim = 0 : i64, core_type = "AiCore",
      impl_mode = "high_performance", tiling = {tile = 128 : i64}, soc = "Ascend910A", workspace = 0 : i64,
      args = [#ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">, #ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">,
              #ascend_kernel.arg<"output", f16, array<i64: 4, 32>, "ND">]} compute {
  ^bb0(%a: tensor<4x32xf16>, %b: tensor<4x32xf16>):
    %s = ascend_graph.add %a, %b {name = "add0"} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_kernel.yield %s : tensor<4x32xf16>
  } program {
  ^bb0(%ga: !ascend_kernel.buffer<"GM">, %gb: !ascend_kernel.buffer<"GM">, %gy: !ascend_kernel.buffer<"GM">):
    %u0 = ascend_kernel.alloc 256 bytes at 0 : !ascend_kernel.buffer<"UB">
    %u1 = ascend_kernel.alloc 256 bytes at 256 : !ascend_kernel.buffer<"UB">
    ascend_kernel.scalar 32 instrs
    ascend_kernel.set_flag "V" -> "MTE2", 0
    ascend_kernel.loop 2 times {
      ascend_kernel.wait_flag "V" -> "MTE2", 0
      ascend_kernel.copy "MTE2" %ga -> %u0, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.copy "MTE2" %gb -> %u1, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "MTE2" -> "V", 1
      ascend_kernel.wait_flag "MTE2" -> "V", 1
      ascend_kernel.vec "VADD" "FP16_FP16_FP16"(%u0, %u0, %u1) x 128 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "V" -> "MTE3", 0
      ascend_kernel.wait_flag "V" -> "MTE3", 0
      ascend_kernel.copy "MTE3" %u0 -> %gy, 256 bytes : !ascend_kernel.buffer<"UB"> -> !ascend_kernel.buffer<"GM">
      ascend_kernel.set_flag "V" -> "MTE2", 0
    }
    ascend_kernel.wait_flag "V" -> "MTE2", 0
  }
}

// -----

builtin.module {
  ascend_graph.graph @main {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<4x32xf16>
    %y = ascend_kernel.launch @add(%x, %x) {names = ["add0"]} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_graph.net_output %y {names = ["y"]} : tensor<4x32xf16>
  }
  ascend_kernel.kernel @add attributes {op_types = ["Add"], block_dim = 1 : i64, core_type = "TensorCore",
      impl_mode = "high_performance", tiling = {tile = 128 : i64}, soc = "Ascend910A", workspace = 0 : i64,
      args = [#ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">, #ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">,
              #ascend_kernel.arg<"output", f16, array<i64: 4, 32>, "ND">]} compute {
  ^bb0(%a: tensor<4x32xf16>, %b: tensor<4x32xf16>):
    %s = ascend_graph.add %a, %b {name = "add0"} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_kernel.yield %s : tensor<4x32xf16>
  } program {
  ^bb0(%ga: !ascend_kernel.buffer<"GM">, %gb: !ascend_kernel.buffer<"GM">, %gy: !ascend_kernel.buffer<"GM">):
    %u0 = ascend_kernel.alloc 256 bytes at 0 : !ascend_kernel.buffer<"UB">
    %u1 = ascend_kernel.alloc 256 bytes at 256 : !ascend_kernel.buffer<"UB">
    ascend_kernel.scalar 32 instrs
    ascend_kernel.set_flag "V" -> "MTE2", 0
    ascend_kernel.loop 2 times {
      ascend_kernel.wait_flag "V" -> "MTE2", 0
      ascend_kernel.copy "MTE2" %ga -> %u0, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.copy "MTE2" %gb -> %u1, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "MTE2" -> "V", 1
      ascend_kernel.wait_flag "MTE2" -> "V", 1
      ascend_kernel.vec "VADD" "FP16_FP16_FP16"(%u0, %u0, %u1) x 128 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "V" -> "MTE3", 0
      ascend_kernel.wait_flag "V" -> "MTE3", 0
      ascend_kernel.copy "MTE3" %u0 -> %gy, 256 bytes : !ascend_kernel.buffer<"UB"> -> !ascend_kernel.buffer<"GM">
      ascend_kernel.set_flag "V" -> "MTE2", 0
    }
    ascend_kernel.wait_flag "V" -> "MTE2", 0
  }
}

// -----

builtin.module {
  ascend_graph.graph @main {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<4x32xf16>
    %y = ascend_kernel.launch @add(%x, %x) {names = ["add0"]} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_graph.net_output %y {names = ["y"]} : tensor<4x32xf16>
  }
  ascend_kernel.kernel @add attributes {op_types = ["Add"], block_dim = 1 : i64, core_type = "AiCore",
      impl_mode = "high_performance", tiling = {tile = 128 : i64}, soc = "Ascend910A", workspace = 0 : i64,
      args = [#ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">, #ascend_kernel.arg<"input", f16, array<i64: 4, 32>, "ND">,
              #ascend_kernel.arg<"output", f16, array<i64: 4, 32>, "ND">]} compute {
  ^bb0(%a: tensor<4x32xf16>, %b: tensor<4x32xf16>):
    %s = ascend_graph.add %a, %b {name = "add0"} : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x32xf16>
    ascend_kernel.yield %s : tensor<4x32xf16>
  } program {
  ^bb0(%ga: !ascend_kernel.buffer<"GM">, %gb: !ascend_kernel.buffer<"GM">, %gy: !ascend_kernel.buffer<"GM">):
    %u0 = ascend_kernel.alloc 256 bytes at 0 : !ascend_kernel.buffer<"UB">
    %u1 = ascend_kernel.alloc 256 bytes at 256 : !ascend_kernel.buffer<"UB">
    ascend_kernel.scalar 32 instrs
    ascend_kernel.set_flag "MTE3" -> "V", 2 core "cube"
    ascend_kernel.set_flag "V" -> "MTE2", 0
    ascend_kernel.loop 2 times {
      ascend_kernel.wait_flag "V" -> "MTE2", 0
      ascend_kernel.copy "MTE2" %ga -> %u0, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.copy "MTE2" %gb -> %u1, 256 bytes : !ascend_kernel.buffer<"GM"> -> !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "MTE2" -> "V", 1
      ascend_kernel.wait_flag "MTE2" -> "V", 1
      ascend_kernel.vec "VADD" "FP16_FP16_FP16"(%u0, %u0, %u1) x 128 : !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">, !ascend_kernel.buffer<"UB">
      ascend_kernel.set_flag "V" -> "MTE3", 0
      ascend_kernel.wait_flag "V" -> "MTE3", 0
      ascend_kernel.copy "MTE3" %u0 -> %gy, 256 bytes : !ascend_kernel.buffer<"UB"> -> !ascend_kernel.buffer<"GM">
      
    }
    ascend_kernel.wait_flag "V" -> "MTE2", 0
  }
}


// CHECK: in the input: kernel @add: a loop body must leave the flags as it found them; it changes V -> MTE2 #0
// CHECK: // {{-----}}
// CHECK: in the input: kernel @add: the program ends with flags set and never waited for: V -> MTE2 #0
// CHECK: // {{-----}}
// CHECK: in the input: kernel @add: wait_flag V -> MTE2 #0 has no set_flag before it
// CHECK: // {{-----}}
// CHECK: in the input: kernel @add: set_flag V -> MTE2 #0 while it is already set
// CHECK: // {{-----}}
// CHECK: in the input: launch of @add: its operand and result types do not match the kernel's arguments
// CHECK: // {{-----}}
// CHECK: in the input: launch of 'missing': no such ascend_kernel.kernel
// CHECK: // {{-----}}
// CHECK: in the input: kernel @add: block_dim must be >= 1 and workspace >= 0
// CHECK: // {{-----}}
// CHECK: in the input: kernel @add: core_type 'TensorCore' is not one of AiCore, VectorCore
// CHECK: // {{-----}}
// CHECK: in the input: ascend_kernel.set_flag MTE3 -> V core 'cube': a core (cube, vector) names whose MTE2 a flag pairs with
