// RUN: dt-opt %s -split-input-file -convert-dt-to-kernels | FileCheck %s

// A planned entry point: every tensor is a view of the arena at its offset.
module attributes {dt.arena_bytes = 2048 : i64} {
  dt.global param @w : tensor<40x8xf32> {init = {kind = "constant", value = 1.0 : f64}, offset = 0 : i64}
  dt.global input @x : tensor<2x8xf32> {offset = 1280 : i64}
  dt.global param @b : tensor<40xf32> {init = {kind = "constant", value = 0.0 : f64}, offset = 1344 : i64}
  dt.global output @y : tensor<2x40xf32> {offset = 1536 : i64}

  // CHECK-NOT: dt.global
  // CHECK-DAG: func.func private @dtk_matmul_f32(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i32, i32)
  // The plan travels with the function: every buffer as (offset, bytes).
  // CHECK-LABEL: func.func @dt_forward(%{{.*}}: memref<2048xi8>)
  // CHECK-SAME: dt.plan = array<i64: 0, 1280, 1280, 64, 1344, 160, 1536, 320, 1728, 320>
  func.func @forward() {
    %x = dt.load @x {dt.offsets = [1280]} : tensor<2x8xf32>
    %w = dt.load @w {dt.offsets = [0]} : tensor<40x8xf32>
    %b = dt.load @b {dt.offsets = [1344]} : tensor<40xf32>
    // Pattern: dt.matmul => call @dtk_matmul_f32(ptr x, ptr w, ptr mm, batch 1, m 2, n 40, k 8, 0, 1)
    // CHECK: %[[BASE:.*]] = llvm.inttoptr
    // Views and pointers name the buffer they address (dt.buffer).
    // CHECK-DAG: %[[Y:.*]] = memref.view %{{.*}}[%{{.*}}][] {dt.buffer = array<i64: 1536, 320>} : memref<2048xi8> to memref<2x40xf32>
    // CHECK-DAG: %[[B:.*]] = memref.view %{{.*}}[%{{.*}}][] {dt.buffer = array<i64: 1344, 160>} : memref<2048xi8> to memref<40xf32>
    // CHECK-DAG: %[[MM:.*]] = memref.view %{{.*}}[%{{.*}}][] {dt.buffer = array<i64: 1728, 320>} : memref<2048xi8> to memref<2x40xf32>
    // CHECK-DAG: %[[O1280:.*]] = arith.constant 1280 : i64
    // CHECK-DAG: %[[PX:.*]] = llvm.getelementptr %[[BASE]][%[[O1280]]] {dt.buffer = array<i64: 1280, 64>}
    // CHECK-DAG: %[[O0:.*]] = arith.constant 0 : i64
    // CHECK-DAG: %[[PW:.*]] = llvm.getelementptr %[[BASE]][%[[O0]]] {dt.buffer = array<i64: 0, 1280>}
    // CHECK-DAG: %[[O1728:.*]] = arith.constant 1728 : i64
    // CHECK-DAG: %[[PMM:.*]] = llvm.getelementptr %[[BASE]][%[[O1728]]] {dt.buffer = array<i64: 1728, 320>}
    // CHECK: call @dtk_matmul_f32(%[[PX]], %[[PW]], %[[PMM]], %{{.*}}) :
    %mm = dt.matmul %x, %w {transpose_rhs, dt.offsets = [1728]} : tensor<2x8xf32>, tensor<40x8xf32> -> tensor<2x40xf32>
    // Pattern: dt.fused => rows, then 16 lanes at a time, then the remainder one by one;
    // the bias is indexed by the inner index only (its broadcast dimension is gone).
    // CHECK: scf.for %[[ROW:.*]] =
    // CHECK:   scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
    // CHECK:     %[[VMM:.*]] = vector.load %[[MM]][%[[ROW]], %[[J]]] : memref<2x40xf32>, vector<16xf32>
    // CHECK:     %[[VB:.*]] = vector.load %[[B]][%[[J]]] : memref<40xf32>, vector<16xf32>
    // CHECK:     %[[S:.*]] = arith.addf %[[VMM]], %[[VB]] : vector<16xf32>
    // CHECK:     arith.cmpf ugt, %[[S]], %{{.*}} : vector<16xf32>
    // CHECK:     vector.store %{{.*}}, %[[Y]][%[[ROW]], %[[J]]] : memref<2x40xf32>, vector<16xf32>
    // CHECK:   scf.for %[[K:.*]] =
    // CHECK:     memref.load %[[MM]][%[[ROW]], %[[K]]] : memref<2x40xf32>
    // CHECK:     memref.store %{{.*}}, %[[Y]][%[[ROW]], %[[K]]] : memref<2x40xf32>
    %y = dt.fused(%mm, %b) {dt.offsets = [1536]} : (tensor<2x40xf32>, tensor<40xf32>) -> tensor<2x40xf32> {
    ^bb0(%p: tensor<2x40xf32>, %q: tensor<2x40xf32>):
      %s = dt.add %p, %q : tensor<2x40xf32>
      %r = dt.relu %s : tensor<2x40xf32>
      dt.yield %r : tensor<2x40xf32>
    }
    // Planned in place: the store is free.
    // CHECK-NOT: memref.copy
    dt.store %y, @y : tensor<2x40xf32>
    // CHECK: return
    return
  }
}

// -----

// Without broadcasting, a fused region is one flat loop over all elements; a 0-d operand
// is loaded once, before the loop, and splatted.
module attributes {dt.arena_bytes = 512 : i64} {
  // CHECK-LABEL: func.func @dt_flat
  func.func @flat() {
    %c = dt.constant {dt.offsets = [0]} dense<2.0> : tensor<4x8xf32>
    %s = dt.constant {dt.offsets = [128]} dense<3.0> : tensor<f32>
    // CHECK: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : memref<4x8xf32>)
    // CHECK: %[[S:.*]] = memref.load %{{.*}}[] : memref<f32>
    // CHECK: %[[SPLAT:.*]] = vector.splat %[[S]] : vector<16xf32>
    // CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
    // CHECK:   %[[V:.*]] = vector.load %{{.*}}[%[[I]]] : memref<32xf32>, vector<16xf32>
    // CHECK:   arith.mulf %[[V]], %[[SPLAT]] : vector<16xf32>
    // CHECK-NOT: memref.load
    // CHECK: return
    %e = dt.fused(%c, %s) {dt.offsets = [192]} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>):
      %x = dt.mul %a, %b : tensor<4x8xf32>
      dt.yield %x : tensor<4x8xf32>
    }
    return
  }
}

// -----

// Sums: over trailing axes in vector registers with a horizontal sum, f32 data
// accumulated in f64; over leading axes into the output row.
module attributes {dt.arena_bytes = 8192 : i64} {
  // CHECK-LABEL: func.func @dt_sums
  func.func @sums() {
    %g = dt.constant {dt.offsets = [0]} dense<1.0> : tensor<4x40xf32>
    // CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<16xf64>
    // CHECK: %[[ACC:.*]] = scf.for {{.*}} iter_args(%[[A:.*]] = %[[ZERO]]) -> (vector<16xf64>)
    // CHECK:   %[[V:.*]] = vector.load
    // CHECK:   %[[SQ:.*]] = arith.mulf %[[V]], %[[V]] : vector<16xf32>
    // CHECK:   %[[WIDE:.*]] = arith.extf %[[SQ]] : vector<16xf32> to vector<16xf64>
    // CHECK:   %[[NEXT:.*]] = arith.addf %[[A]], %[[WIDE]] : vector<16xf64>
    // CHECK:   scf.yield %[[NEXT]]
    // CHECK: %[[TOTAL:.*]] = vector.reduction <add>, %[[ACC]] : vector<16xf64> into f64
    // CHECK: %[[NORM:.*]] = arith.truncf %[[TOTAL]] : f64 to f32
    // CHECK: memref.store %[[NORM]]
    %n = dt.fused(%g) {dt.offsets = [1024], reduce_axes = array<i64: 0, 1>} : (tensor<4x40xf32>) -> tensor<f32> {
    ^bb0(%a: tensor<4x40xf32>):
      %sq = dt.mul %a, %a : tensor<4x40xf32>
      dt.yield %sq : tensor<4x40xf32>
    }
    // CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[ROW:.*]] : memref<40xf32>)
    // CHECK: scf.for
    // CHECK:   scf.for
    // CHECK:     %[[OLD:.*]] = vector.load %[[ROW]]
    // CHECK:     %[[IN:.*]] = vector.load
    // CHECK:     %[[SUM:.*]] = arith.addf %[[OLD]], %[[IN]] : vector<16xf32>
    // CHECK:     vector.store %[[SUM]], %[[ROW]]
    %b = dt.reduce_sum %g [0] {dt.offsets = [2048]} : tensor<4x40xf32> -> tensor<40xf32>
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
    // Fewer elements than a vector: a scalar accumulation only.
    // CHECK: linalg.fill
    // CHECK-NOT: vector.reduction
    // CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (f64)
    %r = dt.reduce_sum %v [0] {dt.offsets = [320]} : tensor<4xf32> -> tensor<f32>
    // CHECK: memref.copy %{{.*}}, %{{.*}} : memref<f32> to memref<f32>
    dt.store %r, @sum : tensor<f32>
    return
  }
}

// -----

// Offsets at and above 2^28, 2^31 and 2^32 bytes: pointers take them as i64
// operands (a GEP's constant index holds 29 bits in MLIR 19, and wrapped them).
module attributes {dt.arena_bytes = 4563402816 : i64} {
  dt.global param @table : tensor<256x1024xf32> {init = {kind = "constant", value = 1.0 : f64}, offset = 268435456 : i64}
  dt.global input @ids : tensor<16xi32> {offset = 2147483648 : i64}
  dt.global output @rows : tensor<16x1024xf32> {offset = 4294967296 : i64}
  // CHECK-LABEL: func.func @dt_lookup(%{{.*}}: memref<4563402816xi8>)
  // CHECK-DAG: %[[BASE:.*]] = llvm.inttoptr
  // CHECK-DAG: %[[O28:.*]] = arith.constant 268435456 : i64
  // CHECK-DAG: %[[O31:.*]] = arith.constant 2147483648 : i64
  // CHECK-DAG: %[[O32:.*]] = arith.constant 4294967296 : i64
  // CHECK-DAG: %[[T:.*]] = llvm.getelementptr %[[BASE]][%[[O28]]] {dt.buffer = array<i64: 268435456, 1048576>}
  // CHECK-DAG: %[[I:.*]] = llvm.getelementptr %[[BASE]][%[[O31]]] {dt.buffer = array<i64: 2147483648, 64>}
  // CHECK-DAG: %[[R:.*]] = llvm.getelementptr %[[BASE]][%[[O32]]] {dt.buffer = array<i64: 4294967296, 65536>}
  // CHECK: call @dtk_embedding_f32(%[[T]], %[[I]], %[[R]],
  func.func @lookup() {
    %t = dt.load @table {dt.offsets = [268435456]} : tensor<256x1024xf32>
    %i = dt.load @ids {dt.offsets = [2147483648]} : tensor<16xi32>
    %r = dt.embedding %t, %i {dt.offsets = [4294967296]} : tensor<256x1024xf32>, tensor<16xi32> -> tensor<16x1024xf32>
    dt.store %r, @rows : tensor<16x1024xf32>
    return
  }
}

// -----

// A batch norm's statistics, as the tracer shapes them: sums over the leading and
// the trailing axes around a kept one (dimensions of one aside), one vector
// accumulator per kept element, carried across the leading axis, then a
// horizontal sum and the scalar remainder of each row.
module attributes {dt.arena_bytes = 1024 : i64} {
  // CHECK-LABEL: func.func @dt_statistics
  func.func @statistics() {
    %x = dt.constant {dt.offsets = [0]} dense<1.0> : tensor<1x2x3x20xf32>
    // CHECK-NOT: linalg.generic
    // CHECK: scf.for %[[C:.*]] =
    // CHECK:   %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<16xf64>
    // CHECK:   %[[ACC:.*]] = scf.for {{.*}} iter_args(%[[A:.*]] = %[[ZERO]]) -> (vector<16xf64>)
    // CHECK:     scf.for {{.*}} iter_args(%{{.*}} = %[[A]]) -> (vector<16xf64>)
    // CHECK:       vector.load
    // CHECK:   %[[SUM:.*]] = vector.reduction <add>, %[[ACC]] : vector<16xf64> into f64
    // CHECK:   scf.for {{.*}} iter_args(%{{.*}} = %[[SUM]]) -> (f64)
    // CHECK:     scf.for {{.*}} -> (f64)
    // CHECK:       memref.load
    // CHECK:   arith.truncf
    %s = dt.reduce_sum %x [1, 3] {dt.offsets = [512]} : tensor<1x2x3x20xf32> -> tensor<1x3xf32>
    return
  }
}
