// RUN: dt-opt %s -split-input-file -dt-shard-propagation | FileCheck %s

// Data parallelism: the batch split flows through the forward; a bias broadcast
// is made for the rank's rows only (the split sinks into it); a sum over the batch
// and the weight gradient's contraction over it are partial sums, stored as they are
// into a gradient that holds summands.
// CHECK-LABEL: module @dp
module @dp {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  dt.global input @"in/train.x" : tensor<8x16xf32> {dt.batch, sharding = #dt.shard<[dp, _]>}
  dt.global param @w : tensor<32x16xf32> {init = {kind = "constant", value = 0.0 : f64}, sharding = #dt.shard<[_, _]>}
  dt.global param @b : tensor<32xf32> {init = {kind = "constant", value = 0.0 : f64}, sharding = #dt.shard<[_]>}
  dt.global grad @"grad/w" : tensor<32x16xf32> {sharding = #dt.shard<[_, _], partial = (dp)>}
  dt.global output @"out/y" : tensor<f32> {sharding = #dt.shard<[]>}
  // CHECK-LABEL: func.func @grad_step
  func.func @grad_step() {
    %x = dt.load @"in/train.x" : tensor<8x16xf32>
    %w = dt.load @w : tensor<32x16xf32>
    // CHECK: dt.matmul {{.*}}dt.sharding = [#dt.shard<[dp, _]>]
    %y = dt.matmul %x, %w {transpose_rhs} : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
    %b = dt.load @b : tensor<32xf32>
    // CHECK: dt.broadcast_to {{.*}}dt.sharding = [#dt.shard<[dp, _]>]
    %bb = dt.broadcast_to %b : tensor<32xf32> -> tensor<8x32xf32>
    // CHECK: dt.add
    // CHECK-NOT: dt.operand_shardings
    // CHECK-SAME: dt.sharding = [#dt.shard<[dp, _]>]
    %h = dt.add %y, %bb : tensor<8x32xf32>
    %r = dt.relu %h : tensor<8x32xf32>
    // CHECK: dt.reduce_sum {{.*}}dt.sharding = [#dt.shard<[], partial = (dp)>]
    %s = dt.reduce_sum %r [0, 1] : tensor<8x32xf32> -> tensor<f32>
    dt.store %s, @"out/y" : tensor<f32>
    // CHECK: dt.matmul {{.*}}dt.sharding = [#dt.shard<[_, _], partial = (dp)>], transpose_lhs
    %gw = dt.matmul %r, %x {transpose_lhs} : tensor<8x32xf32>, tensor<8x16xf32> -> tensor<32x16xf32>
    dt.store %gw, @"grad/w" : tensor<32x16xf32>
    return
  }
}

// -----

// Megatron's pair: the column layer's output is split over tp, the row layer's
// contraction over it makes a partial sum, which is summed before the bias is
// added (the one all-reduce of the pair's forward), not after.
// CHECK-LABEL: module @megatron
module @megatron {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["tp"]}
  dt.global input @"in/train.x" : tensor<8x16xf32> {dt.batch, sharding = #dt.shard<[_, _]>}
  dt.global param @up : tensor<32x16xf32> {init = {kind = "constant", value = 0.0 : f64}, sharding = #dt.shard<[tp, _]>}
  dt.global param @upb : tensor<32xf32> {init = {kind = "constant", value = 0.0 : f64}, sharding = #dt.shard<[tp]>}
  dt.global param @down : tensor<16x32xf32> {init = {kind = "constant", value = 0.0 : f64}, sharding = #dt.shard<[_, tp]>}
  dt.global param @downb : tensor<16xf32> {init = {kind = "constant", value = 0.0 : f64}, sharding = #dt.shard<[_]>}
  dt.global output @"out/y" : tensor<8x16xf32> {sharding = #dt.shard<[_, _]>}
  // CHECK-LABEL: func.func @forward
  func.func @forward() {
    %x = dt.load @"in/train.x" : tensor<8x16xf32>
    %w1 = dt.load @up : tensor<32x16xf32>
    // CHECK: dt.matmul {{.*}}dt.sharding = [#dt.shard<[_, tp]>]
    %h = dt.matmul %x, %w1 {transpose_rhs} : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
    %b1 = dt.load @upb : tensor<32xf32>
    %bb1 = dt.broadcast_to %b1 : tensor<32xf32> -> tensor<8x32xf32>
    %h1 = dt.add %h, %bb1 : tensor<8x32xf32>
    // CHECK: dt.gelu {{.*}}dt.sharding = [#dt.shard<[_, tp]>]
    %g = dt.gelu %h1 : tensor<8x32xf32>
    %w2 = dt.load @down : tensor<16x32xf32>
    // CHECK: dt.matmul {{.*}}dt.sharding = [#dt.shard<[_, _], partial = (tp)>]
    %y = dt.matmul %g, %w2 {transpose_rhs} : tensor<8x32xf32>, tensor<16x32xf32> -> tensor<8x16xf32>
    %b2 = dt.load @downb : tensor<16xf32>
    %bb2 = dt.broadcast_to %b2 : tensor<16xf32> -> tensor<8x16xf32>
    // CHECK: dt.add {{.*}}dt.operand_shardings = [#dt.shard<[_, _]>, #dt.shard<[_, _]>], dt.sharding = [#dt.shard<[_, _]>]
    %y1 = dt.add %y, %bb2 : tensor<8x16xf32>
    dt.store %y1, @"out/y" : tensor<8x16xf32>
    return
  }
}

// -----

// ZeRO-1: the update runs where the optimizer state lives. The gradient (a
// partial sum) is needed split by rows, which a reduce-scatter makes; the
// parameter (whole) is sliced for free; the new parameter is split, and its store
// into the whole parameter is where the all-gather goes.
// CHECK-LABEL: module @zero1
module @zero1 {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  dt.global param @w : tensor<16x8xf32> {init = {kind = "constant", value = 0.0 : f64}, sharding = #dt.shard<[_, _]>}
  dt.global grad @"grad/w" : tensor<16x8xf32> {sharding = #dt.shard<[_, _], partial = (dp)>}
  dt.global state @"sgd.momentum/w" : tensor<16x8xf32> {sharding = #dt.shard<[dp, _]>}
  // CHECK-LABEL: func.func @apply_step
  func.func @apply_step() {
    %w = dt.load @w : tensor<16x8xf32>
    %g = dt.load @"grad/w" : tensor<16x8xf32>
    %m = dt.load @"sgd.momentum/w" : tensor<16x8xf32>
    %c = dt.constant dense<0.9> : tensor<16x8xf32>
    // CHECK: dt.mul {{.*}}dt.sharding = [#dt.shard<[dp, _]>]
    %mm = dt.mul %m, %c : tensor<16x8xf32>
    // CHECK: dt.add {{.*}}dt.operand_shardings = [#dt.shard<[dp, _]>, #dt.shard<[dp, _]>], dt.sharding = [#dt.shard<[dp, _]>]
    %n = dt.add %mm, %g : tensor<16x8xf32>
    dt.store %n, @"sgd.momentum/w" : tensor<16x8xf32>
    // CHECK: dt.sub {{.*}}dt.operand_shardings = [#dt.shard<[dp, _]>, #dt.shard<[dp, _]>], dt.sharding = [#dt.shard<[dp, _]>]
    %p = dt.sub %w, %n : tensor<16x8xf32>
    dt.store %p, @w : tensor<16x8xf32>
    return
  }
}

// -----

// ZeRO-3: in an entry point that reads a batch, a parameter stored split over the
// data axis is used whole (the batch owns the data axis); elsewhere it is used as
// stored.
// CHECK-LABEL: module @zero3
module @zero3 {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  dt.global input @"in/train.x" : tensor<8x16xf32> {dt.batch, sharding = #dt.shard<[dp, _]>}
  dt.global param @w : tensor<10x16xf32> {init = {kind = "constant", value = 0.0 : f64}, sharding = #dt.shard<[dp, _]>}
  dt.global output @"out/y" : tensor<f32> {sharding = #dt.shard<[]>}
  // CHECK-LABEL: func.func @grad_step
  func.func @grad_step() {
    %x = dt.load @"in/train.x" : tensor<8x16xf32>
    // CHECK: dt.load @w {dt.sharding = [#dt.shard<[_, _]>]}
    %w = dt.load @w : tensor<10x16xf32>
    // CHECK: dt.matmul {{.*}}dt.sharding = [#dt.shard<[dp, _]>]
    %y = dt.matmul %x, %w {transpose_rhs} : tensor<8x16xf32>, tensor<10x16xf32> -> tensor<8x10xf32>
    %s = dt.reduce_sum %y [0, 1] : tensor<8x10xf32> -> tensor<f32>
    dt.store %s, @"out/y" : tensor<f32>
    return
  }
  // CHECK-LABEL: func.func @apply_step
  func.func @apply_step() {
    // CHECK: dt.load @w {dt.sharding = [#dt.shard<[dp, _]>]}
    %w = dt.load @w : tensor<10x16xf32>
    %c = dt.constant dense<0.5> : tensor<10x16xf32>
    // CHECK: dt.mul {{.*}}dt.sharding = [#dt.shard<[dp, _]>]
    %p = dt.mul %w, %c : tensor<10x16xf32>
    dt.store %p, @w : tensor<10x16xf32>
    return
  }
}

// -----

// Reshapes carry a split of the major dimension of a merged group; a split of
// three equal pieces of a `3 x tp` dimension gives each piece the tp split (the
// fused q/k/v projection of Megatron).
// CHECK-LABEL: module @shapes
module @shapes {
  mesh.mesh @mesh(shape = 2x2) {dt.axes = ["dp", "tp"]}
  dt.global input @"in/train.x" : tensor<4x8x48xf32> {dt.batch, sharding = #dt.shard<[dp, _, 3 x tp]>}
  dt.global output @"out/y" : tensor<32x16xf32> {sharding = #dt.shard<[dp, tp]>}
  // CHECK-LABEL: func.func @step
  func.func @step() {
    %x = dt.load @"in/train.x" : tensor<4x8x48xf32>
    // CHECK: dt.split {{.*}}dt.sharding = [#dt.shard<[dp, _, tp]>, #dt.shard<[dp, _, tp]>, #dt.shard<[dp, _, tp]>]
    %q, %k, %v = dt.split %x axis 2 : tensor<4x8x48xf32> -> tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>
    // CHECK: dt.reshape {{.*}}dt.sharding = [#dt.shard<[dp, tp]>]
    %f = dt.reshape %q : tensor<4x8x16xf32> -> tensor<32x16xf32>
    dt.store %f, @"out/y" : tensor<32x16xf32>
    return
  }
}

// -----

// A conflict goes to the cheaper reshard: both operands of this product are split
// over dp, on dimensions that cannot both keep it; gathering the small left operand
// costs less than gathering the large right one.
// CHECK-LABEL: module @conflict
module @conflict {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  dt.global input @"in/a" : tensor<64x16xf32> {sharding = #dt.shard<[dp, _]>}
  dt.global input @"in/b" : tensor<16x4096xf32> {sharding = #dt.shard<[_, dp]>}
  dt.global output @"out/c" : tensor<64x4096xf32> {sharding = #dt.shard<[_, dp]>}
  // CHECK-LABEL: func.func @step
  func.func @step() {
    %a = dt.load @"in/a" : tensor<64x16xf32>
    %b = dt.load @"in/b" : tensor<16x4096xf32>
    // CHECK: dt.matmul {{.*}}dt.operand_shardings = [#dt.shard<[_, _]>, #dt.shard<[_, dp]>], dt.sharding = [#dt.shard<[_, dp]>]
    %c = dt.matmul %a, %b : tensor<64x16xf32>, tensor<16x4096xf32> -> tensor<64x4096xf32>
    dt.store %c, @"out/c" : tensor<64x4096xf32>
    return
  }
}
