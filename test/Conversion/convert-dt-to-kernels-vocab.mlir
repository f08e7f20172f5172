// RUN: dt-opt %s -split-input-file -convert-dt-to-kernels | FileCheck %s
// RUN: dt-opt %s -split-input-file -convert-dt-to-kernels -dt-verify-arena

// Vocabulary parallelism: dt.shard_start asks the runtime for the rank's
// coordinates on the mesh (runtime/include/dtrt/collectives.h) and stores where
// its block starts (here over tp of a 2x4 mesh, the coarser axis, then dp) into
// the arena; the kernels over blocks take it by value, with the block's size and
// the whole table's or class count.
module attributes {dt.arena_bytes = 4096 : i64} {
  mesh.mesh @mesh(shape = 2x4) {dt.axes = ["tp", "dp"]}
  dt.global state @t : tensor<8x4xf32> {offset = 0 : i64}
  dt.global input @ids : tensor<6xi32> {offset = 128 : i64}
  dt.global output @loss : tensor<f32> {offset = 192 : i64}
  dt.global output @correct : tensor<f32> {offset = 256 : i64}
  // CHECK-DAG: func.func private @dtrt_mesh_coord(i32) -> i64
  // CHECK-DAG: func.func private @dtk_embedding_shard_f32(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64)
  // CHECK-DAG: func.func private @dtk_class_stats_f32(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64)
  // CHECK-DAG: func.func private @dtk_cross_entropy_stats_f32(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64)
  // CHECK-LABEL: func.func @dt_grad_step
  func.func @grad_step() {
    %t = dt.load @t {dt.offsets = [0]} : tensor<8x4xf32>
    %ids = dt.load @ids {dt.offsets = [128]} : tensor<6xi32>
    // Pattern: start = ((0 * 2 + coord(tp)) * 4 + coord(dp)) * 8.
    // CHECK: %[[TP:.*]] = call @dtrt_mesh_coord(%{{.*}}) : (i32) -> i64
    // CHECK: arith.addi %{{.*}}, %[[TP]]
    // CHECK: %[[DP:.*]] = call @dtrt_mesh_coord(%{{.*}}) : (i32) -> i64
    // CHECK: %[[I:.*]] = arith.addi %{{.*}}, %[[DP]]
    // CHECK: %[[START:.*]] = arith.muli %[[I]], %{{.*}} : i64
    // CHECK: memref.store %[[START]]
    %f = dt.shard_start {axes = array<i16: 0, 1>, size = 8, dt.offsets = [320]} : tensor<i64>
    // CHECK: %[[F:.*]] = memref.load
    // CHECK: call @dtk_embedding_shard_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[F]], %{{.*}}, %{{.*}}, %{{.*}})
    %h = dt.embedding_shard %t, %ids, %f {rows = 64, dt.offsets = [384]} : tensor<8x4xf32>, tensor<6xi32>, tensor<i64> -> tensor<6x4xf32>
    %l = dt.matmul %h, %t {transpose_rhs, dt.offsets = [512]} : tensor<6x4xf32>, tensor<8x4xf32> -> tensor<6x8xf32>
    // CHECK: call @dtk_class_stats_f32
    %s = dt.class_stats %l, %ids, %f {classes = 64, dt.offsets = [768]} : tensor<6x8xf32>, tensor<6xi32>, tensor<i64> -> tensor<4x6xf32>
    %all = dt.reshape %s {dt.offsets = [768]} : tensor<4x6xf32> -> tensor<1x4x6xf32>
    // CHECK: call @dtk_cross_entropy_stats_f32
    %loss = dt.cross_entropy_stats %all, %ids {dt.offsets = [192]} : tensor<1x4x6xf32>, tensor<6xi32> -> tensor<f32>
    dt.store %loss, @loss : tensor<f32>
    // CHECK: call @dtk_count_correct_stats_f32
    %n = dt.count_correct_stats %all, %ids {dt.offsets = [256]} : tensor<1x4x6xf32>, tensor<6xi32> -> tensor<f32>
    dt.store %n, @correct : tensor<f32>
    // CHECK: call @dtk_cross_entropy_grad_shard_f32
    %d = dt.cross_entropy_grad_shard %l, %ids, %all, %loss, %f {classes = 64, dt.offsets = [1024]} : tensor<6x8xf32>, tensor<6xi32>, tensor<1x4x6xf32>, tensor<f32>, tensor<i64> -> tensor<6x8xf32>
    %dh = dt.matmul %d, %t {dt.offsets = [1280]} : tensor<6x8xf32>, tensor<8x4xf32> -> tensor<6x4xf32>
    // CHECK: call @dtk_embedding_grad_shard_f32
    %dt = dt.embedding_grad_shard %ids, %dh, %f {rows = 64, dt.offsets = [0]} : tensor<6xi32>, tensor<6x4xf32>, tensor<i64> -> tensor<8x4xf32>
    dt.store %dt, @t : tensor<8x4xf32>
    return
  }
}
