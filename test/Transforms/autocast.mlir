// RUN: dt-opt %s -split-input-file -dt-autocast | FileCheck %s
// RUN: dt-opt %s -split-input-file -dt-autocast -dt-autodiff -cse | FileCheck %s --check-prefix=GRAD

// precision = bf16: parameters and float inputs are converted where they are loaded
// (once per use), every op computes in its operands' type, constants take the type
// they meet, and the loss and what the loss expression computes from it stay f32.

module attributes {dt.precision = "bf16"} {
  dt.global param @w : tensor<4x8xf32> {init = {kind = "constant", value = 0.5 : f64}}
  dt.global input @"in/train.x" : tensor<2x8xf32>
  dt.global input @"in/train.y" : tensor<2xi32>
  // CHECK-LABEL: func.func @loss() -> tensor<f32>
  // GRAD-LABEL: func.func @grad_step()
  func.func @loss() -> tensor<f32> {
    // CHECK: %[[X:.*]] = dt.load @"in/train.x" : tensor<2x8xf32>
    // CHECK: %[[XL:.*]] = dt.convert %[[X]] : tensor<2x8xf32> to tensor<2x8xbf16>
    // Labels are integers and stay as they are.
    // CHECK: %[[Y:.*]] = dt.load @"in/train.y" : tensor<2xi32>
    // CHECK: %[[W:.*]] = dt.load @w : tensor<4x8xf32>
    // CHECK-COUNT-3: dt.convert %[[W]] : tensor<4x8xf32> to tensor<4x8xbf16>
    %x = dt.load @"in/train.x" : tensor<2x8xf32>
    %y = dt.load @"in/train.y" : tensor<2xi32>
    %w = dt.load @w : tensor<4x8xf32>
    // CHECK: %[[H:.*]] = dt.matmul %[[XL]], %{{.*}} {transpose_rhs} : tensor<2x8xbf16>, tensor<4x8xbf16> -> tensor<2x4xbf16>
    %h = dt.matmul %x, %w {transpose_rhs} : tensor<2x8xf32>, tensor<4x8xf32> -> tensor<2x4xf32>
    // A constant meets a bf16 activation: it becomes bf16, not the activation f32.
    // CHECK: %[[HALF:.*]] = dt.broadcast_to %{{.*}} : tensor<f32> -> tensor<2x4xf32>
    // CHECK: %[[HALFL:.*]] = dt.convert %[[HALF]] : tensor<2x4xf32> to tensor<2x4xbf16>
    // CHECK: %[[Z:.*]] = dt.mul %[[H]], %[[HALFL]] : tensor<2x4xbf16>
    %half = dt.constant dense<0.5> : tensor<f32>
    %halves = dt.broadcast_to %half : tensor<f32> -> tensor<2x4xf32>
    %z = dt.mul %h, %halves : tensor<2x4xf32>
    // CHECK: %[[L:.*]] = dt.cross_entropy %[[Z]], %[[Y]] : tensor<2x4xbf16>, tensor<2xi32> -> tensor<f32>
    %l = dt.cross_entropy %z, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<f32>
    // A bf16 penalty meets the f32 loss: the sum is f32.
    // CHECK: %[[S:.*]] = dt.reduce_sum %{{.*}} [0] : tensor<4xbf16> -> tensor<bf16>
    // CHECK: %[[SF:.*]] = dt.convert %[[S]] : tensor<bf16> to tensor<f32>
    // CHECK: %[[T:.*]] = dt.add %[[L]], %[[SF]] : tensor<f32>
    // CHECK: %[[U:.*]] = dt.mul %[[T]], %{{.*}} : tensor<f32>
    // CHECK: return %[[U]] : tensor<f32>
    %wsq = dt.mul %w, %w : tensor<4x8xf32>
    %s1 = dt.reduce_sum %wsq [1] : tensor<4x8xf32> -> tensor<4xf32>
    %s = dt.reduce_sum %s1 [0] : tensor<4xf32> -> tensor<f32>
    %t = dt.add %l, %s : tensor<f32>
    %tenth = dt.constant dense<0.1> : tensor<f32>
    %u = dt.mul %t, %tenth : tensor<f32>

    // Backward runs in bf16; each use's adjoint comes back to f32 through its own
    // conversion and they are summed in f32 into the f32 gradient.
    // GRAD: dt.cross_entropy_grad {{.*}} : tensor<2x4xbf16>, tensor<2xi32>, tensor<f32> -> tensor<2x4xbf16>
    // (The penalty's two uses have one adjoint, which CSE converts once.)
    // GRAD: %[[G1:.*]] = dt.convert %{{.*}} : tensor<4x8xbf16> to tensor<4x8xf32>
    // GRAD: %[[G2:.*]] = dt.convert %{{.*}} : tensor<4x8xbf16> to tensor<4x8xf32>
    // GRAD: %[[G12:.*]] = dt.add %[[G1]], %[[G2]] : tensor<4x8xf32>
    // GRAD: %[[G:.*]] = dt.add %[[G12]], %[[G2]] : tensor<4x8xf32>
    // GRAD: dt.store %[[G]], @"grad/w" : tensor<4x8xf32>
    return %u : tensor<f32>
  }
}

// -----

// Evaluation computes in bf16 too; what it stores goes back to the f32 global.
module attributes {dt.precision = "bf16"} {
  dt.global param @w : tensor<4xf32> {init = {kind = "constant", value = 0.5 : f64}}
  dt.global output @"out/eval_loss" : tensor<f32>
  func.func @loss() -> tensor<f32> {
    %w = dt.load @w : tensor<4xf32>
    %s = dt.reduce_sum %w [0] : tensor<4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
  // CHECK-LABEL: func.func @eval_step()
  func.func @eval_step() {
    // CHECK: %[[S:.*]] = dt.reduce_sum %{{.*}} [0] : tensor<4xbf16> -> tensor<bf16>
    // CHECK: %[[SF:.*]] = dt.convert %[[S]] : tensor<bf16> to tensor<f32>
    // CHECK: dt.store %[[SF]], @"out/eval_loss" : tensor<f32>
    %w = dt.load @w : tensor<4xf32>
    %s = dt.reduce_sum %w [0] : tensor<4xf32> -> tensor<f32>
    dt.store %s, @"out/eval_loss" : tensor<f32>
    return
  }
}

// -----

// Without dt.precision (or with "f32") nothing changes.
// CHECK-LABEL: func.func @loss
// CHECK-NOT: dt.convert
module {
  dt.global param @w : tensor<4xf32> {init = {kind = "constant", value = 0.5 : f64}}
  func.func @loss() -> tensor<f32> {
    %w = dt.load @w : tensor<4xf32>
    %s = dt.reduce_sum %w [0] : tensor<4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Attention computes in bf16, but its log-sum-exp stays f32: the statistics'
// precision, which its gradient reads back.
// CHECK-LABEL: func.func @loss
// CHECK: dt.attention %{{.*}} : tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>
module attributes {dt.precision = "bf16"} {
  dt.global param @q : tensor<1x2x4x8xf32> {init = {kind = "constant", value = 0.5 : f64}}
  func.func @loss() -> tensor<f32> {
    %q = dt.load @q : tensor<1x2x4x8xf32>
    %o, %lse = dt.attention %q, %q, %q {causal} : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
    %s = dt.reduce_sum %o [0, 1, 2, 3] : tensor<1x2x4x8xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
