// RUN: dt-opt %s -canonicalize | FileCheck %s

// Pattern: matmul(a, transpose(b)) => matmul(a, b) {transpose_rhs}
// CHECK-LABEL: func.func @fold_transpose_rhs
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<16x8xf32>)
func.func @fold_transpose_rhs(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  // CHECK-NOT: dt.transpose
  // CHECK: dt.matmul %[[X]], %[[W]] {transpose_rhs}
  %t = dt.transpose %w [1, 0] : tensor<16x8xf32> -> tensor<8x16xf32>
  %y = dt.matmul %x, %t : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// A transpose that is already folded toggles back.
// CHECK-LABEL: func.func @fold_transpose_lhs_toggles
func.func @fold_transpose_lhs_toggles(%a: tensor<2x3x4xf32>, %b: tensor<2x3x5xf32>) -> tensor<2x4x5xf32> {
  // CHECK: dt.matmul %{{.*}}, %{{.*}} {transpose_lhs}
  %t = dt.transpose %a [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %y = dt.matmul %t, %b : tensor<2x4x3xf32>, tensor<2x3x5xf32> -> tensor<2x4x5xf32>
  return %y : tensor<2x4x5xf32>
}

// Other permutations are real copies.
// CHECK-LABEL: func.func @keep_other_permutations
func.func @keep_other_permutations(%a: tensor<3x2x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
  // CHECK: dt.transpose
  %t = dt.transpose %a [1, 0, 2] : tensor<3x2x4xf32> -> tensor<2x3x4xf32>
  %y = dt.matmul %t, %b : tensor<2x3x4xf32>, tensor<2x4x5xf32> -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// Broadcasts and reshapes to the same type vanish; a splat broadcast is a splat.
// CHECK-LABEL: func.func @fold_noops
func.func @fold_noops(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<2x4xf32>) {
  %0 = dt.broadcast_to %a : tensor<4xf32> -> tensor<4xf32>
  %1 = dt.reshape %a : tensor<4xf32> -> tensor<4xf32>
  %c = dt.constant dense<2.0> : tensor<f32>
  // CHECK: %[[C:.*]] = dt.constant dense<2.000000e+00> : tensor<2x4xf32>
  %2 = dt.broadcast_to %c : tensor<f32> -> tensor<2x4xf32>
  // CHECK: return %{{.*}}, %{{.*}}, %[[C]]
  return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<2x4xf32>
}

// Pattern: embedding(convert(table), ids) => convert(embedding(table, ids)):
// the rows looked up are converted, not the whole table.
// CHECK-LABEL: func.func @convert_looked_up_rows
// CHECK-SAME: (%[[W:.*]]: tensor<64x8xf32>, %[[IDS:.*]]: tensor<2x4xi32>)
func.func @convert_looked_up_rows(%w: tensor<64x8xf32>, %ids: tensor<2x4xi32>) -> tensor<2x4x8xbf16> {
  // CHECK: %[[ROWS:.*]] = dt.embedding %[[W]], %[[IDS]] : tensor<64x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  // CHECK: dt.convert %[[ROWS]] : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
  %t = dt.convert %w : tensor<64x8xf32> to tensor<64x8xbf16>
  %y = dt.embedding %t, %ids : tensor<64x8xbf16>, tensor<2x4xi32> -> tensor<2x4x8xbf16>
  return %y : tensor<2x4x8xbf16>
}

// A lookup larger than its table converts the table once.
// CHECK-LABEL: func.func @convert_small_table
func.func @convert_small_table(%w: tensor<4x8xf32>, %ids: tensor<2x4xi32>) -> tensor<2x4x8xbf16> {
  // CHECK: dt.convert %{{.*}} : tensor<4x8xf32> to tensor<4x8xbf16>
  // CHECK: dt.embedding %{{.*}} -> tensor<2x4x8xbf16>
  %t = dt.convert %w : tensor<4x8xf32> to tensor<4x8xbf16>
  %y = dt.embedding %t, %ids : tensor<4x8xbf16>, tensor<2x4xi32> -> tensor<2x4x8xbf16>
  return %y : tensor<2x4x8xbf16>
}
