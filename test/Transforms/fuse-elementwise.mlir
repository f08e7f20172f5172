// RUN: dt-opt %s -split-input-file -dt-fuse-elementwise | FileCheck %s

// Pattern: relu(x @ w + broadcast(b)) => fused(mm, b) { add; relu }
// The broadcast is absorbed as a smaller operand; both the pre-activation (needed by
// backward) and the activation leave the region.
// CHECK-LABEL: func.func @linear_relu
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<16x8xf32>, %[[B:.*]]: tensor<16xf32>)
func.func @linear_relu(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  // CHECK: %[[MM:.*]] = dt.matmul
  // CHECK-NOT: dt.broadcast_to
  // CHECK: %[[F:.*]]:2 = dt.fused(%[[MM]], %[[B]]) : (tensor<4x16xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  // CHECK-NEXT: ^bb0(%[[A0:.*]]: tensor<4x16xf32>, %[[A1:.*]]: tensor<4x16xf32>):
  // CHECK-NEXT:   %[[S:.*]] = dt.add %[[A0]], %[[A1]]
  // CHECK-NEXT:   %[[R:.*]] = dt.relu %[[S]]
  // CHECK-NEXT:   dt.yield %[[S]], %[[R]]
  // CHECK: return %[[F]]#0, %[[F]]#1
  %mm = dt.matmul %x, %w {transpose_rhs} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %bb = dt.broadcast_to %b : tensor<16xf32> -> tensor<4x16xf32>
  %s = dt.add %mm, %bb : tensor<4x16xf32>
  %r = dt.relu %s : tensor<4x16xf32>
  return %s, %r : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Splat constants are cloned into the body; a scalar operand stays 0-d.
// CHECK-LABEL: func.func @adam_like
func.func @adam_like(%m: tensor<8xf32>, %g: tensor<8xf32>, %lr: tensor<f32>) -> tensor<8xf32> {
  // CHECK: dt.fused(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  // CHECK: dt.constant dense<0.899999976> : tensor<8xf32>
  // CHECK: dt.yield
  // CHECK-NOT: dt.constant
  %b1 = dt.constant dense<0.9> : tensor<8xf32>
  %c = dt.constant dense<0.1> : tensor<8xf32>
  %a = dt.mul %m, %b1 : tensor<8xf32>
  %d = dt.mul %g, %c : tensor<8xf32>
  %m2 = dt.add %a, %d : tensor<8xf32>
  %lrb = dt.broadcast_to %lr : tensor<f32> -> tensor<8xf32>
  %u = dt.mul %m2, %lrb : tensor<8xf32>
  return %u : tensor<8xf32>
}

// -----

// A group cannot sit after a non-fusible op that uses one of its values: %a is used
// by the softmax before %c would be computed, so the two stay apart.
// CHECK-LABEL: func.func @no_move_past_use
func.func @no_move_past_use(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // CHECK: %[[A:.*]] = dt.fused
  // CHECK:   dt.exp
  // CHECK: dt.softmax %[[A]]
  // CHECK: dt.fused(%[[A]])
  // CHECK:   dt.neg
  %a = dt.exp %x : tensor<8xf32>
  %s = dt.softmax %a axis 0 : tensor<8xf32>
  %c = dt.neg %a : tensor<8xf32>
  return %s, %c : tensor<8xf32>, tensor<8xf32>
}

// -----

// Pattern: reduce_sum(g * g) => fused(g) {reduce_axes} { mul }. The square is also needed
// by an update: it is recomputed there rather than written to memory (duplication).
// CHECK-LABEL: func.func @norm_and_update
// CHECK-SAME: (%[[G:.*]]: tensor<4x8xf32>, %[[V:.*]]: tensor<4x8xf32>)
func.func @norm_and_update(%g: tensor<4x8xf32>, %v: tensor<4x8xf32>) -> (tensor<f32>, tensor<4x8xf32>) {
  // CHECK: %[[N:.*]] = dt.fused(%[[G]]) {reduce_axes = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32> {
  // CHECK:   %[[SQ:.*]] = dt.mul
  // CHECK:   dt.yield %[[SQ]] : tensor<4x8xf32>
  // CHECK: %[[U:.*]] = dt.fused(%[[G]], %[[V]]) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK:   dt.mul
  // CHECK:   dt.add
  // CHECK-NOT: dt.reduce_sum
  // CHECK: return %[[N]], %[[U]]
  %sq = dt.mul %g, %g : tensor<4x8xf32>
  %n = dt.reduce_sum %sq [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %u = dt.add %v, %sq : tensor<4x8xf32>
  return %n, %u : tensor<f32>, tensor<4x8xf32>
}

// -----

// A value also used by a non-fusible op is in memory anyway: no duplication, and the
// sum reads it.
// CHECK-LABEL: func.func @no_duplicate_materialised
func.func @no_duplicate_materialised(%g: tensor<4x8xf32>) -> (tensor<f32>, tensor<8xf32>) {
  // CHECK: %[[SQ:.*]] = dt.fused
  // CHECK: dt.reduce_sum %[[SQ]] [0, 1]
  // CHECK: dt.softmax %[[SQ]]
  %sq = dt.mul %g, %g : tensor<4x8xf32>
  %n = dt.reduce_sum %sq [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %s = dt.softmax %sq axis 1 : tensor<4x8xf32>
  %r = dt.reduce_sum %s [0] : tensor<4x8xf32> -> tensor<8xf32>
  return %n, %r : tensor<f32>, tensor<8xf32>
}

// -----

// A bf16 program's bias gradient: the region rounds dY to bf16 for a product
// (which reads it through a reshape, so it is written out) and the sum widens it.
// The widening does not join the region, which would then write the f32 values
// beside the bf16 ones: the sum reads the bf16 values and widens them itself.
// CHECK-LABEL: func.func @bias_grad_of_bf16
// CHECK-SAME: (%[[D:.*]]: tensor<2x4x8xf32>, %[[H:.*]]: tensor<2x4x8xbf16>, %[[X:.*]]: tensor<8x8xf32>)
func.func @bias_grad_of_bf16(%d: tensor<2x4x8xf32>, %h: tensor<2x4x8xbf16>,
                             %x: tensor<8x8xf32>) -> (tensor<8xf32>, tensor<8x8xf32>) {
  // CHECK: %[[R:.*]] = dt.fused(%[[H]], %[[D]]) : (tensor<2x4x8xbf16>, tensor<2x4x8xf32>) -> tensor<2x4x8xbf16> {
  // CHECK:   dt.mul
  // CHECK:   %[[N:.*]] = dt.convert {{.*}} to tensor<2x4x8xbf16>
  // CHECK-NEXT: dt.yield %[[N]] : tensor<2x4x8xbf16>
  // CHECK: %[[B:.*]] = dt.fused(%[[R]]) {reduce_axes = array<i64: 0, 1>} : (tensor<2x4x8xbf16>) -> tensor<8xf32> {
  // CHECK:   %[[W:.*]] = dt.convert {{.*}} : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
  // CHECK-NEXT: dt.yield %[[W]] : tensor<2x4x8xf32>
  // CHECK-NOT: dt.reduce_sum
  // CHECK: dt.reshape %[[R]]
  // CHECK: return %[[B]], %{{.*}}
  %hw = dt.convert %h : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
  %g = dt.mul %d, %hw : tensor<2x4x8xf32>
  %g16 = dt.convert %g : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
  %g32 = dt.convert %g16 : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
  %b = dt.reduce_sum %g32 [0, 1] : tensor<2x4x8xf32> -> tensor<8xf32>
  %gr = dt.reshape %g16 : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
  %gp = dt.convert %gr : tensor<8x8xbf16> to tensor<8x8xf32>
  %p = dt.matmul %gp, %x {transpose_lhs} : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  return %b, %p : tensor<8xf32>, tensor<8x8xf32>
}

// -----

// A residual sum rounded to bf16 and widened for a layer norm: the widening
// stays out of the region, which writes the bf16 values, so that a GPU's layer
// norm can read those (dt/Transforms/ZeroCopyInfo.h) rather than the region
// writing the f32 ones.
// CHECK-LABEL: func.func @layer_norm_of_bf16
func.func @layer_norm_of_bf16(%a: tensor<4x8xbf16>, %b: tensor<4x8xbf16>,
                              %w: tensor<8xf32>, %c: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK: %[[S:.*]] = dt.fused(%{{.*}}, %{{.*}}) : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  // CHECK:   dt.add
  // CHECK:   %[[N:.*]] = dt.convert {{.*}} to tensor<4x8xbf16>
  // CHECK-NEXT: dt.yield %[[N]] : tensor<4x8xbf16>
  // CHECK: %[[X:.*]] = dt.fused(%[[S]]) : (tensor<4x8xbf16>) -> tensor<4x8xf32> {
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT:   %[[W:.*]] = dt.convert {{.*}} : tensor<4x8xbf16> to tensor<4x8xf32>
  // CHECK-NEXT:   dt.yield %[[W]]
  // CHECK: dt.layer_norm %[[X]]
  %a32 = dt.convert %a : tensor<4x8xbf16> to tensor<4x8xf32>
  %b32 = dt.convert %b : tensor<4x8xbf16> to tensor<4x8xf32>
  %s = dt.add %a32, %b32 : tensor<4x8xf32>
  %s16 = dt.convert %s : tensor<4x8xf32> to tensor<4x8xbf16>
  %x = dt.convert %s16 : tensor<4x8xbf16> to tensor<4x8xf32>
  %y = dt.layer_norm %x, %w, %c {eps = 1.0e-05 : f64} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Two layer norms of one bf16 residual sum. Step 0 gives each widening its own
// copy of the sum, and the widenings stay out of the regions (step 5), so the
// two regions are twins: the second, made while the first one's value is live,
// reads that value (step 6). The second widening comes after the first one's
// last reader: a recomputation, which stays.
// CHECK-LABEL: func.func @twins
// CHECK-SAME: (%[[A:.*]]: tensor<4x8xbf16>, %[[B:.*]]: tensor<4x8xbf16>
func.func @twins(%a: tensor<4x8xbf16>, %b: tensor<4x8xbf16>, %w: tensor<8xf32>,
                 %c: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK: %[[S:.*]] = dt.fused(%[[A]], %[[B]]) : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  // CHECK-NOT: dt.fused(%[[A]], %[[B]])
  // CHECK: %[[X1:.*]] = dt.fused(%[[S]]) : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  // CHECK: dt.layer_norm %[[X1]]
  // CHECK: %[[X2:.*]] = dt.fused(%[[S]]) : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  // CHECK: dt.layer_norm %[[X2]]
  %a32 = dt.convert %a : tensor<4x8xbf16> to tensor<4x8xf32>
  %b32 = dt.convert %b : tensor<4x8xbf16> to tensor<4x8xf32>
  %s = dt.add %a32, %b32 : tensor<4x8xf32>
  %s16 = dt.convert %s : tensor<4x8xf32> to tensor<4x8xbf16>
  %x1 = dt.convert %s16 : tensor<4x8xbf16> to tensor<4x8xf32>
  %y1 = dt.layer_norm %x1, %w, %c {eps = 1.0e-05 : f64} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %x2 = dt.convert %s16 : tensor<4x8xbf16> to tensor<4x8xf32>
  %y2 = dt.layer_norm %x2, %c, %w {eps = 1.0e-05 : f64} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %y1, %y2 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A layer norm gradient's dx narrowed and then added to a residual gradient:
// the narrowing stays a region of its own, which a GPU's kernel writes itself
// (dt/Transforms/ZeroCopyInfo.h), and the sum reads the bf16 values.
// CHECK-LABEL: func.func @layer_norm_grad_narrowed
func.func @layer_norm_grad_narrowed(%x: tensor<4x8xf32>, %w: tensor<8xf32>,
                                    %dy: tensor<4x8xf32>, %r: tensor<4x8xbf16>)
    -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>) {
  // CHECK: %[[DX:.*]], %{{.*}}, %{{.*}} = dt.layer_norm_grad
  // CHECK: %[[N:.*]] = dt.fused(%[[DX]]) : (tensor<4x8xf32>) -> tensor<4x8xbf16> {
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT:   %[[C:.*]] = dt.convert {{.*}} : tensor<4x8xf32> to tensor<4x8xbf16>
  // CHECK-NEXT:   dt.yield %[[C]]
  // CHECK: dt.fused(%{{.*}}, %[[N]]) : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %dx, %dw, %db = dt.layer_norm_grad %x, %w, %dy {eps = 1.0e-05 : f64} : tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %n = dt.convert %dx : tensor<4x8xf32> to tensor<4x8xbf16>
  %r32 = dt.convert %r : tensor<4x8xbf16> to tensor<4x8xf32>
  %n32 = dt.convert %n : tensor<4x8xbf16> to tensor<4x8xf32>
  %s = dt.add %r32, %n32 : tensor<4x8xf32>
  %s16 = dt.convert %s : tensor<4x8xf32> to tensor<4x8xbf16>
  return %s16, %dw, %db : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Different shapes are different loop nests.
// CHECK-LABEL: func.func @shapes_split
func.func @shapes_split(%x: tensor<8xf32>, %y: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // CHECK: %[[A:.*]] = dt.fused(%{{.*}}) : (tensor<8xf32>) -> tensor<8xf32>
  // CHECK: dt.fused(%{{.*}}, %[[A]]) : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %a = dt.exp %x : tensor<8xf32>
  %ab = dt.broadcast_to %a : tensor<8xf32> -> tensor<2x8xf32>
  %c = dt.mul %y, %ab : tensor<2x8xf32>
  return %c : tensor<2x8xf32>
}

// -----

// A broadcast that nothing absorbs becomes a region of its own (a broadcasting copy).
// CHECK-LABEL: func.func @lone_broadcast
func.func @lone_broadcast(%b: tensor<16xf32>, %x: tensor<4x16xf32>) -> tensor<4x4xf32> {
  // CHECK: %[[BB:.*]] = dt.fused(%{{.*}}) : (tensor<16xf32>) -> tensor<4x16xf32> {
  // CHECK-NEXT: ^bb0(%[[ARG:.*]]: tensor<4x16xf32>):
  // CHECK-NEXT:   dt.yield %[[ARG]]
  // CHECK: dt.matmul %[[BB]]
  %bb = dt.broadcast_to %b : tensor<16xf32> -> tensor<4x16xf32>
  %m = dt.matmul %bb, %x {transpose_rhs} : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x4xf32>
  return %m : tensor<4x4xf32>
}

// -----

// A batch norm's variance: the sum of (x - mean)^2 over N, H and W around C
// absorbs the subtraction and the square, reading the per-channel mean as an
// operand of one value per channel; the squares never reach memory.
// CHECK-LABEL: func.func @statistics_around
// CHECK-SAME: (%[[X:.*]]: tensor<1x8x4x16xf32>, %[[M:.*]]: tensor<1x1x4x1xf32>)
func.func @statistics_around(%x: tensor<1x8x4x16xf32>, %m: tensor<1x1x4x1xf32>) -> tensor<1x4xf32> {
  // CHECK: %[[V:.*]] = dt.fused(%[[X]], %[[M]]) {reduce_axes = array<i64: 1, 3>} : (tensor<1x8x4x16xf32>, tensor<1x1x4x1xf32>) -> tensor<1x4xf32> {
  // CHECK:   dt.sub
  // CHECK:   dt.mul
  // CHECK-NOT: dt.reduce_sum
  // CHECK: return %[[V]]
  %mb = dt.broadcast_to %m : tensor<1x1x4x1xf32> -> tensor<1x8x4x16xf32>
  %d = dt.sub %x, %mb : tensor<1x8x4x16xf32>
  %sq = dt.mul %d, %d : tensor<1x8x4x16xf32>
  %v = dt.reduce_sum %sq [1, 3] : tensor<1x8x4x16xf32> -> tensor<1x4xf32>
  return %v : tensor<1x4xf32>
}

// -----

// Around kept axes, an operand that varies along a reduced axis (here N) is
// not one value per channel: the sum stays a dt.reduce_sum.
// CHECK-LABEL: func.func @around_other_operand
func.func @around_other_operand(%x: tensor<1x8x4x16xf32>, %r: tensor<1x8x1x1xf32>) -> tensor<1x4xf32> {
  // CHECK: dt.fused
  // CHECK-NOT: reduce_axes
  // CHECK: dt.reduce_sum
  %rb = dt.broadcast_to %r : tensor<1x8x1x1xf32> -> tensor<1x8x4x16xf32>
  %p = dt.mul %x, %rb : tensor<1x8x4x16xf32>
  %v = dt.reduce_sum %p [1, 3] : tensor<1x8x4x16xf32> -> tensor<1x4xf32>
  return %v : tensor<1x4xf32>
}

// -----

// A weight rounded to bf16 once and widened for two products (the forward's
// and the backward's): the rounding is neither copied into each widening nor
// joined by them. Its region writes the bf16 copy once, and each widening is a
// region of its own, which a GPU plan leaves out (its product reads the copy).
dt.global param @w : tensor<8x8xf32> {init = {kind = "constant", value = 0.0 : f64}}
// CHECK-LABEL: func.func @weight_copy_kept
func.func @weight_copy_kept(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK: %[[W:.*]] = dt.load @w
  // CHECK-NEXT: %[[C:.*]] = dt.fused(%[[W]]) : (tensor<8x8xf32>) -> tensor<8x8xbf16> {
  // CHECK: %[[A:.*]] = dt.fused(%[[C]]) : (tensor<8x8xbf16>) -> tensor<8x8xf32> {
  // CHECK: dt.matmul %{{.*}}, %[[A]]
  // CHECK: %[[B:.*]] = dt.fused(%[[C]]) : (tensor<8x8xbf16>) -> tensor<8x8xf32> {
  // CHECK: dt.matmul %{{.*}}, %[[B]]
  %w = dt.load @w : tensor<8x8xf32>
  %c = dt.convert %w : tensor<8x8xf32> to tensor<8x8xbf16>
  %a = dt.convert %c : tensor<8x8xbf16> to tensor<8x8xf32>
  %y = dt.matmul %x, %a : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %b = dt.convert %c : tensor<8x8xbf16> to tensor<8x8xf32>
  %g = dt.matmul %dy, %b {transpose_rhs} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  return %y, %g : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A tied table of rows that are no multiple of 8 is kept too (the memory plan
// gives a GPU's padded products room for rows past it); one whose rows are
// not a multiple of 16 bytes is copied into each widening, whose f32-sized
// buffer a padded product reads past the values.
dt.global param @tied : tensor<10x8xf32> {init = {kind = "constant", value = 0.0 : f64}}
dt.global param @wide : tensor<8x10xf32> {init = {kind = "constant", value = 0.0 : f64}}
// CHECK-LABEL: func.func @table_copy_kept
func.func @table_copy_kept(%x: tensor<4x8xf32>, %dl: tensor<4x10xf32>, %u: tensor<4x8xf32>)
    -> (tensor<4x10xf32>, tensor<4x8xf32>, tensor<4x10xf32>, tensor<4x8xf32>) {
  // CHECK: %[[T:.*]] = dt.load @tied
  // CHECK-NEXT: %[[C:.*]] = dt.fused(%[[T]]) : (tensor<10x8xf32>) -> tensor<10x8xbf16> {
  // CHECK: dt.fused(%[[C]]) : (tensor<10x8xbf16>) -> tensor<10x8xf32> {
  // CHECK: dt.fused(%[[C]]) : (tensor<10x8xbf16>) -> tensor<10x8xf32> {
  // CHECK: %[[W:.*]] = dt.load @wide
  // CHECK: dt.fused(%[[W]]) : (tensor<8x10xf32>) -> tensor<8x10xf32> {
  // CHECK: dt.fused(%[[W]]) : (tensor<8x10xf32>) -> tensor<8x10xf32> {
  %t = dt.load @tied : tensor<10x8xf32>
  %c = dt.convert %t : tensor<10x8xf32> to tensor<10x8xbf16>
  %a = dt.convert %c : tensor<10x8xbf16> to tensor<10x8xf32>
  %logits = dt.matmul %x, %a {transpose_rhs} : tensor<4x8xf32>, tensor<10x8xf32> -> tensor<4x10xf32>
  %b = dt.convert %c : tensor<10x8xbf16> to tensor<10x8xf32>
  %g = dt.matmul %dl, %b : tensor<4x10xf32>, tensor<10x8xf32> -> tensor<4x8xf32>
  %w = dt.load @wide : tensor<8x10xf32>
  %w16 = dt.convert %w : tensor<8x10xf32> to tensor<8x10xbf16>
  %wa = dt.convert %w16 : tensor<8x10xbf16> to tensor<8x10xf32>
  %y = dt.matmul %u, %wa : tensor<4x8xf32>, tensor<8x10xf32> -> tensor<4x10xf32>
  %wb = dt.convert %w16 : tensor<8x10xbf16> to tensor<8x10xf32>
  %h = dt.matmul %dl, %wb {transpose_rhs} : tensor<4x10xf32>, tensor<8x10xf32> -> tensor<4x8xf32>
  return %logits, %g, %y, %h : tensor<4x10xf32>, tensor<4x8xf32>, tensor<4x10xf32>, tensor<4x8xf32>
}

// -----

// A norm's weight, widened for kernels that read f32, stays copied into each
// widening (one round trip a use, no kept copy).
dt.global param @ln.w : tensor<8xf32> {init = {kind = "constant", value = 1.0 : f64}}
// CHECK-LABEL: func.func @norm_weight_copied
func.func @norm_weight_copied(%x: tensor<4x8xf32>, %c: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK: %[[W:.*]] = dt.load @ln.w
  // CHECK: dt.fused(%[[W]]) : (tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: dt.fused(%[[W]]) : (tensor<8xf32>) -> tensor<8xf32> {
  // CHECK-NOT: tensor<8xbf16>) -> tensor<8xf32>
  %w = dt.load @ln.w : tensor<8xf32>
  %w16 = dt.convert %w : tensor<8xf32> to tensor<8xbf16>
  %a = dt.convert %w16 : tensor<8xbf16> to tensor<8xf32>
  %y = dt.layer_norm %x, %a, %c {eps = 1.0e-05 : f64} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %b = dt.convert %w16 : tensor<8xbf16> to tensor<8xf32>
  %z = dt.layer_norm %x, %b, %c {eps = 1.0e-05 : f64} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %y, %z : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A residual sum that a layer norm reads as bf16 is written anyway, so the
// next residual add reads it rather than recomputing it from x and attn (a
// copy per user only pays where no user needs the value written).
// CHECK-LABEL: func.func @residual_read_not_recomputed
func.func @residual_read_not_recomputed(%x: tensor<4x8xbf16>, %attn: tensor<4x8xbf16>,
                                        %mlp: tensor<4x8xbf16>, %w: tensor<8xf32>, %b: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
  // CHECK: %[[S:.*]] = dt.fused(%{{.*}}, %{{.*}}) : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  // CHECK: dt.layer_norm
  // CHECK: dt.fused(%[[S]], %{{.*}}) : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %xw = dt.convert %x : tensor<4x8xbf16> to tensor<4x8xf32>
  %aw = dt.convert %attn : tensor<4x8xbf16> to tensor<4x8xf32>
  %s = dt.add %xw, %aw : tensor<4x8xf32>
  %s16 = dt.convert %s : tensor<4x8xf32> to tensor<4x8xbf16>
  %sn = dt.convert %s16 : tensor<4x8xbf16> to tensor<4x8xf32>
  %y = dt.layer_norm %sn, %w, %b {eps = 1.0e-05 : f64} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %sr = dt.convert %s16 : tensor<4x8xbf16> to tensor<4x8xf32>
  %mw = dt.convert %mlp : tensor<4x8xbf16> to tensor<4x8xf32>
  %t = dt.add %sr, %mw : tensor<4x8xf32>
  %t16 = dt.convert %t : tensor<4x8xf32> to tensor<4x8xbf16>
  return %y, %t16 : tensor<4x8xf32>, tensor<4x8xbf16>
}
