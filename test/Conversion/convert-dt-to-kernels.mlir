// RUN: dt-opt %s -split-input-file -convert-dt-to-kernels | FileCheck %s

// A planned entry point: every tensor is a view of the arena at its offset.
module attributes {dt.arena_bytes = 1024 : i64} {
  dt.global param @w : tensor<4x8xf32> {init = {kind = "constant", value = 1.0 : f64}, offset = 0 : i64}
  dt.global input @x : tensor<2x8xf32> {offset = 128 : i64}
  dt.global param @b : tensor<4xf32> {init = {kind = "constant", value = 0.0 : f64}, offset = 192 : i64}
  dt.global output @y : tensor<2x4xf32> {offset = 256 : i64}

  // CHECK-NOT: dt.global
  // CHECK-DAG: func.func private @dtk_matmul_f32(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i32, i32)
  // CHECK-LABEL: func.func @dt_forward(%{{.*}}: memref<1024xi8>)
  func.func @forward() {
    %x = dt.load @x {dt.offsets = [128]} : tensor<2x8xf32>
    %w = dt.load @w {dt.offsets = [0]} : tensor<4x8xf32>
    %b = dt.load @b {dt.offsets = [192]} : tensor<4xf32>
    // Pattern: dt.matmul => call @dtk_matmul_f32(ptr x, ptr w, ptr mm, batch 1, m 2, n 4, k 8, 0, 1)
    // CHECK: %[[BASE:.*]] = llvm.inttoptr
    // CHECK-DAG: %[[PX:.*]] = llvm.getelementptr %[[BASE]][128]
    // CHECK-DAG: %[[PW:.*]] = llvm.getelementptr %[[BASE]][0]
    // CHECK-DAG: %[[PMM:.*]] = llvm.getelementptr %[[BASE]][320]
    // CHECK: call @dtk_matmul_f32(%[[PX]], %[[PW]], %[[PMM]], %{{.*}}) :
    %mm = dt.matmul %x, %w {transpose_rhs, dt.offsets = [320]} : tensor<2x8xf32>, tensor<4x8xf32> -> tensor<2x4xf32>
    // Pattern: dt.fused => linalg.generic with a broadcasting map for the bias.
    // CHECK: linalg.generic {indexing_maps = [#[[ID:.*]], #[[BC:.*]], #[[ID]]], iterator_types = ["parallel", "parallel"]}
    // CHECK-SAME: ins(%{{.*}}, %{{.*}} : memref<2x4xf32>, memref<4xf32>) outs(%{{.*}} : memref<2x4xf32>)
    // CHECK: arith.addf
    // CHECK: arith.cmpf ugt
    // CHECK: linalg.yield
    %y = dt.fused(%mm, %b) {dt.offsets = [256]} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> {
    ^bb0(%p: tensor<2x4xf32>, %q: tensor<2x4xf32>):
      %s = dt.add %p, %q : tensor<2x4xf32>
      %r = dt.relu %s : tensor<2x4xf32>
      dt.yield %r : tensor<2x4xf32>
    }
    // Planned in place: the store is free.
    // CHECK-NOT: memref.copy
    dt.store %y, @y : tensor<2x4xf32>
    // CHECK: return
    return
  }
}

// -----

// Without broadcasting, a fused region is one flat loop over all elements.
module attributes {dt.arena_bytes = 256 : i64} {
  // CHECK-LABEL: func.func @dt_flat
  func.func @flat() {
    %c = dt.constant {dt.offsets = [0]} dense<2.0> : tensor<4x8xf32>
    // CHECK: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : memref<4x8xf32>)
    // CHECK: linalg.generic {{.*}}iterator_types = ["parallel"]{{.*}}ins(%{{.*}} : memref<32xf32>) outs(%{{.*}} : memref<32xf32>)
    %e = dt.fused(%c) {dt.offsets = [128]} : (tensor<4x8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>):
      %x = dt.exp %a : tensor<4x8xf32>
      dt.yield %x : tensor<4x8xf32>
    }
    return
  }
}

// -----

// A store the plan could not place in its global copies; a reduction fills then
// accumulates; the schedule is scalar arithmetic.
module attributes {dt.arena_bytes = 512 : i64} {
  dt.global state @step : tensor<i64> {offset = 0 : i64}
  dt.global input @total : tensor<i64> {offset = 64 : i64}
  dt.global output @lr : tensor<f32> {offset = 128 : i64}
  dt.global output @sum : tensor<f32> {offset = 192 : i64}
  // CHECK-LABEL: func.func @dt_misc
  func.func @misc() {
    %s = dt.load @step {dt.offsets = [0]} : tensor<i64>
    %t = dt.load @total {dt.offsets = [64]} : tensor<i64>
    // CHECK: memref.load {{.*}} : memref<i64>
    // CHECK: math.cos
    // CHECK: arith.select
    // CHECK: memref.store {{.*}} : memref<f32>
    %lr = dt.schedule %s, %t {kind = "cosine", lr = 1.0e-3 : f64, warmup = 10 : i64, dt.offsets = [128]} : tensor<i64>, tensor<i64> -> tensor<f32>
    dt.store %lr, @lr : tensor<f32>
    %v = dt.constant {dt.offsets = [256]} dense<1.0> : tensor<4xf32>
    // CHECK: linalg.fill
    // CHECK: linalg.generic {{.*}}iterator_types = ["reduction"]
    %r = dt.reduce_sum %v [0] {dt.offsets = [320]} : tensor<4xf32> -> tensor<f32>
    // CHECK: memref.copy %{{.*}}, %{{.*}} : memref<f32> to memref<f32>
    dt.store %r, @sum : tensor<f32>
    return
  }
}
