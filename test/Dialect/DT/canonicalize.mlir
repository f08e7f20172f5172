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
