// RUN: dt-opt %s -convert-dt-to-kernels -dt-verify-arena | FileCheck %s
// RUN: dt-opt %s -convert-dt-to-kernels -dt-verify-arena -dt-lower-to-llvm | FileCheck %s --check-prefix=LLVM

// A planned entry point with buffers at and above 2^28, 2^31 and 2^32 bytes,
// lowered: every view, pointer, kernel footprint and loop index lies inside
// its buffer, so the verifier passes it unchanged; and once more after the
// conversion to the LLVM dialect, where the offsets are folded into GEPs.
module attributes {dt.arena_bytes = 4563402816 : i64} {
  dt.global param @table : tensor<256x1024xf32> {init = {kind = "constant", value = 1.0 : f64}, offset = 268435456 : i64}
  dt.global input @ids : tensor<16xi32> {offset = 2147483648 : i64}
  dt.global param @scale : tensor<1024xf32> {init = {kind = "constant", value = 1.0 : f64}, offset = 3221225472 : i64}
  dt.global output @rows : tensor<16x1024xf32> {offset = 4294967296 : i64}
  // CHECK-LABEL: func.func @dt_lookup(
  // CHECK-SAME: dt.plan = array<i64: 268435456, 1048576, 2147483648, 64, 3221225472, 4096, 4294967296, 65536, 4295032832, 65536>
  // CHECK: call @dtk_embedding_f32
  // CHECK: scf.for
  // LLVM-LABEL: llvm.func @dt_lookup(
  // LLVM-DAG: %[[O28:.*]] = llvm.mlir.constant(268435456 : i64) : i64
  // LLVM-DAG: %[[O31:.*]] = llvm.mlir.constant(2147483648 : i64) : i64
  // LLVM-DAG: %[[E:.*]] = llvm.mlir.constant(4295032832 : i64) : i64
  // LLVM-DAG: %[[V32:.*]] = llvm.mlir.constant(4294967296 : index) : i64
  // LLVM-DAG: llvm.getelementptr %{{.*}}[%[[V32]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
  // LLVM-DAG: %[[T:.*]] = llvm.getelementptr %{{.*}}[%[[O28]]] {dt.buffer = array<i64: 268435456, 1048576>}
  // LLVM-DAG: %[[I:.*]] = llvm.getelementptr %{{.*}}[%[[O31]]] {dt.buffer = array<i64: 2147483648, 64>}
  // LLVM-DAG: %[[R:.*]] = llvm.getelementptr %{{.*}}[%[[E]]] {dt.buffer = array<i64: 4295032832, 65536>}
  // LLVM: llvm.call @dtk_embedding_f32(%[[T]], %[[I]], %[[R]],
  func.func @lookup() {
    %t = dt.load @table {dt.offsets = [268435456]} : tensor<256x1024xf32>
    %i = dt.load @ids {dt.offsets = [2147483648]} : tensor<16xi32>
    %s = dt.load @scale {dt.offsets = [3221225472]} : tensor<1024xf32>
    %e = dt.embedding %t, %i {dt.offsets = [4295032832]} : tensor<256x1024xf32>, tensor<16xi32> -> tensor<16x1024xf32>
    %r = dt.fused(%e, %s) {dt.offsets = [4294967296]} : (tensor<16x1024xf32>, tensor<1024xf32>) -> tensor<16x1024xf32> {
    ^bb0(%p: tensor<16x1024xf32>, %q: tensor<16x1024xf32>):
      %m = dt.mul %p, %q : tensor<16x1024xf32>
      dt.yield %m : tensor<16x1024xf32>
    }
    dt.store %r, @rows : tensor<16x1024xf32>
    return
  }
}
