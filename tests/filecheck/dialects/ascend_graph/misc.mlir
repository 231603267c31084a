// TfIdfVectorizer (with and without weights), Resize's tf_crop_and_resize (its roi over every dim) and
// Tril/Triu with a computed diagonal (the k operand) and Cumsum/Cumprod with a computed axis (axis_input) round trip.
// RUN: ge-opt %s | filecheck %s
// RUN: ge-opt %s | ge-opt | filecheck %s
// RUN: ge-opt %s --print-op-generic | ge-opt | filecheck %s

builtin.module {
  ascend_graph.graph @misc {
    %tokens = ascend_graph.data {index = 0 : i64, name = "tokens"} : tensor<2x9xi32>
    %x = ascend_graph.data {index = 1 : i64, name = "x"} : tensor<1x2x5x6xf32>
    %k = ascend_graph.data {index = 2 : i64, name = "k"} : tensor<i64>
    %axis = ascend_graph.data {index = 3 : i64, name = "axis"} : tensor<i32>
    %tfidf = ascend_graph.tf_idf_vectorizer %tokens {min_gram_length = 1 : i64, max_gram_length = 3 : i64, max_skip_count = 2 : i64, mode = "TFIDF", ngram_counts = array<i64: 0, 4, 10>, ngram_indexes = array<i64: 7, 0, 2, 1, 3, 4, 6, 5>, pool = array<i64: 2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 3, 3, 3>, weights = array<f64: 1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00, 7.000000e+00, 2.500000e-01>, name = "tfidf"} : (tensor<2x9xi32>) -> tensor<2x8xf32>
    %tf = ascend_graph.tf_idf_vectorizer %tokens {min_gram_length = 2 : i64, max_gram_length = 2 : i64, max_skip_count = 0 : i64, mode = "TF", ngram_counts = array<i64: 0, 0>, ngram_indexes = array<i64: 0, 1, 2>, pool = array<i64: 5, 6, 7, 8, 6, 7>, name = "tf"} : (tensor<2x9xi32>) -> tensor<2x3xf32>
    %crop = ascend_graph.resize %x {sizes = array<i64: 1, 2, 4, 3>, scales = array<f64: 1.000000e+00, 1.000000e+00, 8.000000e-01, 5.000000e-01>, mode = "linear", coordinate_transformation_mode = "tf_crop_and_resize", nearest_mode = "round_prefer_floor", cubic_coeff_a = -7.500000e-01 : f32, exclude_outside = false, extrapolation_value = 3.000000e+00 : f32, roi = array<f64: 0.000000e+00, 0.000000e+00, 2.500000e-01, 0.000000e+00, 1.000000e+00, 1.000000e+00, 1.250000e+00, 5.000000e-01>, name = "crop"} : (tensor<1x2x5x6xf32>) -> tensor<1x2x4x3xf32>
    %lower = ascend_graph.tril %x, %k {name = "lower"} : (tensor<1x2x5x6xf32>, tensor<i64>) -> tensor<1x2x5x6xf32>
    %upper = ascend_graph.triu %x, %k {name = "upper"} : (tensor<1x2x5x6xf32>, tensor<i64>) -> tensor<1x2x5x6xf32>
    %sum = ascend_graph.cumsum %x, %axis {exclusive = true, reverse = false, name = "sum"} : (tensor<1x2x5x6xf32>, tensor<i32>) -> tensor<1x2x5x6xf32>
    %prod = ascend_graph.cumprod %x, %axis {exclusive = false, reverse = true, name = "prod"} : (tensor<1x2x5x6xf32>, tensor<i32>) -> tensor<1x2x5x6xf32>
    ascend_graph.net_output %tfidf, %tf, %crop, %lower, %upper, %sum, %prod {names = ["tfidf", "tf", "crop", "lower", "upper", "sum", "prod"]} : tensor<2x8xf32>, tensor<2x3xf32>, tensor<1x2x4x3xf32>, tensor<1x2x5x6xf32>, tensor<1x2x5x6xf32>, tensor<1x2x5x6xf32>, tensor<1x2x5x6xf32>
  }
}

// CHECK:      %tfidf = ascend_graph.tf_idf_vectorizer %tokens {min_gram_length = 1 : i64, max_gram_length = 3 : i64, max_skip_count = 2 : i64, mode = "TFIDF", ngram_counts = array<i64: 0, 4, 10>, ngram_indexes = array<i64: 7, 0, 2, 1, 3, 4, 6, 5>, pool = array<i64: 2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 3, 3, 3>, weights = array<f64: 1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00, 7.000000e+00, 2.500000e-01>, name = "tfidf"} : (tensor<2x9xi32>) -> tensor<2x8xf32>
// CHECK-NEXT: %tf = ascend_graph.tf_idf_vectorizer %tokens {min_gram_length = 2 : i64, max_gram_length = 2 : i64, max_skip_count = 0 : i64, mode = "TF", ngram_counts = array<i64: 0, 0>, ngram_indexes = array<i64: 0, 1, 2>, pool = array<i64: 5, 6, 7, 8, 6, 7>, name = "tf"} : (tensor<2x9xi32>) -> tensor<2x3xf32>
// CHECK-NEXT: %crop = ascend_graph.resize %x {sizes = array<i64: 1, 2, 4, 3>, scales = array<f64: 1.000000e+00, 1.000000e+00, 8.000000e-01, 5.000000e-01>, mode = "linear", coordinate_transformation_mode = "tf_crop_and_resize", nearest_mode = "round_prefer_floor", cubic_coeff_a = -7.500000e-01 : f32, exclude_outside = false, extrapolation_value = 3.000000e+00 : f32, roi = array<f64: 0.000000e+00, 0.000000e+00, 2.500000e-01, 0.000000e+00, 1.000000e+00, 1.000000e+00, 1.250000e+00, 5.000000e-01>, name = "crop"} : (tensor<1x2x5x6xf32>) -> tensor<1x2x4x3xf32>
// CHECK-NEXT: %lower = ascend_graph.tril %x, %k {name = "lower"} : (tensor<1x2x5x6xf32>, tensor<i64>) -> tensor<1x2x5x6xf32>
// CHECK-NEXT: %upper = ascend_graph.triu %x, %k {name = "upper"} : (tensor<1x2x5x6xf32>, tensor<i64>) -> tensor<1x2x5x6xf32>
// CHECK-NEXT: %sum = ascend_graph.cumsum %x, %axis {exclusive = true, reverse = false, name = "sum"} : (tensor<1x2x5x6xf32>, tensor<i32>) -> tensor<1x2x5x6xf32>
// CHECK-NEXT: %prod = ascend_graph.cumprod %x, %axis {exclusive = false, reverse = true, name = "prod"} : (tensor<1x2x5x6xf32>, tensor<i32>) -> tensor<1x2x5x6xf32>
