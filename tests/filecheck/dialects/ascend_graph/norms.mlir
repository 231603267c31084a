// The loss and normalisation ops (NLLLoss, SoftmaxCrossEntropyLoss, RmsNorm, LpNorm, DivNoNan,
// GroupNorm, MVNV2, LRN): the custom and the generic form parse back to the same IR.
// RUN: ge-opt %s | filecheck %s
// RUN: ge-opt %s | ge-opt | filecheck %s
// RUN: ge-opt %s --print-op-generic | ge-opt | filecheck %s

builtin.module {
  ascend_graph.graph @norms {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<3x5x2xf32>
    %target = ascend_graph.data {index = 1 : i64, name = "target"} : tensor<3x2xi64>
    %weight = ascend_graph.data {index = 2 : i64, name = "weight"} : tensor<5xf32>
    %image = ascend_graph.data {index = 3 : i64, name = "image"} : tensor<2x4x3x3xf32>
    %nll = ascend_graph.nll_loss %x, %target, %weight {reduction = "mean", ignore_index = -1 : i64, name = "nll"} : (tensor<3x5x2xf32>, tensor<3x2xi64>, tensor<5xf32>) -> tensor<f32>
    %nll_none = ascend_graph.nll_loss %x, %target {reduction = "none", name = "nll_none"} : (tensor<3x5x2xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
    %sce, %log_prob = ascend_graph.softmax_cross_entropy_loss %x, %target {reduction = "sum", name = "sce"} : (tensor<3x5x2xf32>, tensor<3x2xi64>) -> (tensor<f32>, tensor<3x5x2xf32>)
    %gamma = ascend_graph.const {value = dense<1.500000e+00> : tensor<3xf32>, name = "gamma"} : tensor<3xf32>
    %rms = ascend_graph.rms_norm %image, %gamma {begin_norm_axis = -1 : i64, epsilon = 1.000000e-05 : f32, name = "rms"} : (tensor<2x4x3x3xf32>, tensor<3xf32>) -> tensor<2x4x3x3xf32>
    %lp = ascend_graph.lp_norm %image {axes = array<i64: 1>, keep_dims = true, p = 2 : i64, name = "lp"} : (tensor<2x4x3x3xf32>) -> tensor<2x1x3x3xf32>
    %lp_y = ascend_graph.div_no_nan %image, %lp {name = "lp_y"} : (tensor<2x4x3x3xf32>, tensor<2x1x3x3xf32>) -> tensor<2x4x3x3xf32>
    %scale = ascend_graph.const {value = dense<2.000000e+00> : tensor<4xf32>, name = "scale"} : tensor<4xf32>
    %bias = ascend_graph.const {value = dense<5.000000e-01> : tensor<4xf32>, name = "bias"} : tensor<4xf32>
    %group = ascend_graph.group_norm %image, %scale, %bias {num_groups = 2 : i64, epsilon = 1.000000e-05 : f32, name = "group"} : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x3xf32>
    %mvn = ascend_graph.mvn_v2 %image {axes = array<i64: 0, 2, 3>, eps = 1.000000e-09 : f32, name = "mvn"} : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
    %lrn = ascend_graph.lrn %image {size = 3 : i64, alpha = 1.000000e-04 : f32, beta = 7.500000e-01 : f32, bias = 1.000000e+00 : f32, name = "lrn"} : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
    ascend_graph.net_output %nll, %nll_none, %sce, %log_prob, %rms, %lp_y, %group, %mvn, %lrn {names = ["nll", "nll_none", "sce", "log_prob", "rms", "lp_y", "group", "mvn", "lrn"]} : tensor<f32>, tensor<3x2xf32>, tensor<f32>, tensor<3x5x2xf32>, tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT: ascend_graph.graph @norms {
// CHECK-NEXT: %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<3x5x2xf32>
// CHECK-NEXT: %target = ascend_graph.data {index = 1 : i64, name = "target"} : tensor<3x2xi64>
// CHECK-NEXT: %weight = ascend_graph.data {index = 2 : i64, name = "weight"} : tensor<5xf32>
// CHECK-NEXT: %image = ascend_graph.data {index = 3 : i64, name = "image"} : tensor<2x4x3x3xf32>
// CHECK-NEXT: %nll = ascend_graph.nll_loss %x, %target, %weight {reduction = "mean", ignore_index = -1 : i64, name = "nll"} : (tensor<3x5x2xf32>, tensor<3x2xi64>, tensor<5xf32>) -> tensor<f32>
// CHECK-NEXT: %nll_none = ascend_graph.nll_loss %x, %target {reduction = "none", name = "nll_none"} : (tensor<3x5x2xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
// CHECK-NEXT: %sce, %log_prob = ascend_graph.softmax_cross_entropy_loss %x, %target {reduction = "sum", name = "sce"} : (tensor<3x5x2xf32>, tensor<3x2xi64>) -> (tensor<f32>, tensor<3x5x2xf32>)
// CHECK-NEXT: %gamma = ascend_graph.const {value = dense<1.500000e+00> : tensor<3xf32>, name = "gamma"} : tensor<3xf32>
// CHECK-NEXT: %rms = ascend_graph.rms_norm %image, %gamma {begin_norm_axis = -1 : i64, epsilon = 1.000000e-05 : f32, name = "rms"} : (tensor<2x4x3x3xf32>, tensor<3xf32>) -> tensor<2x4x3x3xf32>
// CHECK-NEXT: %lp = ascend_graph.lp_norm %image {axes = array<i64: 1>, keep_dims = true, p = 2 : i64, name = "lp"} : (tensor<2x4x3x3xf32>) -> tensor<2x1x3x3xf32>
// CHECK-NEXT: %lp_y = ascend_graph.div_no_nan %image, %lp {name = "lp_y"} : (tensor<2x4x3x3xf32>, tensor<2x1x3x3xf32>) -> tensor<2x4x3x3xf32>
// CHECK-NEXT: %scale = ascend_graph.const {value = dense<2.000000e+00> : tensor<4xf32>, name = "scale"} : tensor<4xf32>
// CHECK-NEXT: %bias = ascend_graph.const {value = dense<5.000000e-01> : tensor<4xf32>, name = "bias"} : tensor<4xf32>
// CHECK-NEXT: %group = ascend_graph.group_norm %image, %scale, %bias {num_groups = 2 : i64, epsilon = 1.000000e-05 : f32, name = "group"} : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x3xf32>
// CHECK-NEXT: %mvn = ascend_graph.mvn_v2 %image {axes = array<i64: 0, 2, 3>, eps = 1.000000e-09 : f32, name = "mvn"} : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
// CHECK-NEXT: %lrn = ascend_graph.lrn %image {size = 3 : i64, alpha = 1.000000e-04 : f32, beta = 7.500000e-01 : f32, bias = 1.000000e+00 : f32, name = "lrn"} : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
// CHECK-NEXT: ascend_graph.net_output %nll, %nll_none, %sce, %log_prob, %rms, %lp_y, %group, %mvn, %lrn {names = ["nll", "nll_none", "sce", "log_prob", "rms", "lp_y", "group", "mvn", "lrn"]} : tensor<f32>, tensor<3x2xf32>, tensor<f32>, tensor<3x5x2xf32>, tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
