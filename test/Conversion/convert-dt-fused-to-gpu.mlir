// RUN: dt-opt %s -convert-dt-fused-to-gpu | FileCheck %s

// Each planned dt.fused (and each transpose, sum over axes, ...) becomes a kernel
// taking the arena's base, named after its entry point and place: a grid-stride loop
// over the iteration space whose body loads each operand at its planned offset
// (broadcast dimensions not indexed), applies the ops' scalar bodies, and stores at
// the result's offset. A region with reduce_axes and few terms per output loops over
// its outputs, each thread summing its reduced axes in order; with 32 terms or more,
// each output gets a block, whose threads' partial sums (in f64) meet in a tree in
// workgroup memory. With few outputs of 8192 terms or more, each output's terms are
// cut into chunks of 4096, a block each: a chunk's block leaves its sums past the
// arena (dt.arena_bytes) and counts itself atomically, and the output's last block
// adds the partials in chunk order. The host function is left as it is.

module attributes {dt.arena_bytes = 70000 : i64} {
  dt.global input @x : tensor<4x3xf32> {offset = 0 : i64}
  dt.global param @b : tensor<3xf32> {init = {kind = "constant", value = 0.0 : f64}, offset = 64 : i64}
  dt.global param @w : tensor<64x3xf32> {init = {kind = "constant", value = 0.0 : f64}, offset = 256 : i64}
  dt.global param @big : tensor<128x128xf32> {init = {kind = "constant", value = 0.0 : f64}, offset = 4096 : i64}
  // CHECK: func.func @grad_step()
  // CHECK: dt.fused
  func.func @grad_step() {
    %x = dt.load @x {dt.offsets = [0]} : tensor<4x3xf32>
    %b = dt.load @b {dt.offsets = [64]} : tensor<3xf32>
    %y = dt.fused(%x, %b) {dt.offsets = [128]} : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32> {
    ^bb0(%a: tensor<4x3xf32>, %c: tensor<4x3xf32>):
      %s = dt.add %a, %c : tensor<4x3xf32>
      %r = dt.tanh %s : tensor<4x3xf32>
      dt.yield %r : tensor<4x3xf32>
    }
    %n = dt.fused(%x) {dt.offsets = [192], reduce_axes = array<i64: 0>} : (tensor<4x3xf32>) -> tensor<3xf32> {
    ^bb0(%a: tensor<4x3xf32>):
      %sq = dt.mul %a, %a : tensor<4x3xf32>
      dt.yield %sq : tensor<4x3xf32>
    }
    %w = dt.load @w {dt.offsets = [256]} : tensor<64x3xf32>
    %t = dt.transpose %w [1, 0] {dt.offsets = [1024]} : tensor<64x3xf32> -> tensor<3x64xf32>
    %m = dt.fused(%t) {dt.offsets = [2048], reduce_axes = array<i64: 1>} : (tensor<3x64xf32>) -> tensor<3xf32> {
    ^bb0(%a: tensor<3x64xf32>):
      dt.yield %a : tensor<3x64xf32>
    }
    %g = dt.load @big {dt.offsets = [4096]} : tensor<128x128xf32>
    %norm = dt.fused(%g) {dt.offsets = [69632], reduce_axes = array<i64: 0, 1>} : (tensor<128x128xf32>) -> tensor<f32> {
    ^bb0(%a: tensor<128x128xf32>):
      %sq = dt.mul %a, %a : tensor<128x128xf32>
      dt.yield %sq : tensor<128x128xf32>
    }
    return
  }
}

// CHECK-LABEL: gpu.module @dt_kernels
// CHECK: gpu.func @grad_step_k0(%[[ARENA:.*]]: !llvm.ptr) kernel
// CHECK-DAG: %[[TID:.*]] = gpu.thread_id x
// CHECK-DAG: %[[BID:.*]] = gpu.block_id x
// CHECK-DAG: %[[BDIM:.*]] = gpu.block_dim x
// CHECK-DAG: %[[GDIM:.*]] = gpu.grid_dim x
// CHECK: %[[N:.*]] = arith.constant 12 : index
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[N]] step %{{.*}} {
// The column index j = i mod 3 is all the bias needs.
// CHECK: %[[J:.*]] = arith.remui %[[I]], %{{.*}} : index
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: arith.addi %{{.*}}, %[[J]] : index
// CHECK: %[[B:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: %[[S:.*]] = arith.addf %{{.*}}, %[[B]] : f32
// CHECK: %[[R:.*]] = math.tanh %[[S]] : f32
// CHECK: arith.constant 128 : index
// CHECK: llvm.store %[[R]], %{{.*}} : f32, !llvm.ptr
// CHECK: gpu.return
// CHECK: gpu.func @grad_step_k1(%{{.*}}: !llvm.ptr) kernel
// CHECK: scf.for %[[O:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK: %[[SUM:.*]] = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (f32) {
// CHECK: %[[SQ:.*]] = arith.mulf
// CHECK: %[[NEXT:.*]] = arith.addf %[[ACC]], %[[SQ]] : f32
// CHECK: scf.yield %[[NEXT]] : f32
// CHECK: arith.constant 192 : index
// CHECK: llvm.store %[[SUM]], %{{.*}} : f32, !llvm.ptr
// CHECK: gpu.return
// The transpose: output element (i, j) reads input (j, i).
// CHECK: gpu.func @grad_step_k2(%{{.*}}: !llvm.ptr) kernel
// CHECK: arith.constant 192 : index
// CHECK: scf.for
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: arith.constant 1024 : index
// CHECK: llvm.store
// The sum of 64 terms per output: a block each.
// CHECK: gpu.func @grad_step_k3(%{{.*}}: !llvm.ptr) workgroup(%[[SHARED:.*]] : memref<256xf64, #gpu.address_space<workgroup>>) kernel
// CHECK: %[[SUM2:.*]] = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (f64) {
// CHECK: arith.extf %{{.*}} : f32 to f64
// CHECK: memref.store %[[SUM2]], %[[SHARED]]
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK: gpu.barrier
// CHECK: arith.truncf %{{.*}} : f64 to f32
// CHECK: arith.constant 2048 : index
// CHECK: llvm.store
// One output of 16384 terms: 4 chunks, a block each. The counter is at the arena's
// end (70000), the partials after it (70008).
// CHECK: gpu.func @grad_step_k4(%{{.*}}: !llvm.ptr) workgroup(%[[SUMS:.*]] : memref<256xf64, #gpu.address_space<workgroup>>, %[[FLAG:.*]] : memref<1xi32, #gpu.address_space<workgroup>>) kernel
// CHECK: %[[PAIRS:.*]] = arith.constant 4 : index
// CHECK: scf.for %[[PAIR:.*]] = %{{.*}} to %[[PAIRS]] step %{{.*}} {
// CHECK: %[[CHUNK:.*]] = arith.remui %[[PAIR]], %{{.*}} : index
// CHECK: arith.muli %[[CHUNK]], %{{.*}} : index
// CHECK: arith.minui
// CHECK: memref.store %{{.*}}, %[[SUMS]]
// CHECK: scf.if
// CHECK: arith.constant 70008 : index
// CHECK: llvm.store %{{.*}}, %{{.*}} : f64, !llvm.ptr
// CHECK: llvm.call_intrinsic "llvm.nvvm.membar.gl"()
// CHECK: arith.constant 70000 : index
// CHECK: %[[BEFORE:.*]] = llvm.atomicrmw add %{{.*}}, %{{.*}} monotonic : !llvm.ptr, i32
// CHECK: llvm.call_intrinsic "llvm.nvvm.membar.gl"()
// CHECK: %[[LAST:.*]] = arith.cmpi eq, %[[BEFORE]], %c3_i32 : i32
// CHECK: memref.store %{{.*}}, %[[FLAG]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[FLAG]]
// CHECK: scf.if
// CHECK: llvm.load volatile %{{.*}} {alignment = 8 : i64} : !llvm.ptr -> f64
// CHECK: arith.truncf %{{.*}} : f64 to f32
// CHECK: arith.constant 69632 : index
// CHECK: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr
// CHECK: arith.constant 70000 : index
// CHECK: llvm.store %{{.*}}, %{{.*}} : i32, !llvm.ptr
