// Control flow (If, Loop, Scan): bodies with arguments and a yield, nested, in the custom and the
// generic form, parse back to the same IR.
// RUN: ge-opt %s | filecheck %s
// RUN: ge-opt %s | ge-opt | filecheck %s
// RUN: ge-opt %s --print-op-generic | ge-opt | filecheck %s

builtin.module {
  ascend_graph.graph @control_flow {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x3xf32>
    %n = ascend_graph.data {index = 1 : i64, name = "n"} : tensor<i64>
    %c = ascend_graph.data {index = 2 : i64, name = "c"} : tensor<i1>
    %out = ascend_graph.if %c(%x, %n) {name = "if"} : (tensor<i1>, tensor<2x3xf32>, tensor<i64>) -> tensor<?x3xf32> then {
    ^bb0(%x_1: tensor<2x3xf32>, %n_1: tensor<i64>):
      %true = ascend_graph.const {value = dense<true> : tensor<i1>, name = "if/true"} : tensor<i1>
      %y, %ys = ascend_graph.loop %n_1, %true(%x_1, %x_1) {captures = 1 : i64, name = "if/loop"} : (tensor<i64>, tensor<i1>, tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<?x2x3xf32>) {
      ^bb1(%i: tensor<i64>, %c_in: tensor<i1>, %y_in: tensor<2x3xf32>, %x_2: tensor<2x3xf32>):
        %y_out = ascend_graph.add %y_in, %x_2 {name = "if/loop/add"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
        ascend_graph.yield %c_in, %y_out, %y_out : tensor<i1>, tensor<2x3xf32>, tensor<2x3xf32>
      }
      ascend_graph.yield %y : tensor<2x3xf32>
    } else {
    ^bb2(%x_3: tensor<2x3xf32>, %n_2: tensor<i64>):
      %s0 = ascend_graph.const {value = dense<0.000000e+00> : tensor<2xf32>, name = "if/s0"} : tensor<2xf32>
      %s, %os = ascend_graph.scan(%s0, %x_3) {num_scan_inputs = 1 : i64, captures = 0 : i64, scan_input_axes = array<i64: 1>, scan_input_directions = array<i64: 1>, scan_output_axes = array<i64: 0>, scan_output_directions = array<i64: 0>, name = "if/scan"} : (tensor<2xf32>, tensor<2x3xf32>) -> (tensor<2xf32>, tensor<3x2xf32>) {
      ^bb3(%s_in: tensor<2xf32>, %xi: tensor<2xf32>):
        %s_out = ascend_graph.add %s_in, %xi {name = "if/scan/add"} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
        ascend_graph.yield %s_out, %s_out : tensor<2xf32>, tensor<2xf32>
      }
      %t = ascend_graph.transpose_d %os {perm = array<i64: 1, 0>, name = "if/transpose"} : (tensor<3x2xf32>) -> tensor<2x3xf32>
      ascend_graph.yield %t : tensor<2x3xf32>
    }
    ascend_graph.net_output %out {names = ["out"]} : tensor<?x3xf32>
  }
}

// CHECK:      %out = ascend_graph.if %c(%x, %n) {name = "if"} : (tensor<i1>, tensor<2x3xf32>, tensor<i64>) -> tensor<?x3xf32> then {
// CHECK-NEXT: ^{{.*}}(%x_1: tensor<2x3xf32>, %n_1: tensor<i64>):
// CHECK:        %y, %ys = ascend_graph.loop %n_1, %true(%x_1, %x_1) {captures = 1 : i64, name = "if/loop"} : (tensor<i64>, tensor<i1>, tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<?x2x3xf32>) {
// CHECK-NEXT:   ^{{.*}}(%i: tensor<i64>, %c_in: tensor<i1>, %y_in: tensor<2x3xf32>, %x_2: tensor<2x3xf32>):
// CHECK-NEXT:     %y_out = ascend_graph.add %y_in, %x_2 {name = "if/loop/add"}
// CHECK-NEXT:     ascend_graph.yield %c_in, %y_out, %y_out : tensor<i1>, tensor<2x3xf32>, tensor<2x3xf32>
// CHECK-NEXT:   }
// CHECK-NEXT:   ascend_graph.yield %y : tensor<2x3xf32>
// CHECK-NEXT: } else {
// CHECK-NEXT: ^{{.*}}(%[[X:[^:]*]]: tensor<2x3xf32>, %{{[^:]*}}: tensor<i64>):
// CHECK:        %s, %os = ascend_graph.scan(%s0, %[[X]]) {num_scan_inputs = 1 : i64, captures = 0 : i64, scan_input_axes = array<i64: 1>, scan_input_directions = array<i64: 1>, scan_output_axes = array<i64: 0>, scan_output_directions = array<i64: 0>, name = "if/scan"} : (tensor<2xf32>, tensor<2x3xf32>) -> (tensor<2xf32>, tensor<3x2xf32>) {
// CHECK-NEXT:   ^{{.*}}(%s_in: tensor<2xf32>, %xi: tensor<2xf32>):
// CHECK-NEXT:     %s_out = ascend_graph.add %s_in, %xi {name = "if/scan/add"}
// CHECK-NEXT:     ascend_graph.yield %s_out, %s_out : tensor<2xf32>, tensor<2xf32>
// CHECK-NEXT:   }
// CHECK:        ascend_graph.yield %t : tensor<2x3xf32>
// CHECK-NEXT: }
// CHECK-NEXT: ascend_graph.net_output %out {names = ["out"]} : tensor<?x3xf32>
