// RUN: dt-opt %s -dt-plan-memory | FileCheck --check-prefix=CPU %s
// RUN: dt-opt %s -dt-plan-memory=gpu-zero-copies | FileCheck --check-prefix=GPU %s

// A weight's bf16 copy, kept for two products that read it through widenings
// (the forward's x @ t^T and the backward's dl @ t, as a tied embedding table
// is), has 100 rows: not a multiple of 8. A GPU plan pads those products to
// 104 (dt/Target's CudaPadding.h), reading 4 rows past the copy and zeroing
// them first, so with gpu-zero-copies the copy's buffer gets room for 104 rows
// (dt.rows): 1664 bytes where 1600 would do. A matrix of fewer than 64 rows
// gets none (the room would be more than an eighth of it), nor does the CPU
// program, which reads no row past the end.
// CPU-NOT: dt.rows
// GPU-LABEL: func.func @step
// GPU: dt.fused(%{{.*}}) {dt.offsets = [[[#T:]]], dt.rows = 104 : i64} : (tensor<100x8xf32>) -> tensor<100x8xbf16>
// GPU: dt.fused(%{{.*}}) {dt.offsets = [[[#T+1664]]]} : (tensor<60x8xf32>) -> tensor<60x8xbf16>
// GPU-NOT: dt.rows
module {
  dt.global param @t : tensor<100x8xf32> {init = {kind = "constant", value = 1.0 : f64}}
  dt.global param @s : tensor<60x8xf32> {init = {kind = "constant", value = 1.0 : f64}}
  dt.global param @x : tensor<16x8xf32> {init = {kind = "constant", value = 1.0 : f64}}
  dt.global param @dl : tensor<16x100xf32> {init = {kind = "constant", value = 1.0 : f64}}
  dt.global output @y : tensor<16x100xf32>
  dt.global output @g : tensor<16x8xf32>
  dt.global output @z : tensor<16x60xf32>

  func.func @step() {
    %t = dt.load @t : tensor<100x8xf32>
    %s = dt.load @s : tensor<60x8xf32>
    %x = dt.load @x : tensor<16x8xf32>
    %dl = dt.load @dl : tensor<16x100xf32>
    %t16 = dt.fused(%t) : (tensor<100x8xf32>) -> tensor<100x8xbf16> {
    ^bb0(%v: tensor<100x8xf32>):
      %c = dt.convert %v : tensor<100x8xf32> to tensor<100x8xbf16>
      dt.yield %c : tensor<100x8xbf16>
    }
    %s16 = dt.fused(%s) : (tensor<60x8xf32>) -> tensor<60x8xbf16> {
    ^bb0(%v: tensor<60x8xf32>):
      %c = dt.convert %v : tensor<60x8xf32> to tensor<60x8xbf16>
      dt.yield %c : tensor<60x8xbf16>
    }
    %x16 = dt.fused(%x) : (tensor<16x8xf32>) -> tensor<16x8xbf16> {
    ^bb0(%v: tensor<16x8xf32>):
      %c = dt.convert %v : tensor<16x8xf32> to tensor<16x8xbf16>
      dt.yield %c : tensor<16x8xbf16>
    }
    %dl16 = dt.fused(%dl) : (tensor<16x100xf32>) -> tensor<16x100xbf16> {
    ^bb0(%v: tensor<16x100xf32>):
      %c = dt.convert %v : tensor<16x100xf32> to tensor<16x100xbf16>
      dt.yield %c : tensor<16x100xbf16>
    }
    %xa = dt.fused(%x16) : (tensor<16x8xbf16>) -> tensor<16x8xf32> {
    ^bb0(%v: tensor<16x8xbf16>):
      %c = dt.convert %v : tensor<16x8xbf16> to tensor<16x8xf32>
      dt.yield %c : tensor<16x8xf32>
    }
    %ta = dt.fused(%t16) : (tensor<100x8xbf16>) -> tensor<100x8xf32> {
    ^bb0(%v: tensor<100x8xbf16>):
      %c = dt.convert %v : tensor<100x8xbf16> to tensor<100x8xf32>
      dt.yield %c : tensor<100x8xf32>
    }
    %y = dt.matmul %xa, %ta {transpose_rhs} : tensor<16x8xf32>, tensor<100x8xf32> -> tensor<16x100xf32>
    %dla = dt.fused(%dl16) : (tensor<16x100xbf16>) -> tensor<16x100xf32> {
    ^bb0(%v: tensor<16x100xbf16>):
      %c = dt.convert %v : tensor<16x100xbf16> to tensor<16x100xf32>
      dt.yield %c : tensor<16x100xf32>
    }
    %tb = dt.fused(%t16) : (tensor<100x8xbf16>) -> tensor<100x8xf32> {
    ^bb0(%v: tensor<100x8xbf16>):
      %c = dt.convert %v : tensor<100x8xbf16> to tensor<100x8xf32>
      dt.yield %c : tensor<100x8xf32>
    }
    %g = dt.matmul %dla, %tb : tensor<16x100xf32>, tensor<100x8xf32> -> tensor<16x8xf32>
    %xb = dt.fused(%x16) : (tensor<16x8xbf16>) -> tensor<16x8xf32> {
    ^bb0(%v: tensor<16x8xbf16>):
      %c = dt.convert %v : tensor<16x8xbf16> to tensor<16x8xf32>
      dt.yield %c : tensor<16x8xf32>
    }
    %sa = dt.fused(%s16) : (tensor<60x8xbf16>) -> tensor<60x8xf32> {
    ^bb0(%v: tensor<60x8xbf16>):
      %c = dt.convert %v : tensor<60x8xbf16> to tensor<60x8xf32>
      dt.yield %c : tensor<60x8xf32>
    }
    %z = dt.matmul %xb, %sa {transpose_rhs} : tensor<16x8xf32>, tensor<60x8xf32> -> tensor<16x60xf32>
    dt.store %y, @y : tensor<16x100xf32>
    dt.store %g, @g : tensor<16x8xf32>
    dt.store %z, @z : tensor<16x60xf32>
    return
  }
}
