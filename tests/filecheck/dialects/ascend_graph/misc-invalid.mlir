// What the ascend_graph verifier refuses of TfIdfVectorizer, Resize's tf_crop_and_resize and a Tril/Triu
// with a computed diagonal: each message names the op, its node name and the rule.
// RUN: ge-opt %s --split-input-file --verify-diagnostics | filecheck %s

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<3x3xf32>
    %k = ascend_graph.data {index = 1 : i64, name = "k"} : tensor<i64>
    %y = ascend_graph.tril %x, %k {diagonal = 1 : i64, name = "both"} : (tensor<3x3xf32>, tensor<i64>) -> tensor<3x3xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<3x3xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<3x3xf32>
    %k = ascend_graph.data {index = 1 : i64, name = "k"} : tensor<2xi64>
    %y = ascend_graph.triu %x, %k {name = "two"} : (tensor<3x3xf32>, tensor<2xi64>) -> tensor<3x3xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<3x3xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %t = ascend_graph.data {index = 0 : i64, name = "t"} : tensor<6xi64>
    %y = ascend_graph.tf_idf_vectorizer %t {min_gram_length = 1 : i64, max_gram_length = 1 : i64, max_skip_count = 0 : i64, mode = "BM25", ngram_counts = array<i64: 0>, ngram_indexes = array<i64: 0>, pool = array<i64: 4>, name = "bm25"} : (tensor<6xi64>) -> tensor<1xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<1xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %t = ascend_graph.data {index = 0 : i64, name = "t"} : tensor<6xf32>
    %y = ascend_graph.tf_idf_vectorizer %t {min_gram_length = 1 : i64, max_gram_length = 1 : i64, max_skip_count = 0 : i64, mode = "TF", ngram_counts = array<i64: 0>, ngram_indexes = array<i64: 0>, pool = array<i64: 4>, name = "floats"} : (tensor<6xf32>) -> tensor<1xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<1xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %t = ascend_graph.data {index = 0 : i64, name = "t"} : tensor<6xi64>
    %y = ascend_graph.tf_idf_vectorizer %t {min_gram_length = 2 : i64, max_gram_length = 1 : i64, max_skip_count = 0 : i64, mode = "TF", ngram_counts = array<i64: 0>, ngram_indexes = array<i64: 0>, pool = array<i64: 4>, name = "lengths"} : (tensor<6xi64>) -> tensor<1xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<1xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<1x1x4x4xf32>
    %y = ascend_graph.resize %x {sizes = array<i64: 1, 1, 3, 3>, scales = array<f64: 1.0, 1.0, 0.75, 0.75>, mode = "linear", coordinate_transformation_mode = "tf_crop_and_resize", nearest_mode = "floor", cubic_coeff_a = -7.500000e-01 : f32, exclude_outside = false, extrapolation_value = 0.0 : f32, name = "no_roi"} : (tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<1x1x3x3xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<1x1x4x4xf32>
    %y = ascend_graph.resize %x {sizes = array<i64: 1, 1, 3, 3>, scales = array<f64: 1.0, 1.0, 0.75, 0.75>, mode = "linear", coordinate_transformation_mode = "tf_crop_and_resize", nearest_mode = "floor", cubic_coeff_a = -7.500000e-01 : f32, exclude_outside = false, extrapolation_value = 0.0 : f32, roi = array<f64: 0.0, 1.0>, name = "short_roi"} : (tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<1x1x3x3xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<3x3xf32>
    %a = ascend_graph.data {index = 1 : i64, name = "a"} : tensor<f32>
    %y = ascend_graph.cumsum %x, %a {exclusive = false, reverse = false, name = "float_axis"} : (tensor<3x3xf32>, tensor<f32>) -> tensor<3x3xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<3x3xf32>
  }
}

// -----

builtin.module {
  ascend_graph.graph @g {
    %x = ascend_graph.data {index = 0 : i64, name = "x"} : tensor<3x3xf32>
    %y = ascend_graph.cumprod %x {exclusive = false, reverse = false, name = "no_axis"} : (tensor<3x3xf32>) -> tensor<3x3xf32>
    ascend_graph.net_output %y {names = ["y"]} : tensor<3x3xf32>
  }
}

// CHECK: in the input: Tril 'both': needs the diagonal as either the diagonal property or the k operand
// CHECK: in the input: Triu 'two': k must be one int64, got i64 [2]
// CHECK: in the input: TfIdfVectorizer 'bm25': mode 'BM25' is not TF, IDF or TFIDF
// CHECK: in the input: TfIdfVectorizer 'floats': needs integer tokens of rank 1 or 2, got f32 [6]
// CHECK: in the input: TfIdfVectorizer 'lengths': needs 1 <= min_gram_length <= max_gram_length and a non-negative max_skip_count
// CHECK: in the input: Resize 'no_roi': roi is given exactly when coordinate_transformation_mode is tf_crop_and_resize
// CHECK: in the input: Resize 'short_roi': roi needs 8 entries (every dim's start, then every dim's end)
// CHECK: in the input: Cumsum 'float_axis': axis_input must be one int32 or int64, got f32 []
// CHECK: in the input: Cumprod 'no_axis': needs the axis as either the axis property or the axis_input operand
