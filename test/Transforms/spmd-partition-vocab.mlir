// RUN: dt-opt %s -split-input-file -dt-spmd-partition | FileCheck %s

// Vocabulary parallelism on tp=2: the table's rows are split, so the lookup reads
// this rank's rows from where its block starts and the ranks' partial results are
// summed; the logits' classes are split, so each rank gathers four statistics per
// position of every block (not the logits) and computes the loss, its gradient
// and the arg-max from them; the table's gradient is this rank's rows only.
// CHECK-LABEL: module @vocab
// CHECK: %[[T:.*]] = dt.load @wte : tensor<8x4xf32>
// CHECK: %[[IDS:.*]] = dt.load @"in/train.x" : tensor<6xi32>
// CHECK: %[[FIRST:.*]] = dt.shard_start {axes = array<i16: 0>, size = 8 : i64} : tensor<i64>
// CHECK: %[[E:.*]] = dt.embedding_shard %[[T]], %[[IDS]], %[[FIRST]] {rows = 16 : i64} : tensor<8x4xf32>, tensor<6xi32>, tensor<i64> -> tensor<6x4xf32>
// CHECK: %[[H:.*]] = mesh.all_reduce %[[E]] on @mesh mesh_axes = [0] {dt.what = "dt.embedding
// CHECK: %[[L:.*]] = dt.matmul %[[H]], %[[T]]
// CHECK-SAME: -> tensor<6x8xf32>
// CHECK: %[[Y:.*]] = dt.load @"in/train.y" : tensor<6xi32>
// CHECK: %[[C0:.*]] = dt.shard_start {axes = array<i16: 0>, size = 8 : i64} : tensor<i64>
// CHECK: %[[S:.*]] = dt.class_stats %[[L]], %[[Y]], %[[C0]] {classes = 16 : i64} : tensor<6x8xf32>, tensor<6xi32>, tensor<i64> -> tensor<4x6xf32>
// CHECK: %[[G:.*]] = mesh.all_gather %[[S]] on @mesh mesh_axes = [0] gather_axis = 0 {dt.what = "the class statistics of the logits"} : tensor<4x6xf32> -> tensor<8x6xf32>
// CHECK: %[[ALL:.*]] = dt.reshape %[[G]] : tensor<8x6xf32> -> tensor<2x4x6xf32>
// CHECK: %[[LOSS:.*]] = dt.cross_entropy_stats %[[ALL]], %[[Y]] : tensor<2x4x6xf32>, tensor<6xi32> -> tensor<f32>
// CHECK: dt.store %[[LOSS]], @"out/loss"
// CHECK: %[[N:.*]] = dt.count_correct_stats %[[ALL]], %[[Y]]
// CHECK: dt.store %[[N]], @"out/correct"
// CHECK: %[[DL:.*]] = dt.cross_entropy_grad_shard %[[L]], %[[Y]], %[[ALL]], %{{.*}}, %[[C0]] {classes = 16 : i64} : {{.*}} -> tensor<6x8xf32>
// CHECK: %[[DH:.*]] = dt.matmul %[[DL]], %[[T]]
// CHECK: %[[DHS:.*]] = mesh.all_reduce %[[DH]] on @mesh mesh_axes = [0]
// CHECK: %[[R0:.*]] = dt.shard_start {axes = array<i16: 0>, size = 8 : i64} : tensor<i64>
// CHECK: %[[DT:.*]] = dt.embedding_grad_shard %[[IDS]], %[[DHS]], %[[R0]] {rows = 16 : i64} : tensor<6xi32>, tensor<6x4xf32>, tensor<i64> -> tensor<8x4xf32>
// CHECK: dt.store %[[DT]], @"grad/wte" : tensor<8x4xf32>
// CHECK-NOT: dt.cross_entropy %
// CHECK-NOT: dt.count_correct %
module @vocab {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["tp"]}
  dt.global param @wte : tensor<16x4xf32> {init = {kind = "constant", value = 0.0 : f64}, sharding = #dt.shard<[tp, _]>}
  dt.global grad @"grad/wte" : tensor<16x4xf32> {sharding = #dt.shard<[tp, _]>}
  dt.global input @"in/train.x" : tensor<6xi32> {dt.batch, sharding = #dt.shard<[_]>}
  dt.global input @"in/train.y" : tensor<6xi32> {dt.batch, sharding = #dt.shard<[_]>}
  dt.global output @"out/loss" : tensor<f32> {sharding = #dt.shard<[]>}
  dt.global output @"out/correct" : tensor<f32> {sharding = #dt.shard<[]>}
  func.func @grad_step() {
    %one = dt.constant {dt.sharding = [#dt.shard<[]>]} dense<1.0> : tensor<f32>
    %t = dt.load @wte {dt.sharding = [#dt.shard<[tp, _]>]} : tensor<16x4xf32>
    %ids = dt.load @"in/train.x" {dt.sharding = [#dt.shard<[_]>]} : tensor<6xi32>
    %h = dt.embedding %t, %ids {dt.operand_shardings = [#dt.shard<[tp, _]>, #dt.shard<[_]>], dt.sharding = [#dt.shard<[_, _], partial = (tp)>]} : tensor<16x4xf32>, tensor<6xi32> -> tensor<6x4xf32>
    %l = dt.matmul %h, %t {transpose_rhs, dt.operand_shardings = [#dt.shard<[_, _]>, #dt.shard<[tp, _]>], dt.sharding = [#dt.shard<[_, tp]>]} : tensor<6x4xf32>, tensor<16x4xf32> -> tensor<6x16xf32>
    %y = dt.load @"in/train.y" {dt.sharding = [#dt.shard<[_]>]} : tensor<6xi32>
    %loss = dt.cross_entropy %l, %y {dt.sharding = [#dt.shard<[]>]} : tensor<6x16xf32>, tensor<6xi32> -> tensor<f32>
    dt.store %loss, @"out/loss" : tensor<f32>
    %n = dt.count_correct %l, %y {dt.sharding = [#dt.shard<[]>]} : tensor<6x16xf32>, tensor<6xi32> -> tensor<f32>
    dt.store %n, @"out/correct" : tensor<f32>
    %dl = dt.cross_entropy_grad %l, %y, %one {dt.sharding = [#dt.shard<[_, tp]>]} : tensor<6x16xf32>, tensor<6xi32>, tensor<f32> -> tensor<6x16xf32>
    %dh = dt.matmul %dl, %t {dt.operand_shardings = [#dt.shard<[_, tp]>, #dt.shard<[tp, _]>], dt.sharding = [#dt.shard<[_, _], partial = (tp)>]} : tensor<6x16xf32>, tensor<16x4xf32> -> tensor<6x4xf32>
    %dt = dt.embedding_grad %ids, %dh {dt.operand_shardings = [#dt.shard<[_]>, #dt.shard<[_, _]>], dt.sharding = [#dt.shard<[tp, _]>]} : tensor<6xi32>, tensor<6x4xf32> -> tensor<16x4xf32>
    dt.store %dt, @"grad/wte" : tensor<16x4xf32>
    return
  }
}
