// RUN: dt-opt %s -convert-dt-to-kernels -dt-verify-arena | FileCheck %s

// A ring of 2 slots of 256 bytes at 64 (a pipeline stage's stash), its slot number
// in @slot. The forward computes its stash in place, the backward reads it through a
// kernel: both address the slot the runtime wrote, clamped to the ring, so
// dt-verify-arena proves every access inside the ring.
module attributes {dt.arena_bytes = 1088 : i64} {
  dt.global pipe @slot : tensor<i64> {offset = 0 : i64}
  dt.global pipe @stash : tensor<8x8xf32> {dt.slots = 2 : i64, dt.slot_bytes = 256 : i64, dt.slot_index = @slot, offset = 64 : i64}
  dt.global input @x : tensor<8x8xf32> {offset = 576 : i64}
  dt.global output @y : tensor<8x8xf32> {offset = 832 : i64}

  // CHECK-LABEL: func.func @dt_forward(
  // The ring is one buffer of the plan, whole (beside its values' slot-0 spans).
  // CHECK-SAME: dt.plan = array<i64: 0, 8, 64, 256, 64, 512,
  // CHECK: %[[IX:.*]] = memref.view %{{.*}}[%{{.*}}][] {dt.buffer = array<i64: 0, 8>} : memref<1088xi8> to memref<i64>
  // CHECK: %[[K:.*]] = memref.load %[[IX]][] : memref<i64>
  // CHECK: %[[KI:.*]] = arith.index_cast %[[K]] : i64 to index
  // CHECK: %[[LO:.*]] = arith.maxsi %[[KI]], %{{.*}} : index
  // CHECK: %[[SLOT:.*]] = arith.minsi %[[LO]], %{{.*}} : index
  // CHECK: %[[IN:.*]] = arith.muli %[[SLOT]], %{{.*}} : index
  // CHECK: %[[SHIFT:.*]] = arith.addi %{{.*}}, %[[IN]] : index
  // CHECK: memref.view %{{.*}}[%[[SHIFT]]][] {dt.buffer = array<i64: 64, 512>} : memref<1088xi8> to memref<64xf32>
  func.func @forward() {
    %x = dt.load @x {dt.offsets = [576]} : tensor<8x8xf32>
    %e = dt.fused(%x) {dt.offsets = [64]} : (tensor<8x8xf32>) -> tensor<8x8xf32> {
    ^bb0(%a: tensor<8x8xf32>):
      %r = dt.exp %a : tensor<8x8xf32>
      dt.yield %r : tensor<8x8xf32>
    }
    dt.store %e, @stash : tensor<8x8xf32>
    return
  }

  // CHECK-LABEL: func.func @dt_backward(
  // CHECK: %[[SHIFT:.*]] = arith.addi %{{.*}}, %{{.*}} : index
  // CHECK: %[[AT:.*]] = arith.index_cast %[[SHIFT]] : index to i64
  // CHECK: %[[P:.*]] = llvm.getelementptr %{{.*}}[%[[AT]]] {dt.buffer = array<i64: 64, 512>}
  // CHECK: %[[Q:.*]] = llvm.getelementptr %{{.*}} {dt.buffer = array<i64: 64, 512>}
  // CHECK: call @dtk_matmul_f32(%[[P]], %[[Q]],
  func.func @backward() {
    %s = dt.load @stash {dt.offsets = [64]} : tensor<8x8xf32>
    %y = dt.matmul %s, %s {dt.offsets = [832]} : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
    dt.store %y, @y : tensor<8x8xf32>
    return
  }
}
