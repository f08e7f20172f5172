// RUN: dt-opt %s -split-input-file -convert-dt-to-kernels | FileCheck %s
// RUN: dt-opt %s -split-input-file -convert-dt-to-kernels -dt-verify-arena
// RUN: dt-opt %s -split-input-file -convert-dt-to-kernels -dt-lower-to-llvm | FileCheck %s --check-prefix=LLVM

// Loops of 2^15 elements and more run on the kernels' pool: the loop over a
// range [begin, end) of their outer dimension is outlined into a function of
// (arena, begin, end), called through dtk_parallel_for with the arena as the
// context. Smaller loops stay in the entry point.

// A flat elementwise loop: blocks of 4096 elements on the pool, the remainder
// (33000 = 8 x 4096 + 232) on the calling thread.
module attributes {dt.arena_bytes = 264032 : i64} {
  dt.global input @x : tensor<33000xf32> {offset = 0 : i64}
  dt.global output @y : tensor<33000xf32> {offset = 132032 : i64}
  // The outlined loop comes first, with the entry's plan and its range.
  // CHECK: func.func private @dt_step_loop0(%{{.*}}: memref<264032xi8>, %[[BEGIN:.*]]: index, %[[END:.*]]: index)
  // CHECK-SAME: dt.parallel_range = 8 : i64
  // CHECK-SAME: dt.plan = array<i64: 0, 132000, 132032, 132000>
  // CHECK: %[[X:.*]] = memref.view {{.*}} {dt.buffer = array<i64: 0, 132000>} : memref<264032xi8> to memref<33000xf32>
  // CHECK: scf.for %[[BLOCK:.*]] = %[[BEGIN]] to %[[END]] step
  // CHECK:   %[[FIRST:.*]] = arith.muli %[[BLOCK]], %{{.*}}
  // CHECK:   scf.for %[[J:.*]] =
  // CHECK:     %[[AT:.*]] = arith.addi %[[FIRST]], %[[J]]
  // CHECK:     vector.load %[[X]][%[[AT]]] : memref<33000xf32>, vector<16xf32>
  // CHECK: func.func @dt_step(%[[ARENA:.*]]: memref<264032xi8>)
  // CHECK: %[[LOOP:.*]] = constant @dt_step_loop0 : (memref<264032xi8>, index, index) -> ()
  // CHECK: %[[N:.*]] = arith.constant 8 : i64
  // CHECK: %[[GRAIN:.*]] = arith.constant 2 : i64
  // CHECK: call @dtk_parallel_for(%[[N]], %[[GRAIN]], %[[LOOP]], %[[ARENA]])
  // The remainder, from 32768.
  // CHECK: %[[TAIL:.*]] = arith.constant 32768 : index
  // CHECK: scf.for %{{.*}} = %[[TAIL]] to
  func.func @step() {
    %x = dt.load @x {dt.offsets = [0]} : tensor<33000xf32>
    %y = dt.fused(%x) {dt.offsets = [132032]} : (tensor<33000xf32>) -> tensor<33000xf32> {
    ^bb0(%a: tensor<33000xf32>):
      %r = dt.relu %a : tensor<33000xf32>
      dt.yield %r : tensor<33000xf32>
    }
    dt.store %y, @y : tensor<33000xf32>
    return
  }
}

// LLVM: llvm.func internal @dt_step_loop0(%{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64)
// LLVM: llvm.func @dt_step(%{{.*}}: !llvm.ptr)
// LLVM: %[[F:.*]] = llvm.mlir.addressof @dt_step_loop0 : !llvm.ptr
// LLVM: llvm.call @dtk_parallel_for(%{{.*}}, %{{.*}}, %[[F]], %{{.*}}) : (i64, i64, !llvm.ptr, !llvm.ptr) -> ()

// -----

// A broadcast (a row added to every row) runs over its rows; a transpose that
// keeps the innermost dimension (heads: [B, T, H, D] -> [B, H, T, D]) moves
// whole vectors; a split copies at its offset; a row sum runs over its rows.
// Small ones stay in the entry.
module attributes {dt.arena_bytes = 1400000 : i64} {
  dt.global input @x : tensor<64x1024xf32> {offset = 0 : i64}
  dt.global input @b : tensor<1024xf32> {offset = 262144 : i64}
  dt.global input @small : tensor<4x8xf32> {offset = 266240 : i64}
  // CHECK-LABEL: func.func private @dt_step_loop0(%{{.*}}: memref<1400000xi8>
  // CHECK-SAME: dt.parallel_range = 64 : i64
  // CHECK: scf.for %[[ROW:.*]] = %{{.*}} to %{{.*}} step
  // CHECK:   scf.for %[[J:.*]] =
  // CHECK:     vector.load %{{.*}}[%[[ROW]], %[[J]]] : memref<64x1024xf32>, vector<16xf32>
  // CHECK:     vector.load %{{.*}}[%[[J]]] : memref<1024xf32>, vector<16xf32>
  // CHECK-LABEL: func.func private @dt_step_loop1
  // CHECK-SAME: dt.parallel_range = 64 : i64
  // CHECK: scf.for %[[B:.*]] = %{{.*}} to %{{.*}} step
  // CHECK:   scf.for %[[H:.*]] =
  // CHECK:     scf.for %[[T:.*]] =
  // CHECK:       scf.for %[[D:.*]] =
  // CHECK:         %[[V:.*]] = vector.load %{{.*}}[%[[B]], %[[T]], %[[H]], %[[D]]] : memref<64x16x4x16xf32>, vector<16xf32>
  // CHECK:         vector.store %[[V]], %{{.*}}[%[[B]], %[[H]], %[[T]], %[[D]]] : memref<64x4x16x16xf32>, vector<16xf32>
  // The split's second piece (its first, 64 elements, is small).
  // CHECK-LABEL: func.func private @dt_step_loop2
  // CHECK-SAME: dt.parallel_range = 64 : i64
  // CHECK: scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step
  // CHECK:   scf.for %[[C:.*]] =
  // CHECK:     %[[ONE:.*]] = arith.constant 1 : index
  // CHECK:     %[[SHIFTED:.*]] = arith.addi %[[C]], %[[ONE]] : index
  // CHECK:     vector.load %{{.*}}[%[[R]], %[[SHIFTED]]] : memref<64x1024xf32>, vector<16xf32>
  // CHECK:     vector.store %{{.*}}, %{{.*}}[%[[R]], %[[C]]] : memref<64x1023xf32>, vector<16xf32>
  // The slice from column 24.
  // CHECK-LABEL: func.func private @dt_step_loop3
  // CHECK: scf.for %[[R2:.*]] = %{{.*}} to %{{.*}} step
  // CHECK:   scf.for %[[C2:.*]] =
  // CHECK:     %[[C24:.*]] = arith.constant 24 : index
  // CHECK:     %[[AT24:.*]] = arith.addi %[[C2]], %[[C24]] : index
  // CHECK:     vector.load %{{.*}}[%[[R2]], %[[AT24]]] : memref<64x1024xf32>, vector<16xf32>
  // CHECK:     vector.store %{{.*}}, %{{.*}}[%[[R2]], %[[C2]]] : memref<64x1000xf32>, vector<16xf32>
  // CHECK-LABEL: func.func private @dt_step_loop4
  // CHECK-SAME: dt.parallel_range = 64 : i64
  // CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step
  // CHECK:   vector.reduction <add>
  // CHECK-LABEL: func.func @dt_step
  // CHECK-COUNT-5: call @dtk_parallel_for
  // The small transpose is a loop here, one element at a time.
  // CHECK: scf.for
  // CHECK:   scf.for
  // CHECK:     memref.load %{{.*}} : memref<4x8xf32>
  // CHECK:     memref.store %{{.*}} : memref<8x4xf32>
  // CHECK-NOT: dtk_parallel_for
  // CHECK: return
  func.func @step() {
    %x = dt.load @x {dt.offsets = [0]} : tensor<64x1024xf32>
    %b = dt.load @b {dt.offsets = [262144]} : tensor<1024xf32>
    %y = dt.fused(%x, %b) {dt.offsets = [270336]} : (tensor<64x1024xf32>, tensor<1024xf32>) -> tensor<64x1024xf32> {
    ^bb0(%p: tensor<64x1024xf32>, %q: tensor<64x1024xf32>):
      %s = dt.add %p, %q : tensor<64x1024xf32>
      dt.yield %s : tensor<64x1024xf32>
    }
    %h = dt.reshape %y {dt.offsets = [270336]} : tensor<64x1024xf32> -> tensor<64x16x4x16xf32>
    %t = dt.transpose %h [0, 2, 1, 3] {dt.offsets = [532480]} : tensor<64x16x4x16xf32> -> tensor<64x4x16x16xf32>
    %parts:2 = dt.split %x axis 1 {dt.offsets = [794624, 794880]} : tensor<64x1024xf32> -> tensor<64x1xf32>, tensor<64x1023xf32>
    %w = dt.slice %x axis 1 start 24 {dt.offsets = [1056768]} : tensor<64x1024xf32> -> tensor<64x1000xf32>
    %n = dt.fused(%x) {dt.offsets = [1312768], reduce_axes = array<i64: 1>} : (tensor<64x1024xf32>) -> tensor<64xf32> {
    ^bb0(%a: tensor<64x1024xf32>):
      %sq = dt.mul %a, %a : tensor<64x1024xf32>
      dt.yield %sq : tensor<64x1024xf32>
    }
    %small = dt.load @small {dt.offsets = [266240]} : tensor<4x8xf32>
    %st = dt.transpose %small [1, 0] {dt.offsets = [266368]} : tensor<4x8xf32> -> tensor<8x4xf32>
    return
  }
}

// -----

// A batch norm's loops on one rank: the iteration is [groups = 1, N, C, HW],
// so the pool splits N (the first dimension that is not 1), the index of the
// group being 0; its statistics (sums over N and HW around C) split the
// channels, each summed whole by one task.
module attributes {dt.arena_bytes = 1100000 : i64} {
  dt.global input @x : tensor<1x64x4x256xf32> {offset = 0 : i64}
  dt.global input @scale : tensor<1x1x4x1xf32> {offset = 262144 : i64}
  // CHECK-LABEL: func.func private @dt_step_loop0
  // CHECK-SAME: dt.parallel_range = 64 : i64
  // CHECK: scf.for %[[N:.*]] = %{{.*}} to %{{.*}} step
  // CHECK:   %[[ZERO:.*]] = arith.constant 0 : index
  // CHECK:   scf.for %[[C:.*]] =
  // CHECK:     scf.for %[[S:.*]] =
  // CHECK:       vector.load %{{.*}}[%[[ZERO]], %[[N]], %[[C]], %[[S]]] : memref<1x64x4x256xf32>, vector<16xf32>
  // CHECK-LABEL: func.func private @dt_step_loop1
  // CHECK-SAME: dt.parallel_range = 4 : i64
  // CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step
  // CHECK:   scf.for {{.*}} -> (vector<16xf64>)
  // CHECK:   vector.reduction <add>
  // CHECK-LABEL: func.func @dt_step
  // CHECK-COUNT-2: call @dtk_parallel_for
  func.func @step() {
    %x = dt.load @x {dt.offsets = [0]} : tensor<1x64x4x256xf32>
    %s = dt.load @scale {dt.offsets = [262144]} : tensor<1x1x4x1xf32>
    %y = dt.fused(%x, %s) {dt.offsets = [262208]} : (tensor<1x64x4x256xf32>, tensor<1x1x4x1xf32>) -> tensor<1x64x4x256xf32> {
    ^bb0(%p: tensor<1x64x4x256xf32>, %q: tensor<1x64x4x256xf32>):
      %m = dt.mul %p, %q : tensor<1x64x4x256xf32>
      dt.yield %m : tensor<1x64x4x256xf32>
    }
    %sum = dt.reduce_sum %x [0, 1, 3] {dt.offsets = [524352]} : tensor<1x64x4x256xf32> -> tensor<4xf32>
    return
  }
}

// -----

// A fused sum around kept axes (a batch norm's variance): per channel, on the
// pool, the body over [N, HW] into one vector accumulator, the channel's mean
// read once and splatted, then a horizontal sum.
module attributes {dt.arena_bytes = 600000 : i64} {
  dt.global input @x : tensor<1x64x4x256xf32> {offset = 0 : i64}
  dt.global input @mean : tensor<1x1x4x1xf32> {offset = 262144 : i64}
  // CHECK-LABEL: func.func private @dt_step_loop0
  // CHECK-SAME: dt.parallel_range = 4 : i64
  // CHECK-DAG: %[[X:.*]] = memref.view {{.*}} {dt.buffer = array<i64: 0, 262144>} {{.*}} to memref<65536xf32>
  // CHECK-DAG: %[[M:.*]] = memref.view {{.*}} {dt.buffer = array<i64: 262144, 16>} {{.*}} to memref<4xf32>
  // CHECK: scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step
  // CHECK:   %[[MEAN:.*]] = memref.load %[[M]][%[[C]]] : memref<4xf32>
  // CHECK:   %[[SPLAT:.*]] = vector.splat %[[MEAN]] : vector<16xf32>
  // CHECK:   scf.for {{.*}} -> (vector<16xf64>)
  // CHECK:     scf.for {{.*}} -> (vector<16xf64>)
  // CHECK:       %[[V:.*]] = vector.load %[[X]]
  // CHECK:       %[[D:.*]] = arith.subf %[[V]], %[[SPLAT]] : vector<16xf32>
  // CHECK:       arith.mulf %[[D]], %[[D]] : vector<16xf32>
  // CHECK:   vector.reduction <add>
  // CHECK-LABEL: func.func @dt_step
  // CHECK: call @dtk_parallel_for
  func.func @step() {
    %x = dt.load @x {dt.offsets = [0]} : tensor<1x64x4x256xf32>
    %m = dt.load @mean {dt.offsets = [262144]} : tensor<1x1x4x1xf32>
    %v = dt.fused(%x, %m) {dt.offsets = [262208], reduce_axes = array<i64: 1, 3>} : (tensor<1x64x4x256xf32>, tensor<1x1x4x1xf32>) -> tensor<1x4xf32> {
    ^bb0(%p: tensor<1x64x4x256xf32>, %q: tensor<1x64x4x256xf32>):
      %d = dt.sub %p, %q : tensor<1x64x4x256xf32>
      %s = dt.mul %d, %d : tensor<1x64x4x256xf32>
      dt.yield %s : tensor<1x64x4x256xf32>
    }
    return
  }
}
