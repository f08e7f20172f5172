// RUN: dt-opt %s -convert-dt-fused-to-gpu | FileCheck %s
// RUN: dt-opt %s -convert-dt-fused-to-gpu=unroll=1 | FileCheck --check-prefix=ONE %s

// A kernel of 1024 elements or more that only maps elements (an elementwise region, a
// transpose, a split or concat) and takes no vector groups (here: rows of 33, and a
// transpose that moves the last dimension; convert-dt-fused-to-gpu-vector.mlir has
// the groups) takes four elements a thread at a time, a grid stride apart: their loads first, then their stores, so that each thread keeps four loads in
// flight. The iterations run while the fourth element is in range (i < n - 3 stride)
// and hand where they stopped to the plain grid-stride loop, which takes what is left.
// An input of the iteration's own shape loads at the linear position itself; a
// broadcast one (the bias) still needs the column index. A sum of 1024 terms or more
// a block (each thread's terms a block apart) loads four terms before it adds them,
// in the order one at a time would: the same bits. With unroll=1 (dtc --gpu-unroll=1,
// for measuring what this is worth) every loop takes one element at a time.

module attributes {dt.arena_bytes = 73728 : i64} {
  dt.global input @x : tensor<64x33xf32> {offset = 0 : i64}
  dt.global param @b : tensor<33xf32> {init = {kind = "constant", value = 0.0 : f64}, offset = 8448 : i64}
  dt.global param @g : tensor<2x2048xf32> {init = {kind = "constant", value = 0.0 : f64}, offset = 49152 : i64}
  func.func @grad_step() {
    %x = dt.load @x {dt.offsets = [0]} : tensor<64x33xf32>
    %b = dt.load @b {dt.offsets = [8448]} : tensor<33xf32>
    %y = dt.fused(%x, %b) {dt.offsets = [16384]} : (tensor<64x33xf32>, tensor<33xf32>) -> tensor<64x33xf32> {
    ^bb0(%a: tensor<64x33xf32>, %c: tensor<64x33xf32>):
      %s = dt.add %a, %c : tensor<64x33xf32>
      dt.yield %s : tensor<64x33xf32>
    }
    %t = dt.transpose %y [1, 0] {dt.offsets = [32768]} : tensor<64x33xf32> -> tensor<33x64xf32>
    %g = dt.load @g {dt.offsets = [49152]} : tensor<2x2048xf32>
    %n = dt.fused(%g) {dt.offsets = [65536], reduce_axes = array<i64: 1>} : (tensor<2x2048xf32>) -> tensor<2xf32> {
    ^bb0(%a: tensor<2x2048xf32>):
      %sq = dt.mul %a, %a : tensor<2x2048xf32>
      dt.yield %sq : tensor<2x2048xf32>
    }
    return
  }
}

// CHECK-LABEL: gpu.func @grad_step_k0
// CHECK-DAG: %[[BDIM:.*]] = gpu.block_dim x
// CHECK-DAG: %[[GDIM:.*]] = gpu.grid_dim x
// CHECK: %[[FIRST:.*]] = arith.addi
// CHECK: %[[STRIDE:.*]] = arith.muli %[[GDIM]], %[[BDIM]] : index
// CHECK: %[[SPAN:.*]] = arith.muli %[[STRIDE]], %c4{{.*}} : index
// CHECK: %[[REACH:.*]] = arith.muli %[[STRIDE]], %c3{{.*}} : index
// CHECK: %[[LAST:.*]] = arith.subi %c2112{{.*}}, %[[REACH]] : index
// CHECK: %[[BOUND:.*]] = arith.maxsi %[[LAST]], %c0{{.*}} : index
// CHECK: %[[REST:.*]] = scf.for %[[I:.*]] = %[[FIRST]] to %[[BOUND]] step %[[SPAN]] iter_args(%{{.*}} = %[[FIRST]]) -> (index) {
// The first element: x at i itself, the bias at i mod 33.
// CHECK: arith.remui %[[I]], %c33{{.*}} : index
// CHECK: %[[X0:.*]] = llvm.load
// CHECK: %[[B0:.*]] = llvm.load
// CHECK: %[[S0:.*]] = arith.addf %[[X0]], %[[B0]] : f32
// CHECK: %[[I1:.*]] = arith.addi %[[I]], %{{.*}} : index
// CHECK: %[[S1:.*]] = arith.addf
// CHECK: %[[I2:.*]] = arith.addi %[[I]], %{{.*}} : index
// CHECK: %[[S2:.*]] = arith.addf
// CHECK: %[[I3:.*]] = arith.addi %[[I]], %{{.*}} : index
// CHECK: %[[S3:.*]] = arith.addf
// CHECK-NOT: llvm.load
// CHECK: llvm.store %[[S0]]
// CHECK: llvm.store %[[S1]]
// CHECK: llvm.store %[[S2]]
// CHECK: llvm.store %[[S3]]
// CHECK: %[[NEXT:.*]] = arith.addi %[[I]], %[[SPAN]] : index
// CHECK: scf.yield %[[NEXT]] : index
// CHECK: scf.for %[[J:.*]] = %[[REST]] to %c2112{{.*}} step %[[STRIDE]] {
// CHECK: llvm.load
// CHECK: llvm.load
// CHECK: arith.addf
// CHECK: llvm.store
// CHECK: gpu.return

// The transpose: four loads of y, then four stores.
// CHECK-LABEL: gpu.func @grad_step_k1
// CHECK: scf.for {{.*}} iter_args
// CHECK-COUNT-4: llvm.load
// CHECK-NOT: llvm.load
// CHECK-COUNT-4: llvm.store
// CHECK: scf.yield
// CHECK: scf.for
// CHECK: gpu.return

// The sums of squares: 2 outputs of 2048 terms, a block each.
// CHECK-LABEL: gpu.func @grad_step_k2
// CHECK: %[[SUMS:.*]]:2 = scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step %c1024{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}, %{{.*}} = %{{.*}}) -> (f64, index) {
// CHECK-COUNT-4: llvm.load
// CHECK-NOT: llvm.load
// CHECK: %[[E0:.*]] = arith.extf
// CHECK: %[[A0:.*]] = arith.addf %[[ACC]], %[[E0]] : f64
// CHECK: %[[E1:.*]] = arith.extf
// CHECK: %[[A1:.*]] = arith.addf %[[A0]], %[[E1]] : f64
// CHECK: %[[E2:.*]] = arith.extf
// CHECK: %[[A2:.*]] = arith.addf %[[A1]], %[[E2]] : f64
// CHECK: %[[E3:.*]] = arith.extf
// CHECK: %[[A3:.*]] = arith.addf %[[A2]], %[[E3]] : f64
// CHECK: scf.yield %[[A3]], %{{.*}} : f64, index
// CHECK: scf.for %{{.*}} = %[[SUMS]]#1 to %{{.*}} step %c256{{.*}} iter_args(%{{.*}} = %[[SUMS]]#0) -> (f64) {
// CHECK: gpu.barrier

// ONE-LABEL: gpu.func @grad_step_k0
// ONE-NOT: iter_args
// ONE: scf.for
// ONE-NOT: iter_args
// ONE: gpu.return
// ONE-LABEL: gpu.func @grad_step_k1
// ONE-NOT: iter_args
// ONE: gpu.return
// ONE-LABEL: gpu.func @grad_step_k2
// ONE: scf.for {{.*}} step %c256{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (f64)
