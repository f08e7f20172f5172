// RUN: dt-opt %s -dt-plan-memory -dt-number-spans | FileCheck %s

// Spans are numbered in module order over the ops that do work. Views and the
// loads and stores that the plan made aliases emit no code and get none; a store
// the plan could not place in its global's buffer copies and gets one.
module {
  dt.global param @w : tensor<8xf32> {init = {kind = "constant", value = 1.0 : f64}}
  dt.global grad @"grad/w" : tensor<8xf32>
  dt.global output @out : tensor<f32>

  // CHECK-LABEL: func.func @update
  func.func @update() {
    // CHECK: dt.load @w {dt.offsets = [0]}
    %w = dt.load @w : tensor<8xf32>
    // CHECK: dt.load @"grad/w" {dt.offsets = [64]}
    %g = dt.load @"grad/w" : tensor<8xf32>
    // CHECK: dt.fused(%{{.*}}, %{{.*}}) {dt.offsets = [0], dt.span = 0 : i64}
    %n = dt.fused(%w, %g) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
    ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
      %s = dt.sub %a, %b : tensor<8xf32>
      dt.yield %s : tensor<8xf32>
    }
    // Computed in place: the store is the fused region's own write.
    // CHECK: dt.store %{{.*}}, @w : tensor<8xf32>
    dt.store %n, @w : tensor<8xf32>
    return
  }

  // CHECK-LABEL: func.func @transients
  func.func @transients() {
    %w = dt.load @w : tensor<8xf32>
    // CHECK: dt.reshape %{{.*}} {dt.offsets = [0]}
    %r = dt.reshape %w : tensor<8xf32> -> tensor<2x4xf32>
    // CHECK: dt.reduce_sum {{.*}} {dt.offsets = [192], dt.span = 1 : i64}
    %c = dt.reduce_sum %r [0, 1] : tensor<2x4xf32> -> tensor<f32>
    // @out is stored twice, so neither sum can be computed into it: copies.
    // CHECK: dt.store %{{.*}}, @out {dt.span = 2 : i64}
    dt.store %c, @out : tensor<f32>
    // CHECK: dt.fused(%{{.*}}) {dt.offsets = [64], dt.span = 3 : i64}
    %e = dt.fused(%w) : (tensor<8xf32>) -> tensor<8xf32> {
    ^bb0(%x: tensor<8xf32>):
      %y = dt.exp %x : tensor<8xf32>
      dt.yield %y : tensor<8xf32>
    }
    // CHECK: dt.store %{{.*}}, @"grad/w" : tensor<8xf32>
    dt.store %e, @"grad/w" : tensor<8xf32>
    // CHECK: dt.reduce_sum {{.*}} {dt.offsets = [192], dt.span = 4 : i64}
    %s = dt.reduce_sum %w [0] : tensor<8xf32> -> tensor<f32>
    // CHECK: dt.store %{{.*}}, @out {dt.span = 5 : i64}
    dt.store %s, @out : tensor<f32>
    return
  }
}

