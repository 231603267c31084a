// The data-dependent ops of the AI CPU engine round trip: dims known only when they run are `?`.
// RUN: ge-opt %s | filecheck %s
// RUN: ge-opt %s | ge-opt | filecheck %s
// RUN: ge-opt %s --print-op-generic | ge-opt | filecheck %s

builtin.module {
  ascend_graph.graph @aicpu {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<3x4xf32>
    %cond = ascend_graph.data {index = 1 : i64, name = "cond"} : tensor<3xi1>
    %boxes = ascend_graph.data {index = 2 : i64, name = "boxes"} : tensor<1x6x4xf32>
    %scores = ascend_graph.data {index = 3 : i64, name = "scores"} : tensor<1x2x6xf32>
    %nz = ascend_graph.non_zero %x {name = "nonzero"} : (tensor<3x4xf32>) -> tensor<2x?xi64>
    %cx = ascend_graph.compress %x, %cond {axis = 0 : i64, name = "compress"} : (tensor<3x4xf32>, tensor<3xi1>) -> tensor<?x4xf32>
    %cf = ascend_graph.compress %x, %cond {name = "compress_flat"} : (tensor<3x4xf32>, tensor<3xi1>) -> tensor<?xf32>
    %u, %ui, %uinv, %uc = ascend_graph.unique %x {sorted = false, name = "unique"} : (tensor<3x4xf32>) -> (tensor<?xf32>, tensor<?xi64>, tensor<12xi64>, tensor<?xi64>)
    %ua, %uai, %uainv, %uac = ascend_graph.unique %x {sorted = true, axis = -1 : i64, name = "unique_axis"} : (tensor<3x4xf32>) -> (tensor<3x?xf32>, tensor<?xi64>, tensor<4xi64>, tensor<?xi64>)
    %sel = ascend_graph.non_max_suppression_v6 %boxes, %scores {center_point_box = true, max_output_boxes_per_class = 3 : i64, iou_threshold = 5.000000e-01 : f32, score_threshold = 1.000000e-01 : f32, name = "nms"} : (tensor<1x6x4xf32>, tensor<1x2x6xf32>) -> tensor<?x3xi64>
    %sel2 = ascend_graph.non_max_suppression_v6 %boxes, %scores {center_point_box = false, max_output_boxes_per_class = 3 : i64, iou_threshold = 0.000000e+00 : f32, name = "nms_no_threshold"} : (tensor<1x6x4xf32>, tensor<1x2x6xf32>) -> tensor<?x3xi64>
    ascend_graph.net_output %nz, %cx, %cf, %u, %ui, %uinv, %uc, %ua, %uai, %uainv, %uac, %sel, %sel2 {names = ["nz", "cx", "cf", "u", "ui", "uinv", "uc", "ua", "uai", "uainv", "uac", "sel", "sel2"]} : tensor<2x?xi64>, tensor<?x4xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xi64>, tensor<12xi64>, tensor<?xi64>, tensor<3x?xf32>, tensor<?xi64>, tensor<4xi64>, tensor<?xi64>, tensor<?x3xi64>, tensor<?x3xi64>
  }
}

// CHECK:      %nz = ascend_graph.non_zero %x {name = "nonzero"} : (tensor<3x4xf32>) -> tensor<2x?xi64>
// CHECK-NEXT: %cx = ascend_graph.compress %x, %cond {axis = 0 : i64, name = "compress"} : (tensor<3x4xf32>, tensor<3xi1>) -> tensor<?x4xf32>
// CHECK-NEXT: %cf = ascend_graph.compress %x, %cond {name = "compress_flat"} : (tensor<3x4xf32>, tensor<3xi1>) -> tensor<?xf32>
// CHECK-NEXT: %u, %ui, %uinv, %uc = ascend_graph.unique %x {sorted = false, name = "unique"} : (tensor<3x4xf32>) -> (tensor<?xf32>, tensor<?xi64>, tensor<12xi64>, tensor<?xi64>)
// CHECK-NEXT: %ua, %uai, %uainv, %uac = ascend_graph.unique %x {sorted = true, axis = -1 : i64, name = "unique_axis"} : (tensor<3x4xf32>) -> (tensor<3x?xf32>, tensor<?xi64>, tensor<4xi64>, tensor<?xi64>)
// CHECK-NEXT: %sel = ascend_graph.non_max_suppression_v6 %boxes, %scores {center_point_box = true, max_output_boxes_per_class = 3 : i64, iou_threshold = 5.000000e-01 : f32, score_threshold = 1.000000e-01 : f32, name = "nms"} : (tensor<1x6x4xf32>, tensor<1x2x6xf32>) -> tensor<?x3xi64>
// CHECK-NEXT: %sel2 = ascend_graph.non_max_suppression_v6 %boxes, %scores {center_point_box = false, max_output_boxes_per_class = 3 : i64, iou_threshold = 0.000000e+00 : f32, name = "nms_no_threshold"} : (tensor<1x6x4xf32>, tensor<1x2x6xf32>) -> tensor<?x3xi64>
