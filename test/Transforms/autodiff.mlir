// RUN: dt-opt %s -split-input-file -dt-autodiff | FileCheck %s
// RUN: dt-opt %s -split-input-file -dt-autodiff -verify-diagnostics -o /dev/null

// A linear classifier: grad_step stores the loss and one gradient per parameter, and
// never differentiates with respect to the input data.

dt.global param @w : tensor<4x8xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.1 : f64}}
dt.global param @b : tensor<4xf32> {init = {kind = "constant", value = 0.0 : f64}}
dt.global input @"in/train.x" : tensor<16x8xf32>
dt.global input @"in/train.y" : tensor<16xi32>

// CHECK-DAG: dt.global output @"out/loss" : tensor<f32>
// CHECK-DAG: dt.global grad @"grad/w" : tensor<4x8xf32>
// CHECK-DAG: dt.global grad @"grad/b" : tensor<4xf32>
// CHECK-NOT: func.func @loss
// CHECK-LABEL: func.func @grad_step()
func.func @loss() -> tensor<f32> {
  // CHECK: %[[X:.*]] = dt.load @"in/train.x"
  // CHECK: %[[Y:.*]] = dt.load @"in/train.y"
  %x = dt.load @"in/train.x" : tensor<16x8xf32>
  %y = dt.load @"in/train.y" : tensor<16xi32>
  %w = dt.load @w : tensor<4x8xf32>
  %b = dt.load @b : tensor<4xf32>
  // CHECK: %[[LOGITS:.*]] = dt.add
  %h = dt.matmul %x, %w {transpose_rhs} : tensor<16x8xf32>, tensor<4x8xf32> -> tensor<16x4xf32>
  %bb = dt.broadcast_to %b : tensor<4xf32> -> tensor<16x4xf32>
  %logits = dt.add %h, %bb : tensor<16x4xf32>
  // CHECK: %[[LOSS:.*]] = dt.cross_entropy %[[LOGITS]], %[[Y]]
  %l = dt.cross_entropy %logits, %y : tensor<16x4xf32>, tensor<16xi32> -> tensor<f32>
  // The adjoint of the loss is 1.
  // CHECK: %[[ONE:.*]] = dt.constant dense<1.000000e+00> : tensor<f32>
  // CHECK: %[[DLOGITS:.*]] = dt.cross_entropy_grad %[[LOGITS]], %[[Y]], %[[ONE]]
  // The bias gradient sums the broadcast dimension away.
  // CHECK: %[[DB:.*]] = dt.reduce_sum %[[DLOGITS]] [0]
  // dW = dH^T X, with the transpose folded into the product.
  // CHECK: %[[DW:.*]] = dt.matmul %[[DLOGITS]], %[[X]] {transpose_lhs}
  // No gradient flows into the data: X is never a matmul result.
  // CHECK-NOT: -> tensor<16x8xf32>
  // CHECK: dt.store %[[LOSS]], @"out/loss"
  // CHECK: dt.store %[[DW]], @"grad/w"
  // CHECK: dt.store %[[DB]], @"grad/b"
  // CHECK: return
  return %l : tensor<f32>
}

// -----

// Gradient accumulation adds into the gradient globals; a parameter used twice gets
// the sum of both uses' adjoints.
module attributes {dt.accumulation = 4 : i64} {
  dt.global param @w : tensor<3xf32> {init = {kind = "constant", value = 1.0 : f64}}
  // CHECK-LABEL: func.func @grad_step
  func.func @loss() -> tensor<f32> {
    %w = dt.load @w : tensor<3xf32>
    %sq = dt.mul %w, %w : tensor<3xf32>
    %s = dt.reduce_sum %sq [0] : tensor<3xf32> -> tensor<f32>
    // The scalar adjoint broadcasts back over the summed dimension.
    // CHECK: %[[G0:.*]] = dt.broadcast_to %{{.*}} : tensor<f32> -> tensor<3xf32>
    // CHECK: %[[A:.*]] = dt.mul %[[G0]], %[[W:.*]] : tensor<3xf32>
    // CHECK: %[[B:.*]] = dt.mul %[[G0]], %[[W]] : tensor<3xf32>
    // CHECK: %[[G:.*]] = dt.add %[[A]], %[[B]]
    // CHECK: %[[OLD:.*]] = dt.load @"grad/w"
    // CHECK: %[[NEW:.*]] = dt.add %[[OLD]], %[[G]]
    // CHECK: dt.store %[[NEW]], @"grad/w"
    return %s : tensor<f32>
  }
}

// -----

// A parameter the loss never reads still gets a gradient (zero), with a warning.
dt.global param @used : tensor<2xf32> {init = {kind = "constant", value = 1.0 : f64}}
// expected-warning @+1 {{parameter 'unused' does not affect the loss}}
dt.global param @unused : tensor<2xf32> {init = {kind = "constant", value = 1.0 : f64}}
// CHECK-LABEL: func.func @grad_step
func.func @loss() -> tensor<f32> {
  %u = dt.load @used : tensor<2xf32>
  %s = dt.reduce_sum %u [0] : tensor<2xf32> -> tensor<f32>
  // CHECK: %[[Z:.*]] = dt.constant dense<0.000000e+00> : tensor<2xf32>
  // CHECK: dt.store %[[Z]], @"grad/unused"
  return %s : tensor<f32>
}

// -----

// Dynamic loss scaling: backward starts from the scale 512 * 2^e instead of 1.
module attributes {dt.loss_scale = {init = 512.0 : f64, growth_interval = 2000 : i64}} {
  dt.global param @w : tensor<3xf32> {init = {kind = "constant", value = 1.0 : f64}}
  // CHECK: dt.global state @"amp/scale_exp" : tensor<f32>
  // CHECK-LABEL: func.func @grad_step
  func.func @loss() -> tensor<f32> {
    // CHECK: %[[L:.*]] = dt.reduce_sum
    // CHECK: %[[E:.*]] = dt.load @"amp/scale_exp"
    // CHECK: %[[TWO:.*]] = dt.constant dense<2.000000e+00>
    // CHECK: %[[INIT:.*]] = dt.constant dense<5.120000e+02>
    // CHECK: %[[POW:.*]] = dt.pow %[[TWO]], %[[E]]
    // CHECK: %[[SEED:.*]] = dt.mul %[[INIT]], %[[POW]]
    // CHECK: dt.broadcast_to %[[SEED]] : tensor<f32> -> tensor<3xf32>
    // The reported loss is not scaled.
    // CHECK: dt.store %[[L]], @"out/loss"
    %w = dt.load @w : tensor<3xf32>
    %s = dt.reduce_sum %w [0] : tensor<3xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A frozen parameter (`freeze`) is a constant: no gradient global, no adjoint
// flows into it; the layer above it still trains.
dt.global param @frozen : tensor<4x8xf32> {dt.frozen, init = {kind = "normal", mean = 0.0 : f64, std = 0.1 : f64}}
dt.global param @head : tensor<4xf32> {init = {kind = "constant", value = 0.0 : f64}}
dt.global input @"in/train.x" : tensor<16x8xf32>
dt.global input @"in/train.y" : tensor<16xi32>

// CHECK-NOT: dt.global grad @"grad/frozen"
// CHECK: dt.global grad @"grad/head" : tensor<4xf32>
// CHECK-NOT: dt.global grad @"grad/frozen"
// CHECK-LABEL: func.func @grad_step()
func.func @loss() -> tensor<f32> {
  %x = dt.load @"in/train.x" : tensor<16x8xf32>
  %y = dt.load @"in/train.y" : tensor<16xi32>
  %w = dt.load @frozen : tensor<4x8xf32>
  %b = dt.load @head : tensor<4xf32>
  %h = dt.matmul %x, %w {transpose_rhs} : tensor<16x8xf32>, tensor<4x8xf32> -> tensor<16x4xf32>
  %bb = dt.broadcast_to %b : tensor<4xf32> -> tensor<16x4xf32>
  %logits = dt.add %h, %bb : tensor<16x4xf32>
  %l = dt.cross_entropy %logits, %y : tensor<16x4xf32>, tensor<16xi32> -> tensor<f32>
  // Only the bias's gradient is built: no product with the data.
  // CHECK: dt.cross_entropy_grad
  // CHECK-NOT: dt.matmul {{.*}}transpose_lhs
  // CHECK: dt.store %{{.*}}, @"grad/head"
  // CHECK-NOT: @"grad/frozen"
  // CHECK: return
  return %l : tensor<f32>
}

// -----

// Attention's gradient takes the forward's result and log-sum-exp back
// (FlashAttention-2's saved state), beside Q, K, V and the result's adjoint.
dt.global param @q : tensor<1x2x4x8xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.1 : f64}}

// CHECK-LABEL: func.func @grad_step()
func.func @loss() -> tensor<f32> {
  %q = dt.load @q : tensor<1x2x4x8xf32>
  // CHECK: %[[Q:.*]] = dt.load @q
  // CHECK: %[[O:.*]], %[[LSE:.*]] = dt.attention %[[Q]], %[[Q]], %[[Q]] {causal} : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  %o, %lse = dt.attention %q, %q, %q {causal} : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  %s = dt.reduce_sum %o [0, 1, 2, 3] : tensor<1x2x4x8xf32> -> tensor<f32>
  // CHECK: dt.attention_grad %[[Q]], %[[Q]], %[[Q]], %[[O]], %[[LSE]], %{{.*}} {causal} : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  // CHECK: dt.store %{{.*}}, @"grad/q"
  return %s : tensor<f32>
}

// -----

// Q, K and V transposed into heads: the gradient transposes them again from
// the same [B, T, H, D] tensors (marked recomputed, so CSE keeps the copies)
// instead of keeping the forward's transposed copies until backward.
dt.global param @x : tensor<1x4x2x8xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.1 : f64}}

// CHECK-LABEL: func.func @grad_step()
func.func @loss() -> tensor<f32> {
  // CHECK: %[[X:.*]] = dt.load @x
  // CHECK: %[[T:.*]] = dt.transpose %[[X]] [0, 2, 1, 3]
  // CHECK: %[[O:.*]], %[[LSE:.*]] = dt.attention %[[T]], %[[T]], %[[T]]
  %x = dt.load @x : tensor<1x4x2x8xf32>
  %t = dt.transpose %x [0, 2, 1, 3] : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %o, %lse = dt.attention %t, %t, %t {causal} : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  %s = dt.reduce_sum %o [0, 1, 2, 3] : tensor<1x2x4x8xf32> -> tensor<f32>
  // CHECK: %[[AGAIN:.*]] = dt.transpose %[[X]] [0, 2, 1, 3] {dt.recomputed = ""}
  // CHECK-NEXT: dt.attention_grad %[[AGAIN]], %[[AGAIN]], %[[AGAIN]], %[[O]], %[[LSE]]
  return %s : tensor<f32>
}
