// The spatial ops (ops-spatial): each prints, and the custom and the generic form
// parse back to the same IR.
// RUN: ge-opt %s | filecheck %s
// RUN: ge-opt %s | ge-opt | filecheck %s
// RUN: ge-opt %s --print-op-generic | ge-opt | filecheck %s

builtin.module {
  ascend_graph.graph @spatial {
    %x4 = ascend_graph.data {index = 0 : i64, name = "x4"} : tensor<1x4x6x6xf32>
    %x5 = ascend_graph.data {index = 1 : i64, name = "x5"} : tensor<1x2x4x4x4xf32>
    %idx = ascend_graph.data {index = 2 : i64, name = "idx"} : tensor<1x4x6x6xi64>
    %grid = ascend_graph.data {index = 3 : i64, name = "grid"} : tensor<1x3x3x2xf32>
    %grid3 = ascend_graph.data {index = 4 : i64, name = "grid3"} : tensor<1x2x2x2x3xf32>
    %theta = ascend_graph.data {index = 5 : i64, name = "theta"} : tensor<1x2x3xf32>
    %cols = ascend_graph.data {index = 6 : i64, name = "cols"} : tensor<1x4x9xf32>
    %off = ascend_graph.data {index = 7 : i64, name = "off"} : tensor<1x8x5x5xf32>
    %rois = ascend_graph.data {index = 8 : i64, name = "rois"} : tensor<2x4xf32>
    %bi = ascend_graph.data {index = 9 : i64, name = "bi"} : tensor<2xi64>
    %wt = ascend_graph.const {value = #ascend_graph.weight<"wt", "82e0a3d80686ad5f">, name = "wt"} : tensor<4x3x3x3xf32>
    %bt = ascend_graph.const {value = dense<1.000000e+00> : tensor<6xf32>, name = "bt"} : tensor<6xf32>
    %ct = ascend_graph.conv2d_transpose %x4, %wt, %bt {strides = array<i64: 1, 1, 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 0, 0, 1, 1>, groups = 2 : i64, name = "ct"} : (tensor<1x4x6x6xf32>, tensor<4x3x3x3xf32>, tensor<6xf32>) -> tensor<1x6x12x12xf32>
    %wt3 = ascend_graph.const {value = dense<1.000000e+00> : tensor<2x1x2x2x2xf32>, name = "wt3"} : tensor<2x1x2x2x2xf32>
    %ct3 = ascend_graph.conv3d_transpose %x5, %wt3 {strides = array<i64: 1, 1, 1, 2, 1>, pads = array<i64: 0, 0, 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1, 1, 1>, output_padding = array<i64: 0, 0, 0, 0, 0>, groups = 1 : i64, name = "ct3"} : (tensor<1x2x4x4x4xf32>, tensor<2x1x2x2x2xf32>) -> tensor<1x1x5x8x5xf32>
    %w3 = ascend_graph.const {value = #ascend_graph.weight<"w3", "5e9ee1c84f66dc41">, name = "w3"} : tensor<2x2x3x3x3xf32>
    %c3 = ascend_graph.conv3d %x5, %w3 {strides = array<i64: 1, 1, 1, 1, 1>, pads = array<i64: 1, 1, 1, 1, 1, 1>, dilations = array<i64: 1, 1, 1, 1, 1>, groups = 1 : i64, name = "c3"} : (tensor<1x2x4x4x4xf32>, tensor<2x2x3x3x3xf32>) -> tensor<1x2x4x4x4xf32>
    %mp3 = ascend_graph.max_pool3d %x5 {ksize = array<i64: 2, 2, 2>, strides = array<i64: 1, 1, 1>, pads = array<i64: 0, 0, 0, 0, 0, 0>, dilations = array<i64: 1, 2, 1>, ceil_mode = false, name = "mp3"} : (tensor<1x2x4x4x4xf32>) -> tensor<1x2x3x2x3xf32>
    %ap3 = ascend_graph.avg_pool3d %x5 {ksize = array<i64: 2, 2, 2>, strides = array<i64: 2, 2, 2>, pads = array<i64: 0, 0, 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1>, ceil_mode = true, exclusive = true, name = "ap3"} : (tensor<1x2x4x4x4xf32>) -> tensor<1x2x2x2x2xf32>
    %apd = ascend_graph.avg_pool %x4 {ksize = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, ceil_mode = false, dilations = array<i64: 2, 2>, exclusive = true, name = "apd"} : (tensor<1x4x6x6xf32>) -> tensor<1x4x4x4xf32>
    %mpi, %mpz = ascend_graph.max_pool_with_argmax %x4 {ksize = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false, storage_order = 1 : i64, name = "mpi"} : (tensor<1x4x6x6xf32>) -> (tensor<1x4x5x5xf32>, tensor<1x4x5x5xi64>)
    %lp = ascend_graph.lp_pool %x4 {ksize = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false, p = 3 : i64, name = "lp"} : (tensor<1x4x6x6xf32>) -> tensor<1x4x5x5xf32>
    %mu = ascend_graph.max_unpool %x4, %idx {output_shape = array<i64: 1, 4, 12, 12>, name = "mu"} : (tensor<1x4x6x6xf32>, tensor<1x4x6x6xi64>) -> tensor<1x4x12x12xf32>
    %gs = ascend_graph.grid_sampler2d %x4, %grid {interpolation_mode = "bicubic", padding_mode = "reflection", align_corners = true, name = "gs"} : (tensor<1x4x6x6xf32>, tensor<1x3x3x2xf32>) -> tensor<1x4x3x3xf32>
    %gs3 = ascend_graph.grid_sampler3d %x5, %grid3 {interpolation_mode = "nearest", padding_mode = "zeros", align_corners = false, name = "gs3"} : (tensor<1x2x4x4x4xf32>, tensor<1x2x2x2x3xf32>) -> tensor<1x2x2x2x2xf32>
    %ag = ascend_graph.affine_grid %theta {size = array<i64: 1, 1, 3, 4>, align_corners = true, name = "ag"} : (tensor<1x2x3xf32>) -> tensor<1x3x4x2xf32>
    %ci = ascend_graph.col2im %cols {image_shape = array<i64: 4, 4>, block_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, name = "ci"} : (tensor<1x4x9xf32>) -> tensor<1x1x4x4xf32>
    %wd = ascend_graph.const {value = dense<1.000000e+00> : tensor<2x4x2x2xf32>, name = "wd"} : tensor<2x4x2x2xf32>
    %0 = ascend_graph.const {value = dense<1.000000e+00> : tensor<1x4x5x5xf32>, name = "dc/mask"} : tensor<1x4x5x5xf32>
    %1 = ascend_graph.deformable_offsets %x4, %off, %0 {ksize = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, deformable_groups = 1 : i64, name = "dc/offsets"} : (tensor<1x4x6x6xf32>, tensor<1x8x5x5xf32>, tensor<1x4x5x5xf32>) -> tensor<1x4x10x10xf32>
    %dc = ascend_graph.conv2d %1, %wd {strides = array<i64: 1, 1, 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1, 1>, groups = 1 : i64, name = "dc"} : (tensor<1x4x10x10xf32>, tensor<2x4x2x2xf32>) -> tensor<1x2x5x5xf32>
    %ra = ascend_graph.roi_align %x4, %rois, %bi {pooled_height = 2 : i64, pooled_width = 3 : i64, sample_num = 0 : i64, spatial_scale = 1.000000e+00 : f32, mode = "max", aligned = true, name = "ra"} : (tensor<1x4x6x6xf32>, tensor<2x4xf32>, tensor<2xi64>) -> tensor<2x4x2x3xf32>
    %rs = ascend_graph.resize %x4 {sizes = array<i64: 1, 4, 3, 3>, scales = array<f64: 1.000000e+00, 1.000000e+00, 5.000000e-01, 5.000000e-01>, mode = "linear", coordinate_transformation_mode = "half_pixel", nearest_mode = "round_prefer_floor", cubic_coeff_a = -7.500000e-01 : f32, exclude_outside = false, extrapolation_value = 0.000000e+00 : f32, antialias = true, name = "rs"} : (tensor<1x4x6x6xf32>) -> tensor<1x4x3x3xf32>
    %pd = ascend_graph.pad %x4 {paddings = array<i64: 0, 0, 0, 0, 1, 1, 1, 1>, mode = "wrap", constant_value = 0.000000e+00 : f32, name = "pd"} : (tensor<1x4x6x6xf32>) -> tensor<1x4x8x8xf32>
    ascend_graph.net_output %ct, %ct3, %c3, %mp3, %ap3, %apd, %mpi, %lp, %mu, %gs, %gs3, %ag, %ci, %dc, %ra, %rs, %pd, %mpz {names = ["ct", "ct3", "c3", "mp3", "ap3", "apd", "mpi", "lp", "mu", "gs", "gs3", "ag", "ci", "dc", "ra", "rs", "pd", "mpz"]} : tensor<1x6x12x12xf32>, tensor<1x1x5x8x5xf32>, tensor<1x2x4x4x4xf32>, tensor<1x2x3x2x3xf32>, tensor<1x2x2x2x2xf32>, tensor<1x4x4x4xf32>, tensor<1x4x5x5xf32>, tensor<1x4x5x5xf32>, tensor<1x4x12x12xf32>, tensor<1x4x3x3xf32>, tensor<1x2x2x2x2xf32>, tensor<1x3x4x2xf32>, tensor<1x1x4x4xf32>, tensor<1x2x5x5xf32>, tensor<2x4x2x3xf32>, tensor<1x4x3x3xf32>, tensor<1x4x8x8xf32>, tensor<1x4x5x5xi64>
  }
}

// CHECK: %{{[A-Za-z0-9_.$-]+}} = ascend_graph.conv2d_transpose %{{[A-Za-z0-9_.$-]+}}, %{{[A-Za-z0-9_.$-]+}}, %{{[A-Za-z0-9_.$-]+}} {strides = array<i64: 1, 1, 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 0, 0, 1, 1>, groups = 2 : i64, name = "ct"} : (tensor<1x4x6x6xf32>, tensor<4x3x3x3xf32>, tensor<6xf32>) -> tensor<1x6x12x12xf32>
// CHECK: %{{[A-Za-z0-9_.$-]+}} = ascend_graph.conv3d_transpose %{{[A-Za-z0-9_.$-]+}}, %{{[A-Za-z0-9_.$-]+}} {strides = array<i64: 1, 1, 1, 2, 1>, pads = array<i64: 0, 0, 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1, 1, 1>, output_padding = array<i64: 0, 0, 0, 0, 0>, groups = 1 : i64, name = "ct3"} : (tensor<1x2x4x4x4xf32>, tensor<2x1x2x2x2xf32>) -> tensor<1x1x5x8x5xf32>
// CHECK: %{{[A-Za-z0-9_.$-]+}} = ascend_graph.conv3d %{{[A-Za-z0-9_.$-]+}}, %{{[A-Za-z0-9_.$-]+}} {strides = array<i64: 1, 1, 1, 1, 1>, pads = array<i64: 1, 1, 1, 1, 1, 1>, dilations = array<i64: 1, 1, 1, 1, 1>, groups = 1 : i64, name = "c3"} : (tensor<1x2x4x4x4xf32>, tensor<2x2x3x3x3xf32>) -> tensor<1x2x4x4x4xf32>
// CHECK: %{{[A-Za-z0-9_.$-]+}} = ascend_graph.max_pool3d %{{[A-Za-z0-9_.$-]+}} {ksize = array<i64: 2, 2, 2>, strides = array<i64: 1, 1, 1>, pads = array<i64: 0, 0, 0, 0, 0, 0>, dilations = array<i64: 1, 2, 1>, ceil_mode = false, name = "mp3"} : (tensor<1x2x4x4x4xf32>) -> tensor<1x2x3x2x3xf32>
// CHECK: %{{[A-Za-z0-9_.$-]+}} = ascend_graph.avg_pool3d %{{[A-Za-z0-9_.$-]+}} {ksize = array<i64: 2, 2, 2>, strides = array<i64: 2, 2, 2>, pads = array<i64: 0, 0, 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1>, ceil_mode = true, exclusive = true, name = "ap3"} : (tensor<1x2x4x4x4xf32>) -> tensor<1x2x2x2x2xf32>
// CHECK: %{{[A-Za-z0-9_.$-]+}} = ascend_graph.avg_pool %{{[A-Za-z0-9_.$-]+}} {ksize = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, ceil_mode = false, dilations = array<i64: 2, 2>, exclusive = true, name = "apd"} : (tensor<1x4x6x6xf32>) -> tensor<1x4x4x4xf32>
// CHECK: %{{[A-Za-z0-9_.$-]+}}, %{{[A-Za-z0-9_.$-]+}} = ascend_graph.max_pool_with_argmax %{{[A-Za-z0-9_.$-]+}} {ksize = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false, storage_order = 1 : i64, name = "mpi"} : (tensor<1x4x6x6xf32>) -> (tensor<1x4x5x5xf32>, tensor<1x4x5x5xi64>)
// CHECK: %{{[A-Za-z0-9_.$-]+}} = ascend_graph.lp_pool %{{[A-Za-z0-9_.$-]+}} {ksize = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false, p = 3 : i64, name = "lp"} : (tensor<1x4x6x6xf32>) -> tensor<1x4x5x5xf32>
// CHECK: %{{[A-Za-z0-9_.$-]+}} = ascend_graph.max_unpool %{{[A-Za-z0-9_.$-]+}}, %{{[A-Za-z0-9_.$-]+}} {output_shape = array<i64: 1, 4, 12, 12>, name = "mu"} : (tensor<1x4x6x6xf32>, tensor<1x4x6x6xi64>) -> tensor<1x4x12x12xf32>
// CHECK: %{{[A-Za-z0-9_.$-]+}} = ascend_graph.grid_sampler2d %{{[A-Za-z0-9_.$-]+}}, %{{[A-Za-z0-9_.$-]+}} {interpolation_mode = "bicubic", padding_mode = "reflection", align_corners = true, name = "gs"} : (tensor<1x4x6x6xf32>, tensor<1x3x3x2xf32>) -> tensor<1x4x3x3xf32>
// CHECK: %{{[A-Za-z0-9_.$-]+}} = ascend_graph.grid_sampler3d %{{[A-Za-z0-9_.$-]+}}, %{{[A-Za-z0-9_.$-]+}} {interpolation_mode = "nearest", padding_mode = "zeros", align_corners = false, name = "gs3"} : (tensor<1x2x4x4x4xf32>, tensor<1x2x2x2x3xf32>) -> tensor<1x2x2x2x2xf32>
// CHECK: %{{[A-Za-z0-9_.$-]+}} = ascend_graph.affine_grid %{{[A-Za-z0-9_.$-]+}} {size = array<i64: 1, 1, 3, 4>, align_corners = true, name = "ag"} : (tensor<1x2x3xf32>) -> tensor<1x3x4x2xf32>
// CHECK: %{{[A-Za-z0-9_.$-]+}} = ascend_graph.col2im %{{[A-Za-z0-9_.$-]+}} {image_shape = array<i64: 4, 4>, block_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, name = "ci"} : (tensor<1x4x9xf32>) -> tensor<1x1x4x4xf32>
// CHECK: %{{[A-Za-z0-9_.$-]+}} = ascend_graph.deformable_offsets %{{[A-Za-z0-9_.$-]+}}, %{{[A-Za-z0-9_.$-]+}}, %{{[A-Za-z0-9_.$-]+}} {ksize = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, deformable_groups = 1 : i64, name = "dc/offsets"} : (tensor<1x4x6x6xf32>, tensor<1x8x5x5xf32>, tensor<1x4x5x5xf32>) -> tensor<1x4x10x10xf32>
// CHECK: %{{[A-Za-z0-9_.$-]+}} = ascend_graph.roi_align %{{[A-Za-z0-9_.$-]+}}, %{{[A-Za-z0-9_.$-]+}}, %{{[A-Za-z0-9_.$-]+}} {pooled_height = 2 : i64, pooled_width = 3 : i64, sample_num = 0 : i64, spatial_scale = 1.000000e+00 : f32, mode = "max", aligned = true, name = "ra"} : (tensor<1x4x6x6xf32>, tensor<2x4xf32>, tensor<2xi64>) -> tensor<2x4x2x3xf32>
// CHECK: %{{[A-Za-z0-9_.$-]+}} = ascend_graph.resize %{{[A-Za-z0-9_.$-]+}} {sizes = array<i64: 1, 4, 3, 3>, scales = array<f64: 1.000000e+00, 1.000000e+00, 5.000000e-01, 5.000000e-01>, mode = "linear", coordinate_transformation_mode = "half_pixel", nearest_mode = "round_prefer_floor", cubic_coeff_a = -7.500000e-01 : f32, exclude_outside = false, extrapolation_value = 0.000000e+00 : f32, antialias = true, name = "rs"} : (tensor<1x4x6x6xf32>) -> tensor<1x4x3x3xf32>
// CHECK: %{{[A-Za-z0-9_.$-]+}} = ascend_graph.pad %{{[A-Za-z0-9_.$-]+}} {paddings = array<i64: 0, 0, 0, 0, 1, 1, 1, 1>, mode = "wrap", constant_value = 0.000000e+00 : f32, name = "pd"} : (tensor<1x4x6x6xf32>) -> tensor<1x4x8x8xf32>
