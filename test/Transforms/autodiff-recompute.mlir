// RUN: dt-opt %s -dt-autodiff -cse | FileCheck %s

// Activation recomputation: with `dt.recompute` naming layers l0 and l1, the VJPs
// of the ops whose location names those layers (or a layer below them, l0.act) are
// built on copies of the layers' forward, cloned just before each layer's backward,
// last layer first. Backward then reads only what the layers read from outside: the
// input x, the parameters and l0's output r0 (l1's input). The copies carry
// `dt.recomputed`, which also keeps CSE from merging them into the forward ops.

module attributes {dt.recompute = ["l0", "l1"]} {
  dt.global param @w0 : tensor<4x4xf32> {init = {kind = "constant", value = 0.5 : f64}}
  dt.global param @w1 : tensor<4x4xf32> {init = {kind = "constant", value = 0.5 : f64}}
  dt.global input @"in/train.x" : tensor<2x4xf32>

  // CHECK-LABEL: func.func @grad_step
  func.func @loss() -> tensor<f32> {
    // CHECK: %[[X:.*]] = dt.load @"in/train.x"
    // CHECK: %[[W0:.*]] = dt.load @w0
    // CHECK: %[[W1:.*]] = dt.load @w1
    %x = dt.load @"in/train.x" : tensor<2x4xf32>
    %w0 = dt.load @w0 : tensor<4x4xf32>
    %w1 = dt.load @w1 : tensor<4x4xf32>
    // The forward is unchanged.
    // CHECK: dt.matmul %[[X]], %[[W0]] :
    // CHECK: dt.tanh
    // CHECK: %[[R0:.*]] = dt.add
    // CHECK: dt.matmul %[[R0]], %[[W1]] :
    // CHECK: dt.tanh
    %h0 = dt.matmul %x, %w0 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32> loc("l0"("m.dt":3:5))
    %a0 = dt.tanh %h0 : tensor<2x4xf32> loc("l0.act"("m.dt":4:5))
    %r0 = dt.add %a0, %x : tensor<2x4xf32> loc("l0"("m.dt":5:5))
    %h1 = dt.matmul %r0, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32> loc("l1"("m.dt":3:5))
    %a1 = dt.tanh %h1 : tensor<2x4xf32> loc("l1"("m.dt":4:5))
    // Outside any recomputed layer.
    %s1 = dt.reduce_sum %a1 [1] : tensor<2x4xf32> -> tensor<2xf32>
    %s = dt.reduce_sum %s1 [0] : tensor<2xf32> -> tensor<f32>

    // l1 is recomputed from r0 before its backward, and tanh's VJP reads the copy.
    // CHECK: %[[H1C:.*]] = dt.matmul %[[R0]], %[[W1]] {dt.recomputed = "l1"}
    // CHECK: %[[A1C:.*]] = dt.tanh %[[H1C]] {dt.recomputed = "l1"}
    // CHECK: dt.mul %[[A1C]], %[[A1C]]
    // CHECK: %[[DW1:.*]] = dt.matmul %[[R0]], %{{.*}} {transpose_lhs}
    // Then l0, with its sublayer l0.act, from x. The residual add's VJP needs no
    // value, so no copy of it remains.
    // CHECK: %[[H0C:.*]] = dt.matmul %[[X]], %[[W0]] {dt.recomputed = "l0"}
    // CHECK: %[[A0C:.*]] = dt.tanh %[[H0C]] {dt.recomputed = "l0"}
    // CHECK-NOT: dt.add {{.*}}dt.recomputed
    // CHECK: dt.mul %[[A0C]], %[[A0C]]
    // CHECK: %[[DW0:.*]] = dt.matmul %[[X]], %{{.*}} {transpose_lhs}
    // CHECK: dt.store %[[DW0]], @"grad/w0"
    // CHECK: dt.store %[[DW1]], @"grad/w1"
    return %s : tensor<f32>
  }
}
