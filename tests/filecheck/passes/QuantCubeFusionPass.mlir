// QuantCubeFusionPass: a QDQ convolution (activation offset -3, padded: the Conv2D's offset_x pads
// with it; the bias is corrected by -zx * sum(w) per channel; one AscendDequant by sx * sw after
// the int8 product), and an int32 MatMul of a widened uint8 input minus 100 and a constant that fits
// int8 (the input moves by -128 into int8, the offset with it).
// RUN: ge-opt %s --split-input-file -p QuantCubeFusionPass | filecheck %s

builtin.module {
  ascend_graph.graph @qdq_conv {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<1x2x3x3xi8>
    %sx = ascend_graph.const {value = dense<5.000000e-01> : tensor<f32>, name = "sx"} : tensor<f32>
    %zx = ascend_graph.const {value = dense<-3> : tensor<i8>, name = "zx"} : tensor<i8>
    %dx = ascend_graph.ascend_dequant %x, %sx, %zx {axis = 1 : i64, block_size = 0 : i64, name = "dx"} : (tensor<1x2x3x3xi8>, tensor<f32>, tensor<i8>) -> tensor<1x2x3x3xf32>
    %w = ascend_graph.const {value = dense<[[[[1]], [[2]]], [[[-3]], [[4]]]]> : tensor<2x2x1x1xi8>, name = "w"} : tensor<2x2x1x1xi8>
    %sw = ascend_graph.const {value = dense<[2.500000e-01, 1.250000e-01]> : tensor<2xf32>, name = "sw"} : tensor<2xf32>
    %dw = ascend_graph.ascend_dequant %w, %sw {axis = 0 : i64, block_size = 0 : i64, name = "dw"} : (tensor<2x2x1x1xi8>, tensor<2xf32>) -> tensor<2x2x1x1xf32>
    %b = ascend_graph.const {value = dense<[10, -20]> : tensor<2xi32>, name = "b"} : tensor<2xi32>
    %sb = ascend_graph.const {value = dense<[1.250000e-01, 6.250000e-02]> : tensor<2xf32>, name = "sb"} : tensor<2xf32>
    %db = ascend_graph.ascend_dequant %b, %sb {axis = 0 : i64, block_size = 0 : i64, name = "db"} : (tensor<2xi32>, tensor<2xf32>) -> tensor<2xf32>
    %y = ascend_graph.conv2d %dx, %dw, %db {strides = array<i64: 1, 1, 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1, 1, 1>, groups = 1 : i64, name = "conv"} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>, tensor<2xf32>) -> tensor<1x2x5x5xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<1x2x5x5xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @integer_matmul {
    %a = ascend_graph.data {index = 0 : i64, name = "a"} : tensor<2x3xui8>
    %wide = ascend_graph.cast %a {dst_type = i32, name = "a_int32"} : (tensor<2x3xui8>) -> tensor<2x3xi32>
    %za = ascend_graph.const {value = dense<100> : tensor<i32>, name = "za"} : tensor<i32>
    %shifted = ascend_graph.sub %wide, %za {name = "a_shifted"} : (tensor<2x3xi32>, tensor<i32>) -> tensor<2x3xi32>
    %b = ascend_graph.const {value = dense<[[1, -2], [3, 4], [-5, 6]]> : tensor<3x2xi32>, name = "b"} : tensor<3x2xi32>
    %y = ascend_graph.matmul_v2 %shifted, %b {transpose_x1 = false, transpose_x2 = false, name = "mm"} : (tensor<2x3xi32>, tensor<3x2xi32>) -> tensor<2x2xi32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<2x2xi32>
  }
}

// CHECK: ascend_graph.graph @qdq_conv {
// CHECK-NEXT: %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<1x2x3x3xi8>
// CHECK-NEXT: %0 = ascend_graph.const {value = dense<{{\[\[}}{{\[\[}}1]], {{\[\[}}2]]], {{\[\[}}[-3]], {{\[\[}}4]]]]> : tensor<2x2x1x1xi8>, name = "conv.weight_int8"} : tensor<2x2x1x1xi8>
// CHECK-NEXT: %1 = ascend_graph.const {value = dense<[19, -17]> : tensor<2xi32>, name = "conv.bias_int32"} : tensor<2xi32>
// CHECK-NEXT: %2 = ascend_graph.conv2d %x, %0, %1 {strides = array<i64: 1, 1, 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1, 1, 1>, groups = 1 : i64, name = "conv", dtype = i32, offset_x = -3 : i64} : (tensor<1x2x3x3xi8>, tensor<2x2x1x1xi8>, tensor<2xi32>) -> tensor<1x2x5x5xi32>
// CHECK-NEXT: %3 = ascend_graph.const {value = dense<[1.250000e-01, 6.250000e-02]> : tensor<2xf32>, name = "conv.deq_scale"} : tensor<2xf32>
// CHECK-NEXT: %y = ascend_graph.ascend_dequant %2, %3 {axis = 1 : i64, block_size = 0 : i64, name = "conv/dequant"} : (tensor<1x2x5x5xi32>, tensor<2xf32>) -> tensor<1x2x5x5xf32>
// CHECK-NEXT: ascend_graph.net_output %y {names = ["y"]} : tensor<1x2x5x5xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK: ascend_graph.graph @integer_matmul {
// CHECK-NEXT: %a = ascend_graph.data {index = 0 : i64, name = "a"} : tensor<2x3xui8>
// CHECK-NEXT: %wide = ascend_graph.cast %a {dst_type = i32, name = "a_int32"} : (tensor<2x3xui8>) -> tensor<2x3xi32>
// CHECK-NEXT: %0 = ascend_graph.const {value = dense<128> : tensor<i32>, name = "mm.shift"} : tensor<i32>
// CHECK-NEXT: %1 = ascend_graph.sub %wide, %0 {name = "mm/shift"} : (tensor<2x3xi32>, tensor<i32>) -> tensor<2x3xi32>
// CHECK-NEXT: %2 = ascend_graph.cast %1 {dst_type = i8, name = "mm/int8"} : (tensor<2x3xi32>) -> tensor<2x3xi8>
// CHECK-NEXT: %3 = ascend_graph.const {value = dense<{{\[\[}}1, -2], [3, 4], [-5, 6]]> : tensor<3x2xi8>, name = "mm.weight_int8"} : tensor<3x2xi8>
// CHECK-NEXT: %4 = ascend_graph.const {value = dense<[-28, 224]> : tensor<2xi32>, name = "mm.bias_int32"} : tensor<2xi32>
// CHECK-NEXT: %y = ascend_graph.matmul_v2 %2, %3, %4 {transpose_x1 = false, transpose_x2 = false, name = "mm", dtype = i32} : (tensor<2x3xi8>, tensor<3x2xi8>, tensor<2xi32>) -> tensor<2x2xi32>
// CHECK-NEXT: ascend_graph.net_output %y {names = ["y"]} : tensor<2x2xi32>
// CHECK-NEXT: }
// CHECK-NEXT: }
