// RUN: dt-opt %s -split-input-file -dt-spmd-partition | FileCheck %s

// A cross-entropy over split positions divides by the labels of all ranks: each
// rank scales its mean by its share of them, and the partial losses sum to the
// exact mean. The loss is summed (all-reduce) where it is stored.
// CHECK-LABEL: module @dp
// CHECK: %[[X:.*]] = dt.load @"in/train.x" : tensor<2x10xf32>
// CHECK: %[[Y:.*]] = dt.load @"in/train.y" : tensor<2xi32>
// CHECK: %[[F:.*]] = dt.convert %[[Y]]
// CHECK: %[[HERE:.*]] = dt.reduce_sum
// CHECK: %[[ALL:.*]] = mesh.all_reduce %[[HERE]] on @mesh mesh_axes = [0] {dt.what = "the label count"}
// CHECK: %[[MAX:.*]] = dt.maximum %[[ALL]]
// CHECK: %[[SHARE:.*]] = dt.div %[[HERE]], %[[MAX]]
// CHECK: %[[MEAN:.*]] = dt.cross_entropy %[[X]], %[[Y]] : tensor<2x10xf32>
// CHECK: %[[PART:.*]] = dt.mul %[[MEAN]], %[[SHARE]]
// CHECK: %[[LOSS:.*]] = mesh.all_reduce %[[PART]] on @mesh mesh_axes = [0] {dt.what = "out/loss"}
// CHECK: dt.store %[[LOSS]], @"out/loss"
// CHECK: %[[G:.*]] = dt.mul %{{.*}}, %[[SHARE]]
// CHECK: dt.cross_entropy_grad %[[X]], %[[Y]], %[[G]] : tensor<2x10xf32>
module @dp {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  dt.global input @"in/train.x" : tensor<8x10xf32> {dt.batch, sharding = #dt.shard<[dp, _]>}
  dt.global input @"in/train.y" : tensor<8xi32> {dt.batch, sharding = #dt.shard<[dp]>}
  dt.global output @"out/loss" : tensor<f32> {sharding = #dt.shard<[]>}
  dt.global grad @"grad/x" : tensor<8x10xf32> {sharding = #dt.shard<[dp, _]>}
  func.func @grad_step() {
    %one = dt.constant {dt.sharding = [#dt.shard<[]>]} dense<1.0> : tensor<f32>
    %x = dt.load @"in/train.x" {dt.sharding = [#dt.shard<[dp, _]>]} : tensor<8x10xf32>
    %y = dt.load @"in/train.y" {dt.sharding = [#dt.shard<[dp]>]} : tensor<8xi32>
    %l = dt.cross_entropy %x, %y {dt.sharding = [#dt.shard<[], partial = (dp)>]} : tensor<8x10xf32>, tensor<8xi32> -> tensor<f32>
    dt.store %l, @"out/loss" : tensor<f32>
    %g = dt.cross_entropy_grad %x, %y, %one {dt.sharding = [#dt.shard<[dp, _]>]} : tensor<8x10xf32>, tensor<8xi32>, tensor<f32> -> tensor<8x10xf32>
    dt.store %g, @"grad/x" : tensor<8x10xf32>
    return
  }
}

// -----

// ZeRO-1 on 4 ranks of a 10-row weight: globals take their (padded) shards; the
// gradient is padded to 12 rows and reduce-scattered once; the whole parameter is
// padded and sliced; the new parameter is gathered and its padding dropped.
// CHECK-LABEL: module @zero1
// CHECK: dt.global param @w : tensor<10x8xf32> {global_type = tensor<10x8xf32>
// CHECK: dt.global state @"sgd.momentum/w" : tensor<3x8xf32> {global_type = tensor<10x8xf32>
// CHECK: %[[W:.*]] = dt.load @w : tensor<10x8xf32>
// CHECK: %[[G:.*]] = dt.load @"grad/w" : tensor<10x8xf32>
// CHECK: %[[GP:.*]] = dt.pad %[[G]] axis 0 : tensor<10x8xf32> -> tensor<12x8xf32>
// CHECK: %[[GS:.*]] = mesh.reduce_scatter %[[GP]] on @mesh mesh_axes = [0] scatter_axis = 0 {dt.what = "grad/w"} : tensor<12x8xf32> -> tensor<3x8xf32>
// CHECK: %[[N:.*]] = dt.add %{{.*}}, %[[GS]] : tensor<3x8xf32>
// CHECK: dt.store %[[N]], @"sgd.momentum/w" : tensor<3x8xf32>
// CHECK: %[[WP:.*]] = dt.pad %[[W]] axis 0
// CHECK: %[[WS:.*]] = mesh.all_slice %[[WP]] on @mesh mesh_axes = [0] slice_axis = 0 {dt.what = "w"} : tensor<12x8xf32> -> tensor<3x8xf32>
// CHECK: %[[P:.*]] = dt.sub %[[WS]], %[[N]]
// CHECK: %[[AG:.*]] = mesh.all_gather %[[P]] on @mesh mesh_axes = [0] gather_axis = 0 {dt.what = "w"} : tensor<3x8xf32> -> tensor<12x8xf32>
// CHECK: %[[WN:.*]] = dt.slice %[[AG]] axis 0 start 0 : tensor<12x8xf32> -> tensor<10x8xf32>
// CHECK: dt.store %[[WN]], @w
module @zero1 {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  dt.global param @w : tensor<10x8xf32> {init = {kind = "constant", value = 0.0 : f64}, sharding = #dt.shard<[_, _]>}
  dt.global grad @"grad/w" : tensor<10x8xf32> {sharding = #dt.shard<[_, _], partial = (dp)>}
  dt.global state @"sgd.momentum/w" : tensor<10x8xf32> {sharding = #dt.shard<[dp, _]>}
  func.func @apply_step() {
    %w = dt.load @w {dt.sharding = [#dt.shard<[_, _]>]} : tensor<10x8xf32>
    %g = dt.load @"grad/w" {dt.sharding = [#dt.shard<[_, _], partial = (dp)>]} : tensor<10x8xf32>
    %m = dt.load @"sgd.momentum/w" {dt.sharding = [#dt.shard<[dp, _]>]} : tensor<10x8xf32>
    %c = dt.constant {dt.sharding = [#dt.shard<[dp, _]>]} dense<0.9> : tensor<10x8xf32>
    %mm = dt.mul %m, %c {dt.sharding = [#dt.shard<[dp, _]>]} : tensor<10x8xf32>
    %n = dt.add %mm, %g {dt.operand_shardings = [#dt.shard<[dp, _]>, #dt.shard<[dp, _]>], dt.sharding = [#dt.shard<[dp, _]>]} : tensor<10x8xf32>
    dt.store %n, @"sgd.momentum/w" : tensor<10x8xf32>
    %p = dt.sub %w, %n {dt.operand_shardings = [#dt.shard<[dp, _]>, #dt.shard<[dp, _]>], dt.sharding = [#dt.shard<[dp, _]>]} : tensor<10x8xf32>
    dt.store %p, @w : tensor<10x8xf32>
    return
  }
}

// -----

// ZeRO-3: a parameter kept as a shard is gathered anew for each op that uses it,
// so the whole tensor lives only as long as that op.
// CHECK-LABEL: module @zero3
// CHECK: %[[W:.*]] = dt.load @w : tensor<4x16xf32>
// CHECK: %[[A:.*]] = mesh.all_gather %[[W]] {{.*}}-> tensor<16x16xf32>
// CHECK: dt.matmul %{{.*}}, %[[A]]
// CHECK: %[[B:.*]] = mesh.all_gather %[[W]] {{.*}}-> tensor<16x16xf32>
// CHECK: dt.matmul %{{.*}}, %[[B]]
module @zero3 {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  dt.global input @"in/train.x" : tensor<8x16xf32> {dt.batch, sharding = #dt.shard<[dp, _]>}
  dt.global param @w : tensor<16x16xf32> {init = {kind = "constant", value = 0.0 : f64}, sharding = #dt.shard<[dp, _]>}
  dt.global output @"out/y" : tensor<8x16xf32> {sharding = #dt.shard<[dp, _]>}
  func.func @grad_step() {
    %x = dt.load @"in/train.x" {dt.sharding = [#dt.shard<[dp, _]>]} : tensor<8x16xf32>
    %w = dt.load @w {dt.sharding = [#dt.shard<[_, _]>]} : tensor<16x16xf32>
    %y = dt.matmul %x, %w {dt.sharding = [#dt.shard<[dp, _]>], transpose_rhs} : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
    %z = dt.matmul %y, %w {dt.sharding = [#dt.shard<[dp, _]>]} : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
    dt.store %z, @"out/y" : tensor<8x16xf32>
    return
  }
}

// -----

// Collectives run along the leading axis: another axis is transposed there and
// back; a `3 x tp` dimension is viewed as 3 blocks, whose pieces are gathered
// block by block.
// CHECK-LABEL: module @axes
// CHECK: %[[A:.*]] = dt.load @"in/a" : tensor<4x3xf32>
// CHECK: %[[T:.*]] = dt.transpose %[[A]] [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
// CHECK: %[[G:.*]] = mesh.all_gather %[[T]] on @mesh mesh_axes = [0] gather_axis = 0 {{.*}} : tensor<3x4xf32> -> tensor<6x4xf32>
// CHECK: dt.transpose %[[G]] [1, 0] : tensor<6x4xf32> -> tensor<4x6xf32>
// CHECK: %[[Q:.*]] = dt.load @"in/q" : tensor<6xf32>
// CHECK: %[[QB:.*]] = dt.reshape %[[Q]] : tensor<6xf32> -> tensor<3x2xf32>
// CHECK: %[[QT:.*]] = dt.transpose %[[QB]] [1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
// CHECK: %[[QG:.*]] = mesh.all_gather %[[QT]] {{.*}} : tensor<2x3xf32> -> tensor<4x3xf32>
// CHECK: %[[QW:.*]] = dt.transpose %[[QG]] [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
// CHECK: dt.reshape %[[QW]] : tensor<3x4xf32> -> tensor<12xf32>
module @axes {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["tp"]}
  dt.global input @"in/a" : tensor<4x6xf32> {sharding = #dt.shard<[_, tp]>}
  dt.global input @"in/q" : tensor<12xf32> {sharding = #dt.shard<[3 x tp]>}
  dt.global output @"out/a" : tensor<4x6xf32> {sharding = #dt.shard<[_, _]>}
  dt.global output @"out/q" : tensor<12xf32> {sharding = #dt.shard<[_]>}
  func.func @step() {
    %a = dt.load @"in/a" {dt.sharding = [#dt.shard<[_, tp]>]} : tensor<4x6xf32>
    dt.store %a, @"out/a" : tensor<4x6xf32>
    %q = dt.load @"in/q" {dt.sharding = [#dt.shard<[3 x tp]>]} : tensor<12xf32>
    dt.store %q, @"out/q" : tensor<12xf32>
    return
  }
}

// -----

// A split that moves from one dimension to another is one all-to-all (each rank
// sends the others the blocks of its rows they keep), not a gather and a slice:
// [dp, _] -> [_, dp] on 2 ranks of a 4x6 tensor. The rank's 2x6 rows are cut into
// two 2x3 blocks of columns, exchanged, and the received row blocks stacked.
// CHECK-LABEL: module @exchange
// CHECK: %[[X:.*]] = dt.load @x : tensor<2x6xf32>
// CHECK: %[[T:.*]] = dt.transpose %[[X]] [1, 0] : tensor<2x6xf32> -> tensor<6x2xf32>
// CHECK: %[[B:.*]] = dt.reshape %[[T]] : tensor<6x2xf32> -> tensor<2x3x2xf32>
// CHECK: %[[A:.*]] = mesh.all_to_all %[[B]] on @mesh mesh_axes = [0] split_axis = 0 concat_axis = 0 {dt.what = "y"} : tensor<2x3x2xf32> -> tensor<2x3x2xf32>
// CHECK: %[[M:.*]] = dt.transpose %[[A]] [1, 0, 2] : tensor<2x3x2xf32> -> tensor<3x2x2xf32>
// CHECK: %[[J:.*]] = dt.reshape %[[M]] : tensor<3x2x2xf32> -> tensor<3x4xf32>
// CHECK: %[[Y:.*]] = dt.transpose %[[J]] [1, 0] : tensor<3x4xf32> -> tensor<4x3xf32>
// CHECK: dt.store %[[Y]], @y : tensor<4x3xf32>
// CHECK-NOT: mesh.all_gather
module @exchange {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["dp"]}
  dt.global state @x : tensor<4x6xf32> {sharding = #dt.shard<[dp, _]>}
  dt.global state @y : tensor<4x6xf32> {sharding = #dt.shard<[_, dp]>}
  func.func @apply_step() {
    %x = dt.load @x {dt.sharding = [#dt.shard<[dp, _]>]} : tensor<4x6xf32>
    dt.store %x, @y : tensor<4x6xf32>
    return
  }
}
