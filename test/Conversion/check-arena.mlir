// RUN: dt-opt %s -convert-dt-to-kernels -dt-verify-arena -dt-check-arena | FileCheck %s
// RUN: dt-opt %s -convert-dt-to-kernels -dt-verify-arena -dt-check-arena -dt-lower-to-llvm | FileCheck %s --check-prefix=LLVM

// dtc --checked: each view of the arena is checked once per entry call through a
// helper that takes the view itself, and each kernel call's pointers are checked
// with their footprints right before the call, inside the guards.
module attributes {dt.arena_bytes = 4563402816 : i64} {
  dt.global param @table : tensor<256x1024xf32> {init = {kind = "constant", value = 1.0 : f64}, offset = 268435456 : i64}
  dt.global input @ids : tensor<16xi32> {offset = 2147483648 : i64}
  dt.global param @scale : tensor<1024xf32> {init = {kind = "constant", value = 1.0 : f64}, offset = 3221225472 : i64}
  dt.global output @rows : tensor<16x1024xf32> {offset = 4294967296 : i64}

  // CHECK-DAG: func.func private @dtrt_check_span(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64)
  // CHECK-DAG: func.func private @dtrt_check_view(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64)
  // CHECK-DAG: func.func private @dtrt_guard_begin()
  // CHECK-DAG: func.func private @dtrt_guard_end()
  // CHECK-DAG: llvm.mlir.global private constant @[[SITE:__dt_site_[0-9]+]]("dtk_embedding_f32 at {{.*}}check-arena.mlir:{{[0-9]+}}:{{[0-9]+}}\00")

  // CHECK-LABEL: func.func @dt_lookup(
  // CHECK: %[[BASE:.*]] = llvm.inttoptr
  // The output view: 16 x 1024 f32 at 4294967296.
  // CHECK: %[[OUT:.*]] = memref.view %{{.*}} {dt.buffer = array<i64: 4294967296, 65536>} : memref<4563402816xi8> to memref<16x1024xf32>
  // CHECK: call @[[VIEWCHECK:__dt_check_view_[0-9]+]](%{{.*}}, %[[BASE]], %[[OUT]], %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, memref<16x1024xf32>, i64, i64, i64) -> ()
  // The embedding: the table (1 MiB), the ids (64 bytes) and the rows (64 KiB).
  // CHECK: %[[T:.*]] = llvm.getelementptr %[[BASE]]{{.*}}dt.buffer = array<i64: 268435456, 1048576>
  // CHECK: %[[I:.*]] = llvm.getelementptr %[[BASE]]{{.*}}dt.buffer = array<i64: 2147483648, 64>
  // CHECK: %[[R:.*]] = llvm.getelementptr %[[BASE]]{{.*}}dt.buffer = array<i64: 4295032832, 65536>
  // CHECK: %[[S:.*]] = llvm.mlir.addressof @[[SITE]]
  // CHECK: %[[TB:.*]] = arith.constant 1048576 : i64
  // CHECK: %[[TO:.*]] = arith.constant 268435456 : i64
  // CHECK: call @dtrt_check_span(%[[S]], %[[BASE]], %[[T]], %[[TB]], %[[TO]], %{{.*}})
  // CHECK: call @dtrt_check_span(%[[S]], %[[BASE]], %[[I]],
  // CHECK: call @dtrt_check_span(%[[S]], %[[BASE]], %[[R]],
  // CHECK-NEXT: call @dtrt_guard_begin() : () -> ()
  // CHECK-NEXT: call @dtk_embedding_f32(%[[T]], %[[I]], %[[R]],
  // CHECK-NEXT: call @dtrt_guard_end() : () -> ()

  // The helper reads the address of the view it is given.
  // CHECK: func.func private @[[VIEWCHECK]](%[[A0:.*]]: !llvm.ptr, %[[A1:.*]]: !llvm.ptr, %[[V:.*]]: memref<16x1024xf32>,
  // CHECK: memref.extract_aligned_pointer_as_index %[[V]]
  // CHECK: call @dtrt_check_view(%[[A0]], %[[A1]],

  // After the lowering the helper receives the view's own address (the arena plus
  // its offset), not the arena's.
  // LLVM-LABEL: llvm.func @dt_lookup(
  // LLVM: llvm.call @__dt_check_view_{{[0-9]+}}
  // LLVM: llvm.call @dtrt_guard_begin()
  // LLVM-NEXT: llvm.call @dtk_embedding_f32
  // LLVM-NEXT: llvm.call @dtrt_guard_end()
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
