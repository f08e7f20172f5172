// RUN: dt-opt %s -dt-plan-memory | FileCheck --check-prefix=CPU %s
// RUN: dt-opt %s -dt-plan-memory=gpu-zero-copies | FileCheck --check-prefix=GPU %s

// A bf16 product of one batch writing rows of 100 elements (200 bytes, not a
// multiple of 16): with gpu-zero-copies its narrowing's buffer gets room for
// rows 104 apart (dt.pitch), which a GPU plan lays out when every launch that
// touches it takes a pitch, so that cuBLAS runs its aligned kernels (GPT-2's
// logits, 50 257 wide, get 50 264). Rows of 4 (the second product) stay
// packed: a pitch would double them. The CPU program reads the rows packed in
// either buffer.
// CPU-NOT: dt.pitch
// CPU: dt.arena_bytes = 8384
// GPU: dt.arena_bytes = 9984
module {
  dt.global param @w : tensor<8x100xf32> {init = {kind = "constant", value = 1.0 : f64}}
  dt.global param @x : tensor<4x8xf32> {init = {kind = "constant", value = 1.0 : f64}}
  dt.global output @out : tensor<f32>

  func.func @step() {
    %w = dt.load @w : tensor<8x100xf32>
    %x = dt.load @x : tensor<4x8xf32>
    %w16 = dt.fused(%w) : (tensor<8x100xf32>) -> tensor<8x100xbf16> {
    ^bb0(%v: tensor<8x100xf32>):
      %c = dt.convert %v : tensor<8x100xf32> to tensor<8x100xbf16>
      dt.yield %c : tensor<8x100xbf16>
    }
    %x16 = dt.fused(%x) : (tensor<4x8xf32>) -> tensor<4x8xbf16> {
    ^bb0(%v: tensor<4x8xf32>):
      %c = dt.convert %v : tensor<4x8xf32> to tensor<4x8xbf16>
      dt.yield %c : tensor<4x8xbf16>
    }
    %a = dt.fused(%x16) : (tensor<4x8xbf16>) -> tensor<4x8xf32> {
    ^bb0(%v: tensor<4x8xbf16>):
      %c = dt.convert %v : tensor<4x8xbf16> to tensor<4x8xf32>
      dt.yield %c : tensor<4x8xf32>
    }
    %b = dt.fused(%w16) : (tensor<8x100xbf16>) -> tensor<8x100xf32> {
    ^bb0(%v: tensor<8x100xbf16>):
      %c = dt.convert %v : tensor<8x100xbf16> to tensor<8x100xf32>
      dt.yield %c : tensor<8x100xf32>
    }
    %p = dt.matmul %a, %b : tensor<4x8xf32>, tensor<8x100xf32> -> tensor<4x100xf32>
    // 4 rows of 104 bf16: 832 bytes where 800 would do.
    // GPU: dt.fused(%{{.*}}) {dt.offsets = [{{[0-9]+}}], dt.pitch = 104 : i64} : (tensor<4x100xf32>) -> tensor<4x100xbf16>
    %n = dt.fused(%p) : (tensor<4x100xf32>) -> tensor<4x100xbf16> {
    ^bb0(%v: tensor<4x100xf32>):
      %c = dt.convert %v : tensor<4x100xf32> to tensor<4x100xbf16>
      dt.yield %c : tensor<4x100xbf16>
    }
    %s = dt.fused(%n) {reduce_axes = array<i64: 0, 1>} : (tensor<4x100xbf16>) -> tensor<f32> {
    ^bb0(%v: tensor<4x100xbf16>):
      %c = dt.convert %v : tensor<4x100xbf16> to tensor<4x100xf32>
      dt.yield %c : tensor<4x100xf32>
    }
    %p2 = dt.matmul %a, %a {transpose_rhs} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x4xf32>
    // GPU-NOT: dt.pitch
    %n2 = dt.fused(%p2) : (tensor<4x4xf32>) -> tensor<4x4xbf16> {
    ^bb0(%v: tensor<4x4xf32>):
      %c = dt.convert %v : tensor<4x4xf32> to tensor<4x4xbf16>
      dt.yield %c : tensor<4x4xbf16>
    }
    %s2 = dt.fused(%n2, %s) {reduce_axes = array<i64: 0, 1>} : (tensor<4x4xbf16>, tensor<f32>) -> tensor<f32> {
    ^bb0(%v: tensor<4x4xbf16>, %t: tensor<4x4xf32>):
      %c = dt.convert %v : tensor<4x4xbf16> to tensor<4x4xf32>
      %d = dt.add %c, %t : tensor<4x4xf32>
      dt.yield %d : tensor<4x4xf32>
    }
    dt.store %s2, @out : tensor<f32>
    return
  }
}
