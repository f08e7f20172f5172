// RUN: dt-opt %s -convert-dt-fused-to-gpu | FileCheck %s
// RUN: dt-opt %s -convert-dt-fused-to-gpu=unroll=1 | FileCheck --check-prefix=ONE %s

// A kernel that maps elements takes them in groups of consecutive elements along the
// last dimension, a group a thread at a time: one vector load per operand (one
// scalar for an operand broadcast along the last dimension), each element's body on
// its lanes, one vector store per result. The width is the most lanes that keep every
// vector within 16 bytes of the narrowest element type and 32 of the widest (4 f32;
// 8 for bf16, with its f32 side two 16-byte halves) and that divide every last
// dimension and piece start the groups walk; 16-bit vectors move as 32-bit words,
// which NVPTX loads with one instruction. A transpose takes groups only if it keeps
// the last dimension. Rows of 7 take one element at a time (the unrolled loop of
// convert-dt-fused-to-gpu-unrolled.mlir), as every kernel does with unroll=1.

module attributes {dt.arena_bytes = 32768 : i64} {
  dt.global input @x : tensor<64x32xf32> {offset = 0 : i64}
  dt.global param @b : tensor<32xf32> {init = {kind = "constant", value = 0.0 : f64}, offset = 8192 : i64}
  dt.global param @s : tensor<64x1xf32> {init = {kind = "constant", value = 0.0 : f64}, offset = 8448 : i64}
  dt.global input @h : tensor<2x8x4x16xbf16> {offset = 8704 : i64}
  dt.global input @r : tensor<4x7xf32> {offset = 16896 : i64}
  func.func @grad_step() {
    %x = dt.load @x {dt.offsets = [0]} : tensor<64x32xf32>
    %b = dt.load @b {dt.offsets = [8192]} : tensor<32xf32>
    %s = dt.load @s {dt.offsets = [8448]} : tensor<64x1xf32>
    // k0: x a vector at the group's own position, the bias a vector at its column,
    // the row's scale one scalar.
    %y = dt.fused(%x, %b, %s) {dt.offsets = [17152]} : (tensor<64x32xf32>, tensor<32xf32>, tensor<64x1xf32>) -> tensor<64x32xf32> {
    ^bb0(%a: tensor<64x32xf32>, %c: tensor<64x32xf32>, %d: tensor<64x32xf32>):
      %t = dt.add %a, %c : tensor<64x32xf32>
      %u = dt.mul %t, %d : tensor<64x32xf32>
      dt.yield %u : tensor<64x32xf32>
    }
    %h = dt.load @h {dt.offsets = [8704]} : tensor<2x8x4x16xbf16>
    // k1: attention's head split, bf16 rows of 16 moved 8 at a time.
    %ht = dt.transpose %h [0, 2, 1, 3] {dt.offsets = [25344]} : tensor<2x8x4x16xbf16> -> tensor<2x4x8x16xbf16>
    // k2: a widening, 8 bf16 in (16 bytes), 8 f32 out (32).
    %hw = dt.fused(%ht) {dt.offsets = [0]} : (tensor<2x4x8x16xbf16>) -> tensor<2x4x8x16xf32> {
    ^bb0(%a: tensor<2x4x8x16xbf16>):
      %c = dt.convert %a : tensor<2x4x8x16xbf16> to tensor<2x4x8x16xf32>
      dt.yield %c : tensor<2x4x8x16xf32>
    }
    %y2 = dt.reshape %y {dt.offsets = [17152]} : tensor<64x32xf32> -> tensor<64x2x16xf32>
    // k3: pieces 16 wide along the last axis, at 0 and 16.
    %p:2 = dt.split %y2 axis 1 {dt.offsets = [8704, 12800]} : tensor<64x2x16xf32> -> tensor<64x1x16xf32>, tensor<64x1x16xf32>
    // k4: a slice starting at column 2: pairs.
    %q = dt.slice %x axis 1 start 2 {dt.offsets = [25344]} : tensor<64x32xf32> -> tensor<64x8xf32>
    %r = dt.load @r {dt.offsets = [16896]} : tensor<4x7xf32>
    // k5: rows of 7.
    %e = dt.fused(%r) {dt.offsets = [17024]} : (tensor<4x7xf32>) -> tensor<4x7xf32> {
    ^bb0(%a: tensor<4x7xf32>):
      %t = dt.tanh %a : tensor<4x7xf32>
      dt.yield %t : tensor<4x7xf32>
    }
    return
  }
}

// 2048 elements in 512 groups of 4.
// CHECK-LABEL: gpu.func @grad_step_k0
// CHECK: scf.for %[[G:.*]] = %{{.*}} to %c512{{.*}} step %{{.*}} {
// CHECK: %[[FIRST:.*]] = arith.muli %[[G]], %c4{{.*}} : index
// CHECK: %[[COLUMN:.*]] = arith.remui %[[FIRST]], %c32{{.*}} : index
// CHECK: %[[X:.*]] = llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr -> vector<4xf32>
// CHECK: %[[B:.*]] = llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr -> vector<4xf32>
// CHECK: %[[S:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: %[[X0:.*]] = llvm.extractelement %[[X]][%{{.*}} : i32] : vector<4xf32>
// CHECK: %[[B0:.*]] = llvm.extractelement %[[B]][%{{.*}} : i32] : vector<4xf32>
// CHECK: %[[T0:.*]] = arith.addf %[[X0]], %[[B0]] : f32
// CHECK: %[[U0:.*]] = arith.mulf %[[T0]], %[[S]] : f32
// CHECK-COUNT-3: arith.mulf %{{.*}}, %[[S]] : f32
// CHECK-COUNT-4: llvm.insertelement %{{.*}}[%{{.*}} : i32] : vector<4xf32>
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr
// CHECK-NEXT: }
// CHECK-NEXT: gpu.return

// CHECK-LABEL: gpu.func @grad_step_k1
// CHECK: scf.for %{{.*}} = %{{.*}} to %c128{{.*}} step
// CHECK: %[[H:.*]] = llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr -> vector<4xi32>
// CHECK: %[[HB:.*]] = llvm.bitcast %[[H]] : vector<4xi32> to vector<8xbf16>
// CHECK: %[[HW:.*]] = llvm.bitcast %[[HB]] : vector<8xbf16> to vector<4xi32>
// CHECK: llvm.store %[[HW]], %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr

// CHECK-LABEL: gpu.func @grad_step_k2
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr -> vector<4xi32>
// CHECK-COUNT-8: arith.extf
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 32 : i64} : vector<8xf32>, !llvm.ptr

// Each piece its own loop: 256 groups of 4.
// CHECK-LABEL: gpu.func @grad_step_k3
// CHECK: scf.for %{{.*}} = %{{.*}} to %c256{{.*}} step
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr -> vector<4xf32>
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr
// CHECK: scf.for %{{.*}} = %{{.*}} to %c256{{.*}} step
// CHECK: arith.addi %{{.*}}, %c1{{.*}} : index
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr -> vector<4xf32>
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr

// CHECK-LABEL: gpu.func @grad_step_k4
// CHECK: scf.for %{{.*}} = %{{.*}} to %c256{{.*}} step
// CHECK: arith.addi %{{.*}}, %c2{{.*}} : index
// CHECK: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr -> vector<2xf32>
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr

// CHECK-LABEL: gpu.func @grad_step_k5
// CHECK-NOT: vector
// CHECK: gpu.return

// ONE-LABEL: gpu.func @grad_step_k0
// ONE-NOT: vector
// ONE: gpu.return
// ONE-LABEL: gpu.func @grad_step_k1
// ONE-NOT: vector
// ONE: gpu.return
// ONE-LABEL: gpu.func @grad_step_k2
// ONE-NOT: vector
// ONE: gpu.return
// ONE-LABEL: gpu.func @grad_step_k3
// ONE-NOT: vector
// ONE: gpu.return
// ONE-LABEL: gpu.func @grad_step_k4
// ONE-NOT: vector
// ONE: gpu.return
