// A vision transformer's patch embedding: a Conv2D with stride = kernel over 3 channels,
// flattened and transposed into tokens, becomes the image's patches times the filter.
// RUN: ge-opt %s -p 'PatchEmbeddingFusionPass' | filecheck %s

builtin.module {
  ascend_graph.graph @vit_patch_embedding {
    %0 = ascend_graph.data {index = 0 : i64, name = "image"} : tensor<2x3x8x12xf32>
    %1 = ascend_graph.const {value = dense<5.000000e-01> : tensor<5x3x4x4xf32>, name = "filter"} : tensor<5x3x4x4xf32>
    %2 = ascend_graph.const {value = dense<[1.000000e-01, 2.000000e-01, 3.000000e-01, 4.000000e-01, 5.000000e-01]> : tensor<5xf32>, name = "bias"} : tensor<5xf32>
    %3 = ascend_graph.conv2d %0, %1, %2 {strides = array<i64: 1, 1, 4, 4>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1, 1>, groups = 1 : i64, name = "/conv_proj/Conv"} : (tensor<2x3x8x12xf32>, tensor<5x3x4x4xf32>, tensor<5xf32>) -> tensor<2x5x2x3xf32>
    %4 = ascend_graph.reshape %3 {shape = array<i64: 2, 5, 6>, name = "/Reshape"} : (tensor<2x5x2x3xf32>) -> tensor<2x5x6xf32>
    %5 = ascend_graph.transpose_d %4 {perm = array<i64: 0, 2, 1>, name = "/Transpose"} : (tensor<2x5x6xf32>) -> tensor<2x6x5xf32>
    ascend_graph.net_output %5 {names = ["tokens"]} : tensor<2x6x5xf32>
  }
}

// CHECK: ascend_graph.graph @vit_patch_embedding {
// CHECK-NEXT: %[[X:[A-Za-z0-9_.$-]+]] = ascend_graph.data {index = 0 : i64, name = "image"} : tensor<2x3x8x12xf32>
// CHECK-NEXT: %[[B:[A-Za-z0-9_.$-]+]] = ascend_graph.const {{.*}}name = "bias"} : tensor<5xf32>
// CHECK-NEXT: %[[P:[A-Za-z0-9_.$-]+]] = ascend_graph.reshape %[[X]] {shape = array<i64: 2, 3, 2, 4, 3, 4>, {{.*}}} : (tensor<2x3x8x12xf32>) -> tensor<2x3x2x4x3x4xf32>
// CHECK-NEXT: %[[T:[A-Za-z0-9_.$-]+]] = ascend_graph.transpose_d %[[P]] {perm = array<i64: 0, 2, 4, 1, 3, 5>, {{.*}}} : (tensor<2x3x2x4x3x4xf32>) -> tensor<2x2x3x3x4x4xf32>
// CHECK-NEXT: %[[R:[A-Za-z0-9_.$-]+]] = ascend_graph.reshape %[[T]] {shape = array<i64: 2, 6, 48>, {{.*}}} : (tensor<2x2x3x3x4x4xf32>) -> tensor<2x6x48xf32>
// CHECK-NEXT: %[[W:[A-Za-z0-9_.$-]+]] = ascend_graph.const {{.*}} : tensor<48x5xf32>
// CHECK-NEXT: %[[Y:[A-Za-z0-9_.$-]+]] = ascend_graph.batch_matmul %[[R]], %[[W]], %[[B]] {adj_x1 = false, adj_x2 = false, name = "/conv_proj/Conv"} : (tensor<2x6x48xf32>, tensor<48x5xf32>, tensor<5xf32>) -> tensor<2x6x5xf32>
// CHECK-NEXT: ascend_graph.net_output %[[Y]] {names = ["tokens"]} : tensor<2x6x5xf32>
// CHECK-NOT: conv2d
