// ascend_graph round trip of the quantization ops: AscendQuant (per axis with offsets; blocked,
// with a precision), AscendDequant, AscendRequant, and an int8 Conv2D with its offset_x, in the
// custom and the generic form.
// RUN: ge-opt %s | filecheck %s
// RUN: ge-opt %s | ge-opt | filecheck %s
// RUN: ge-opt %s --print-op-generic | ge-opt | filecheck %s

builtin.module {
  ascend_graph.graph @quantization {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x3x4xf32>
    %acc = ascend_graph.data {index = 1 : i64, name = "acc"} : tensor<2x3xi32>
    %scale = ascend_graph.const {value = dense<[1.000000e-01, 2.000000e-01, 5.000000e-01]> : tensor<3xf32>, name = "scale"} : tensor<3xf32>
    %offset = ascend_graph.const {value = dense<[-3, 0, 7]> : tensor<3xi8>, name = "offset"} : tensor<3xi8>
    %blocks = ascend_graph.const {value = dense<2.500000e-01> : tensor<2x3x2xf16>, name = "blocks"} : tensor<2x3x2xf16>
    %q = ascend_graph.ascend_quant %x, %scale, %offset {axis = 1 : i64, block_size = 0 : i64, dst_type = i8, name = "q"} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xi8>) -> tensor<2x3x4xi8>
    %qb = ascend_graph.ascend_quant %x, %blocks {axis = -1 : i64, block_size = 2 : i64, dst_type = ui16, precision = f32, name = "qb"} : (tensor<2x3x4xf32>, tensor<2x3x2xf16>) -> tensor<2x3x4xui16>
    %d = ascend_graph.ascend_dequant %q, %scale, %offset {axis = 1 : i64, block_size = 0 : i64, name = "d"} : (tensor<2x3x4xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<2x3x4xf32>
    %r = ascend_graph.ascend_requant %acc, %scale {axis = 1 : i64, dst_type = i8, name = "r"} : (tensor<2x3xi32>, tensor<3xf32>) -> tensor<2x3xi8>
    %image = ascend_graph.data {index = 2 : i64, name = "image"} : tensor<1x2x3x3xi8>
    %filter = ascend_graph.const {value = dense<1> : tensor<4x2x3x3xi8>, name = "filter"} : tensor<4x2x3x3xi8>
    %conv = ascend_graph.conv2d %image, %filter {strides = array<i64: 1, 1, 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1, 1, 1>, groups = 1 : i64, dtype = i32, offset_x = -128 : i64, name = "conv"} : (tensor<1x2x3x3xi8>, tensor<4x2x3x3xi8>) -> tensor<1x4x3x3xi32>
    ascend_graph.net_output %d, %qb, %r, %conv {names = ["d", "qb", "r", "conv"]} : tensor<2x3x4xf32>, tensor<2x3x4xui16>, tensor<2x3xi8>, tensor<1x4x3x3xi32>
  }
}

// CHECK: builtin.module {
// CHECK-NEXT: ascend_graph.graph @quantization {
// CHECK-NEXT: %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<2x3x4xf32>
// CHECK-NEXT: %acc = ascend_graph.data {index = 1 : i64, name = "acc"} : tensor<2x3xi32>
// CHECK-NEXT: %scale = ascend_graph.const {value = dense<[1.000000e-01, 2.000000e-01, 5.000000e-01]> : tensor<3xf32>, name = "scale"} : tensor<3xf32>
// CHECK-NEXT: %offset = ascend_graph.const {value = dense<[-3, 0, 7]> : tensor<3xi8>, name = "offset"} : tensor<3xi8>
// CHECK-NEXT: %blocks = ascend_graph.const {value = dense<2.500000e-01> : tensor<2x3x2xf16>, name = "blocks"} : tensor<2x3x2xf16>
// CHECK-NEXT: %q = ascend_graph.ascend_quant %x, %scale, %offset {axis = 1 : i64, block_size = 0 : i64, dst_type = i8, name = "q"} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xi8>) -> tensor<2x3x4xi8>
// CHECK-NEXT: %qb = ascend_graph.ascend_quant %x, %blocks {axis = -1 : i64, block_size = 2 : i64, dst_type = ui16, precision = f32, name = "qb"} : (tensor<2x3x4xf32>, tensor<2x3x2xf16>) -> tensor<2x3x4xui16>
// CHECK-NEXT: %d = ascend_graph.ascend_dequant %q, %scale, %offset {axis = 1 : i64, block_size = 0 : i64, name = "d"} : (tensor<2x3x4xi8>, tensor<3xf32>, tensor<3xi8>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %r = ascend_graph.ascend_requant %acc, %scale {axis = 1 : i64, dst_type = i8, name = "r"} : (tensor<2x3xi32>, tensor<3xf32>) -> tensor<2x3xi8>
// CHECK-NEXT: %image = ascend_graph.data {index = 2 : i64, name = "image"} : tensor<1x2x3x3xi8>
// CHECK-NEXT: %filter = ascend_graph.const {value = dense<1> : tensor<4x2x3x3xi8>, name = "filter"} : tensor<4x2x3x3xi8>
// CHECK-NEXT: %conv = ascend_graph.conv2d %image, %filter {strides = array<i64: 1, 1, 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1, 1, 1>, groups = 1 : i64, dtype = i32, offset_x = -128 : i64, name = "conv"} : (tensor<1x2x3x3xi8>, tensor<4x2x3x3xi8>) -> tensor<1x4x3x3xi32>
// CHECK-NEXT: ascend_graph.net_output %d, %qb, %r, %conv {names = ["d", "qb", "r", "conv"]} : tensor<2x3x4xf32>, tensor<2x3x4xui16>, tensor<2x3xi8>, tensor<1x4x3x3xi32>
// CHECK-NEXT: }
// CHECK-NEXT: }
