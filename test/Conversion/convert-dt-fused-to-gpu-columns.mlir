// RUN: dt-opt %s -convert-dt-fused-to-gpu | FileCheck %s

// A sum over leading axes of 32 outputs or more (a bias's gradient) sums
// columns: a block takes 32 neighbouring outputs, lane l output 32 tile + l,
// and warp w every eighth row from w, so that each load of a warp reads one
// row's consecutive elements; a tree over the warps (128, 64, 32) leaves
// lane l's total in workgroup element l, which the first warp's lanes store.
// With rows enough (here 4096 over 2 tiles: 16 chunks of 256), each (tile,
// chunk) is a block, and each lane counts its output's chunk in the scratch
// past the arena: the lane that counts last adds the partials in chunk order.
// A sum over trailing axes keeps a block per output.

module attributes {dt.arena_bytes = 2000000 : i64} {
  dt.global param @g : tensor<4096x64xf32> {init = {kind = "constant", value = 0.0 : f64}, offset = 0 : i64}
  dt.global param @h : tensor<64x40xf32> {init = {kind = "constant", value = 0.0 : f64}, offset = 1048576 : i64}
  func.func @grad_step() {
    %g = dt.load @g {dt.offsets = [0]} : tensor<4096x64xf32>
    %bias = dt.fused(%g) {dt.offsets = [1100000], reduce_axes = array<i64: 0>} : (tensor<4096x64xf32>) -> tensor<64xf32> {
    ^bb0(%a: tensor<4096x64xf32>):
      dt.yield %a : tensor<4096x64xf32>
    }
    %h = dt.load @h {dt.offsets = [1048576]} : tensor<64x40xf32>
    %s = dt.reduce_sum %h [0] {dt.offsets = [1100512]} : tensor<64x40xf32> -> tensor<40xf32>
    %rows = dt.reduce_sum %h [1] {dt.offsets = [1100768]} : tensor<64x40xf32> -> tensor<64xf32>
    %two:2 = dt.fused(%g) {dt.offsets = [1101024, 1101536], reduce_axes = array<i64: 0>} : (tensor<4096x64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
    ^bb0(%a: tensor<4096x64xf32>):
      %sq = dt.mul %a, %a : tensor<4096x64xf32>
      dt.yield %a, %sq : tensor<4096x64xf32>, tensor<4096x64xf32>
    }
    return
  }
}

// The bias: 2 tiles of 32 outputs x 16 chunks of 256 rows; lane and warp.
// CHECK-LABEL: gpu.func @grad_step_k0
// CHECK: scf.for %[[W:.*]] = %block_id_x to %c32{{.*}} step %grid_dim_x
// CHECK: %[[CHUNK:.*]] = arith.remui %[[W]], %c16
// CHECK: %[[TILE:.*]] = arith.divui %[[W]], %c16
// CHECK: %[[FIRST:.*]] = arith.muli %[[CHUNK]], %c256
// CHECK: %[[LANE:.*]] = arith.remui %thread_id_x, %c32
// CHECK: %[[WARP:.*]] = arith.divui %thread_id_x, %c32
// CHECK: %[[BASE:.*]] = arith.muli %[[TILE]], %c32
// CHECK: %[[O:.*]] = arith.addi %[[BASE]], %[[LANE]]
// CHECK: %[[VALID:.*]] = arith.cmpi ult, %[[O]], %c64
// CHECK: arith.minui %[[O]], %c63
// CHECK: %[[FROM:.*]] = arith.addi %[[FIRST]], %[[WARP]]
// Eight rows a thread at a time (64 apart: 8 warps x 8), then every eighth row.
// CHECK: scf.for %{{.*}} = %[[FROM]] to %{{.*}} step %c64
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c8
// The tree over the warps stops at 32 totals: 128, 64, 32.
// CHECK: arith.cmpi ult, %thread_id_x{{[_0-9]*}}, %c128
// CHECK: arith.cmpi ult, %thread_id_x{{[_0-9]*}}, %c64
// CHECK: arith.cmpi ult, %thread_id_x{{[_0-9]*}}, %c32
// CHECK-NOT: arith.cmpi ult, %thread_id_x{{[_0-9]*}}, %c16
// CHECK: %[[FIRSTWARP:.*]] = arith.cmpi ult, %thread_id_x, %c32
// CHECK: %[[MINE:.*]] = arith.andi %[[VALID]], %[[FIRSTWARP]]
// CHECK: scf.if %[[MINE]]
// The lane's partial, then its count in the output's counter past the arena.
// CHECK: llvm.store %{{.*}} : f64, !llvm.ptr
// CHECK: llvm.call_intrinsic "llvm.nvvm.membar.gl"
// CHECK: %c2000000 = arith.constant 2000000 : index
// CHECK: llvm.atomicrmw add
// CHECK: llvm.call_intrinsic "llvm.nvvm.membar.gl"
// CHECK: %[[LAST:.*]] = arith.cmpi eq, %{{.*}}, %c15_i32
// CHECK: scf.if %[[LAST]]
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c16{{.*}} step %c1
// CHECK: llvm.load volatile
// CHECK: arith.addf
// CHECK: arith.truncf %{{.*}} : f64 to f32
// CHECK: llvm.store %{{.*}} : f32, !llvm.ptr
// CHECK: llvm.store %c0_i32
// CHECK: gpu.barrier
// CHECK: gpu.return

// The column sum of 64 rows: 2 tiles, unsplit; lanes past output 39 store nothing.
// CHECK-LABEL: gpu.func @grad_step_k1
// CHECK: scf.for %{{.*}} = %block_id_x to %c2 step %grid_dim_x
// CHECK: arith.cmpi ult, %{{.*}}, %c40
// CHECK: arith.minui %{{.*}}, %c39
// CHECK: scf.for %{{.*}} step %c8
// CHECK-NOT: llvm.atomicrmw
// CHECK: gpu.return

// The row sums keep a block per output, threads 256 terms apart.
// CHECK-LABEL: gpu.func @grad_step_k2
// CHECK: scf.for %{{.*}} = %block_id_x to %c64 step %grid_dim_x
// CHECK: scf.for %{{.*}} step %c256

// Two sums of one region: partial (output, chunk, result) in 8-byte slot
// (32 tile + lane) * 16 + chunk, times 2, plus the result, past the first
// sum's span (64 counters, then 64 x 16 partials: 2000000 + 8448), after
// this one's 64 counters.
// CHECK-LABEL: gpu.func @grad_step_k3
// CHECK-SAME: workgroup(%{{.*}} : memref<256xf64, {{.*}}>, %{{.*}} : memref<256xf64, {{.*}}>)
// CHECK: scf.if
// CHECK: %[[AT:.*]] = arith.muli %{{.*}}, %c16
// CHECK: %[[SLOT:.*]] = arith.addi %[[AT]], %{{.*}}
// CHECK: arith.muli %[[SLOT]], %c2
// CHECK: arith.constant 2008704 : index
// CHECK: llvm.store %{{.*}} : f64, !llvm.ptr
// CHECK: arith.constant 2008704 : index
// CHECK: llvm.store %{{.*}} : f64, !llvm.ptr
// CHECK: arith.constant 2008448 : index
// CHECK: llvm.atomicrmw add
