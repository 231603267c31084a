// The elementwise, bitwise, triangular, cumulative, one-hot and determinant ops round trip: the custom
// and the generic form parse back to the same IR.
// RUN: ge-opt %s | filecheck %s
// RUN: ge-opt %s | ge-opt | filecheck %s
// RUN: ge-opt %s --print-op-generic | ge-opt | filecheck %s

builtin.module {
  ascend_graph.graph @elementwise {
    %a = ascend_graph.data {index = 0 : i64, name = "a"} : tensor<2x4xi32>
    %b = ascend_graph.data {index = 1 : i64, name = "b"} : tensor<4xi32>
    %x = ascend_graph.data {index = 2 : i64, name = "x"} : tensor<2x4xf32>
    %u = ascend_graph.data {index = 3 : i64, name = "u"} : tensor<2x4xui8>
    %m = ascend_graph.data {index = 4 : i64, name = "m"} : tensor<3x2x2xf32>
    %floor_mod = ascend_graph.floor_mod %a, %b {name = "floor_mod"} : (tensor<2x4xi32>, tensor<4xi32>) -> tensor<2x4xi32>
    %mod = ascend_graph.mod %x, %x {name = "mod"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %left = ascend_graph.left_shift %u, %u {name = "left"} : (tensor<2x4xui8>, tensor<2x4xui8>) -> tensor<2x4xui8>
    %right = ascend_graph.right_shift %u, %u {name = "right"} : (tensor<2x4xui8>, tensor<2x4xui8>) -> tensor<2x4xui8>
    %and = ascend_graph.bitwise_and %a, %b {name = "and"} : (tensor<2x4xi32>, tensor<4xi32>) -> tensor<2x4xi32>
    %or = ascend_graph.bitwise_or %a, %b {name = "or"} : (tensor<2x4xi32>, tensor<4xi32>) -> tensor<2x4xi32>
    %xor = ascend_graph.bitwise_xor %a, %b {name = "xor"} : (tensor<2x4xi32>, tensor<4xi32>) -> tensor<2x4xi32>
    %invert = ascend_graph.invert %a {name = "invert"} : (tensor<2x4xi32>) -> tensor<2x4xi32>
    %is_nan = ascend_graph.is_nan %x {name = "is_nan"} : (tensor<2x4xf32>) -> tensor<2x4xi1>
    %is_inf = ascend_graph.is_inf %x {detect_positive = true, detect_negative = false, name = "is_inf"} : (tensor<2x4xf32>) -> tensor<2x4xi1>
    %tan = ascend_graph.tan %x {name = "tan"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %asin = ascend_graph.asin %x {name = "asin"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %acos = ascend_graph.acos %x {name = "acos"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %atan = ascend_graph.atan %x {name = "atan"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %sinh = ascend_graph.sinh %x {name = "sinh"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %cosh = ascend_graph.cosh %x {name = "cosh"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %asinh = ascend_graph.asinh %x {name = "asinh"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %acosh = ascend_graph.acosh %x {name = "acosh"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %atanh = ascend_graph.atanh %x {name = "atanh"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %thresholded_relu = ascend_graph.thresholded_relu %x {alpha = 1.0 : f32, name = "thresholded_relu"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %shrink = ascend_graph.shrink %x {lambd = 0.5 : f32, bias = 0.5 : f32, name = "shrink"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %swish = ascend_graph.swish %x {scale = 1.5 : f32, name = "swish"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %hardmax = ascend_graph.hardmax %m {axes = array<i64: 1, 2>, name = "hardmax"} : (tensor<3x2x2xf32>) -> tensor<3x2x2xf32>
    %tril = ascend_graph.tril %x {diagonal = -1 : i64, name = "tril"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %triu = ascend_graph.triu %a {diagonal = 2 : i64, name = "triu"} : (tensor<2x4xi32>) -> tensor<2x4xi32>
    %cumsum = ascend_graph.cumsum %x {axis = 1 : i64, exclusive = true, reverse = false, name = "cumsum"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %cumprod = ascend_graph.cumprod %a {axis = -2 : i64, exclusive = false, reverse = true, name = "cumprod"} : (tensor<2x4xi32>) -> tensor<2x4xi32>
    %bitcast = ascend_graph.bitcast %x {dst_type = i32, name = "bitcast"} : (tensor<2x4xf32>) -> tensor<2x4xi32>
    %values = ascend_graph.const {value = dense<[0.0, 1.0]> : tensor<2xf32>, name = "values"} : tensor<2xf32>
    %one_hot = ascend_graph.one_hot %a, %values {depth = 5 : i64, axis = 1 : i64, name = "one_hot"} : (tensor<2x4xi32>, tensor<2xf32>) -> tensor<2x5x4xf32>
    %det = ascend_graph.matrix_determinant %m {name = "det"} : (tensor<3x2x2xf32>) -> tensor<3xf32>
    ascend_graph.net_output %floor_mod, %mod, %left, %right, %and, %or, %xor, %invert, %is_nan, %is_inf, %tan, %asin, %acos, %atan, %sinh, %cosh, %asinh, %acosh, %atanh, %thresholded_relu, %shrink, %swish, %hardmax, %tril, %triu, %cumsum, %cumprod, %bitcast, %one_hot, %det {names = ["floor_mod", "mod", "left", "right", "and", "or", "xor", "invert", "is_nan", "is_inf", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "thresholded_relu", "shrink", "swish", "hardmax", "tril", "triu", "cumsum", "cumprod", "bitcast", "one_hot", "det"]} : tensor<2x4xi32>, tensor<2x4xf32>, tensor<2x4xui8>, tensor<2x4xui8>, tensor<2x4xi32>, tensor<2x4xi32>, tensor<2x4xi32>, tensor<2x4xi32>, tensor<2x4xi1>, tensor<2x4xi1>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<3x2x2xf32>, tensor<2x4xf32>, tensor<2x4xi32>, tensor<2x4xf32>, tensor<2x4xi32>, tensor<2x4xi32>, tensor<2x5x4xf32>, tensor<3xf32>
  }
}

// CHECK: ascend_graph.graph @elementwise {
// CHECK-NEXT: %a = ascend_graph.data {index = 0 : i64, name = "a"} : tensor<2x4xi32>
// CHECK-NEXT: %b = ascend_graph.data {index = 1 : i64, name = "b"} : tensor<4xi32>
// CHECK-NEXT: %x = ascend_graph.data {index = 2 : i64, name = "x"} : tensor<2x4xf32>
// CHECK-NEXT: %u = ascend_graph.data {index = 3 : i64, name = "u"} : tensor<2x4xui8>
// CHECK-NEXT: %m = ascend_graph.data {index = 4 : i64, name = "m"} : tensor<3x2x2xf32>
// CHECK-NEXT: %floor_mod = ascend_graph.floor_mod %a, %b {name = "floor_mod"} : (tensor<2x4xi32>, tensor<4xi32>) -> tensor<2x4xi32>
// CHECK-NEXT: %mod = ascend_graph.mod %x, %x {name = "mod"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %left = ascend_graph.left_shift %u, %u {name = "left"} : (tensor<2x4xui8>, tensor<2x4xui8>) -> tensor<2x4xui8>
// CHECK-NEXT: %right = ascend_graph.right_shift %u, %u {name = "right"} : (tensor<2x4xui8>, tensor<2x4xui8>) -> tensor<2x4xui8>
// CHECK-NEXT: %and = ascend_graph.bitwise_and %a, %b {name = "and"} : (tensor<2x4xi32>, tensor<4xi32>) -> tensor<2x4xi32>
// CHECK-NEXT: %or = ascend_graph.bitwise_or %a, %b {name = "or"} : (tensor<2x4xi32>, tensor<4xi32>) -> tensor<2x4xi32>
// CHECK-NEXT: %xor = ascend_graph.bitwise_xor %a, %b {name = "xor"} : (tensor<2x4xi32>, tensor<4xi32>) -> tensor<2x4xi32>
// CHECK-NEXT: %invert = ascend_graph.invert %a {name = "invert"} : (tensor<2x4xi32>) -> tensor<2x4xi32>
// CHECK-NEXT: %is_nan = ascend_graph.is_nan %x {name = "is_nan"} : (tensor<2x4xf32>) -> tensor<2x4xi1>
// CHECK-NEXT: %is_inf = ascend_graph.is_inf %x {detect_positive = true, detect_negative = false, name = "is_inf"} : (tensor<2x4xf32>) -> tensor<2x4xi1>
// CHECK-NEXT: %tan = ascend_graph.tan %x {name = "tan"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %asin = ascend_graph.asin %x {name = "asin"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %acos = ascend_graph.acos %x {name = "acos"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %atan = ascend_graph.atan %x {name = "atan"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %sinh = ascend_graph.sinh %x {name = "sinh"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %cosh = ascend_graph.cosh %x {name = "cosh"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %asinh = ascend_graph.asinh %x {name = "asinh"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %acosh = ascend_graph.acosh %x {name = "acosh"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %atanh = ascend_graph.atanh %x {name = "atanh"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %thresholded_relu = ascend_graph.thresholded_relu %x {alpha = 1.000000e+00 : f32, name = "thresholded_relu"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %shrink = ascend_graph.shrink %x {lambd = 5.000000e-01 : f32, bias = 5.000000e-01 : f32, name = "shrink"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %swish = ascend_graph.swish %x {scale = 1.500000e+00 : f32, name = "swish"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %hardmax = ascend_graph.hardmax %m {axes = array<i64: 1, 2>, name = "hardmax"} : (tensor<3x2x2xf32>) -> tensor<3x2x2xf32>
// CHECK-NEXT: %tril = ascend_graph.tril %x {diagonal = -1 : i64, name = "tril"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %triu = ascend_graph.triu %a {diagonal = 2 : i64, name = "triu"} : (tensor<2x4xi32>) -> tensor<2x4xi32>
// CHECK-NEXT: %cumsum = ascend_graph.cumsum %x {axis = 1 : i64, exclusive = true, reverse = false, name = "cumsum"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %cumprod = ascend_graph.cumprod %a {axis = -2 : i64, exclusive = false, reverse = true, name = "cumprod"} : (tensor<2x4xi32>) -> tensor<2x4xi32>
// CHECK-NEXT: %bitcast = ascend_graph.bitcast %x {dst_type = i32, name = "bitcast"} : (tensor<2x4xf32>) -> tensor<2x4xi32>
// CHECK-NEXT: %values = ascend_graph.const {value = dense<[0.000000e+00, 1.000000e+00]> : tensor<2xf32>, name = "values"} : tensor<2xf32>
// CHECK-NEXT: %one_hot = ascend_graph.one_hot %a, %values {depth = 5 : i64, axis = 1 : i64, name = "one_hot"} : (tensor<2x4xi32>, tensor<2xf32>) -> tensor<2x5x4xf32>
// CHECK-NEXT: %det = ascend_graph.matrix_determinant %m {name = "det"} : (tensor<3x2x2xf32>) -> tensor<3xf32>
// CHECK-NEXT: ascend_graph.net_output %floor_mod, %mod, %left, %right, %and, %or, %xor, %invert, %is_nan, %is_inf, %tan, %asin, %acos, %atan, %sinh, %cosh, %asinh, %acosh, %atanh, %thresholded_relu, %shrink, %swish, %hardmax, %tril, %triu, %cumsum, %cumprod, %bitcast, %one_hot, %det {names = ["floor_mod", "mod", "left", "right", "and", "or", "xor", "invert", "is_nan", "is_inf", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "thresholded_relu", "shrink", "swish", "hardmax", "tril", "triu", "cumsum", "cumprod", "bitcast", "one_hot", "det"]} : tensor<2x4xi32>, tensor<2x4xf32>, tensor<2x4xui8>, tensor<2x4xui8>, tensor<2x4xi32>, tensor<2x4xi32>, tensor<2x4xi32>, tensor<2x4xi32>, tensor<2x4xi1>, tensor<2x4xi1>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<3x2x2xf32>, tensor<2x4xf32>, tensor<2x4xi32>, tensor<2x4xf32>, tensor<2x4xi32>, tensor<2x4xi32>, tensor<2x5x4xf32>, tensor<3xf32>
