// RUN: dt-opt %s -convert-dt-fused-to-gpu | FileCheck %s

// A widening (a dt.fused yielding a dt.convert from bf16 or f16 to f32) whose every
// use, through reshapes, is a product's operand with a widened partner of the same
// type stores the 16-bit values instead of their f32 widening: the GPU plan hands
// those products to cuBLAS as bf16. %xw and %ww feed only the product: narrowed.
// %vw also feeds a tanh, which needs the f32 values: it stays f32, and so must
// %uw, its partner in the second product.

module attributes {dt.arena_bytes = 8192 : i64} {
  dt.global input @x : tensor<4x8xbf16> {offset = 0 : i64}
  dt.global param @w : tensor<8x8xf32> {init = {kind = "constant", value = 0.0 : f64}, offset = 64 : i64}
  func.func @grad_step() {
    %x = dt.load @x {dt.offsets = [0]} : tensor<4x8xbf16>
    %w = dt.load @w {dt.offsets = [64]} : tensor<8x8xf32>
    %xw = dt.fused(%x) {dt.offsets = [512]} : (tensor<4x8xbf16>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xbf16>):
      %c = dt.convert %a : tensor<4x8xbf16> to tensor<4x8xf32>
      dt.yield %c : tensor<4x8xf32>
    }
    %ww = dt.fused(%w) {dt.offsets = [1024]} : (tensor<8x8xf32>) -> tensor<8x8xf32> {
    ^bb0(%a: tensor<8x8xf32>):
      %n = dt.convert %a : tensor<8x8xf32> to tensor<8x8xbf16>
      %c = dt.convert %n : tensor<8x8xbf16> to tensor<8x8xf32>
      dt.yield %c : tensor<8x8xf32>
    }
    %xr = dt.reshape %xw {dt.offsets = [512]} : tensor<4x8xf32> -> tensor<4x8xf32>
    %y = dt.matmul %xr, %ww {dt.offsets = [2048]} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %uw = dt.fused(%x) {dt.offsets = [3072]} : (tensor<4x8xbf16>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xbf16>):
      %c = dt.convert %a : tensor<4x8xbf16> to tensor<4x8xf32>
      dt.yield %c : tensor<4x8xf32>
    }
    %vw = dt.fused(%w) {dt.offsets = [4096]} : (tensor<8x8xf32>) -> tensor<8x8xf32> {
    ^bb0(%a: tensor<8x8xf32>):
      %n = dt.convert %a : tensor<8x8xf32> to tensor<8x8xbf16>
      %c = dt.convert %n : tensor<8x8xbf16> to tensor<8x8xf32>
      dt.yield %c : tensor<8x8xf32>
    }
    %z = dt.matmul %uw, %vw {dt.offsets = [5120]} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %t = dt.fused(%vw) {dt.offsets = [6144]} : (tensor<8x8xf32>) -> tensor<8x8xf32> {
    ^bb0(%a: tensor<8x8xf32>):
      %h = dt.tanh %a : tensor<8x8xf32>
      dt.yield %h : tensor<8x8xf32>
    }
    return
  }
}

// Rows of 8: each thread takes a row (or half of one) as one group
// (convert-dt-fused-to-gpu-vector.mlir), and a narrowed widening stores the group's
// 16-bit values with one vector store (the widening is built, unused, and LLVM drops it).
// CHECK-LABEL: gpu.func @grad_step_k0
// CHECK: %[[XW:.*]] = llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr -> vector<4xi32>
// CHECK: llvm.bitcast %[[XW]] : vector<4xi32> to vector<8xbf16>
// CHECK: %[[YW:.*]] = llvm.bitcast %{{.*}} : vector<8xbf16> to vector<4xi32>
// CHECK-NEXT: llvm.store %[[YW]], %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr
// CHECK-LABEL: gpu.func @grad_step_k1
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr -> vector<4xf32>
// CHECK: %[[N:.*]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK: llvm.insertelement %[[N]]
// CHECK: llvm.bitcast %{{.*}} : vector<4xbf16> to vector<2xi32>
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 8 : i64} : vector<2xi32>, !llvm.ptr
// CHECK-LABEL: gpu.func @grad_step_k2
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 32 : i64} : vector<8xf32>, !llvm.ptr
// CHECK-LABEL: gpu.func @grad_step_k3
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr
