// RUN: dt-opt %s -split-input-file -convert-dt-to-kernels | FileCheck %s
// RUN: dt-opt %s -split-input-file -convert-dt-to-kernels -dt-verify-arena

// Collectives of a partitioned program become calls into the runtime
// (runtime/include/dtrt/collectives.h) on arena pointers: counts, the group size
// where the call needs it, the element type (0: f32), the group as a mask of mesh
// axes, and the collective's id in the manifest. dt.pad and dt.slice are copies.
module attributes {dt.arena_bytes = 1024 : i64} {
  mesh.mesh @mesh(shape = 2x4) {dt.axes = ["tp", "dp"]}
  dt.global grad @g : tensor<10xf32> {offset = 0 : i64}
  dt.global state @m : tensor<3xf32> {offset = 64 : i64}
  dt.global output @s : tensor<f32> {offset = 128 : i64}
  // CHECK-NOT: mesh.mesh
  // CHECK-DAG: func.func private @dtrt_all_reduce(!llvm.ptr, !llvm.ptr, i64, i32, i32, i32)
  // CHECK-DAG: func.func private @dtrt_reduce_scatter(!llvm.ptr, !llvm.ptr, i64, i64, i32, i32, i32)
  // CHECK-DAG: func.func private @dtrt_all_gather(!llvm.ptr, !llvm.ptr, i64, i64, i32, i32, i32)
  // CHECK-DAG: func.func private @dtrt_take_shard(!llvm.ptr, !llvm.ptr, i64, i64, i32, i32, i32)
  // CHECK-DAG: func.func private @dtrt_all_to_all(!llvm.ptr, !llvm.ptr, i64, i64, i32, i32, i32)
  // CHECK-LABEL: func.func @dt_apply_step
  func.func @apply_step() {
    %g = dt.load @g {dt.offsets = [0]} : tensor<10xf32>
    // Pattern: dt.pad => fill with zeros, copy into the front.
    // CHECK: linalg.fill
    // CHECK: scf.for %[[I:.*]] =
    // CHECK: %[[V:.*]] = memref.load %{{.*}}[%[[I]]] : memref<10xf32>
    // CHECK: memref.store %[[V]], %{{.*}}[%[[I]]] : memref<12xf32>
    %p = dt.pad %g axis 0 {dt.offsets = [192]} : tensor<10xf32> -> tensor<12xf32>
    // Pattern: mesh.reduce_scatter over dp (axis 1: mask 2) => 3 elements, group 4.
    // CHECK: %[[C3:.*]] = arith.constant 3 : i64
    // CHECK: %[[C4:.*]] = arith.constant 4 : i64
    // CHECK: %[[F32:.*]] = arith.constant 0 : i32
    // CHECK: %[[DP:.*]] = arith.constant 2 : i32
    // CHECK: %[[ID0:.*]] = arith.constant 0 : i32
    // CHECK: call @dtrt_reduce_scatter(%{{.*}}, %{{.*}}, %[[C3]], %[[C4]], %[[F32]], %[[DP]], %[[ID0]])
    %r = mesh.reduce_scatter %p on @mesh mesh_axes = [1] scatter_axis = 0 {dt.id = 0 : i64, dt.offsets = [256]} : tensor<12xf32> -> tensor<3xf32>
    dt.store %r, @m : tensor<3xf32>
    // CHECK: call @dtrt_all_gather(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, i64, i64, i32, i32, i32)
    %a = mesh.all_gather %r on @mesh mesh_axes = [1] gather_axis = 0 {dt.id = 1 : i64, dt.offsets = [320]} : tensor<3xf32> -> tensor<12xf32>
    // Pattern: dt.slice => a copy loop from the start of the input.
    // CHECK: scf.for %[[J:.*]] =
    // CHECK: %[[W:.*]] = memref.load %{{.*}}[%[[J]]] : memref<12xf32>
    // CHECK: memref.store %[[W]], %{{.*}}[%[[J]]] : memref<10xf32>
    %w = dt.slice %a axis 0 start 0 {dt.offsets = [0]} : tensor<12xf32> -> tensor<10xf32>
    dt.store %w, @g : tensor<10xf32>
    // CHECK: call @dtrt_take_shard
    %t = mesh.all_slice %p on @mesh mesh_axes = [1] slice_axis = 0 {dt.id = 2 : i64, dt.offsets = [384]} : tensor<12xf32> -> tensor<3xf32>
    %z = dt.reduce_sum %t [0] {dt.offsets = [448]} : tensor<3xf32> -> tensor<f32>
    // Pattern: mesh.all_to_all over tp (axis 0: mask 1) => blocks of 2, group 2.
    // CHECK: %[[B2:.*]] = arith.constant 2 : i64
    // CHECK: %[[G2:.*]] = arith.constant 2 : i64
    // CHECK: %[[TP:.*]] = arith.constant 1 : i32
    // CHECK: call @dtrt_all_to_all(%{{.*}}, %{{.*}}, %[[B2]], %[[G2]], %{{.*}}, %[[TP]], %{{.*}}) : (!llvm.ptr, !llvm.ptr, i64, i64, i32, i32, i32)
    %x = dt.reshape %p {dt.offsets = [192]} : tensor<12xf32> -> tensor<2x6xf32>
    %xs = dt.slice %x axis 1 start 0 {dt.offsets = [512]} : tensor<2x6xf32> -> tensor<2x2xf32>
    %e = mesh.all_to_all %xs on @mesh mesh_axes = [0] split_axis = 0 concat_axis = 0 {dt.id = 4 : i64, dt.offsets = [576]} : tensor<2x2xf32> -> tensor<2x2xf32>
    // Over both axes: mask 3.
    // CHECK: %[[BOTH:.*]] = arith.constant 3 : i32
    // CHECK: call @dtrt_all_reduce(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[BOTH]], %{{.*}})
    %s = mesh.all_reduce %z on @mesh mesh_axes = [0, 1] {dt.id = 3 : i64, dt.offsets = [128]} : tensor<f32> -> tensor<f32>
    dt.store %s, @s : tensor<f32>
    return
  }
}

// -----

// An asynchronous collective starts where it stands (dtrt_*_start, the same
// arguments) and its dt.wait waits for it by id; the wait's result is the
// collective's buffer, so nothing is copied.
module attributes {dt.arena_bytes = 1024 : i64} {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["dp"]}
  dt.global grad @g : tensor<8xf32> {offset = 0 : i64}
  // CHECK-DAG: func.func private @dtrt_all_reduce_start(!llvm.ptr, !llvm.ptr, i64, i32, i32, i32)
  // CHECK-DAG: func.func private @dtrt_wait(i32)
  // CHECK-LABEL: func.func @dt_grad_step
  func.func @grad_step() {
    %g = dt.load @g {dt.offsets = [0]} : tensor<8xf32>
    // CHECK: %[[ID:.*]] = arith.constant 7 : i32
    // CHECK: call @dtrt_all_reduce_start(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ID]])
    %s = mesh.all_reduce %g on @mesh mesh_axes = [0] {dt.async, dt.id = 7 : i64, dt.offsets = [64]} : tensor<8xf32> -> tensor<8xf32>
    // CHECK: %[[ID2:.*]] = arith.constant 7 : i32
    // CHECK: call @dtrt_wait(%[[ID2]]) : (i32) -> ()
    %w = dt.wait %s, %g {dt.offsets = [64]} : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    // The store's copy, after the wait.
    // CHECK-NEXT: memref.copy
    dt.store %w, @g : tensor<8xf32>
    return
  }
}
