// RUN: dt-opt %s -dt-plan-memory | FileCheck --check-prefix=CPU %s
// RUN: dt-opt %s -dt-plan-memory=gpu-zero-copies | FileCheck --check-prefix=GPU %s

// A bf16 product: two widenings feed it, a narrowing follows. For the CPU the
// 16-bit sources die at their widenings and the product's operands at the
// product, so their blocks are reused at once. A GPU's product reads the
// sources where they lie and writes its bf16 result into the narrowing's
// buffer (dt/Transforms/ZeroCopyInfo.h): with gpu-zero-copies the sources
// live until the product, and until the narrowing is placed.
// CPU: dt.arena_bytes = 320
// GPU: dt.arena_bytes = 448
module {
  dt.global param @w : tensor<4x4xf32> {init = {kind = "constant", value = 1.0 : f64}}
  dt.global output @out : tensor<f32>

  func.func @step() {
    %w = dt.load @w : tensor<4x4xf32>
    // CPU: dt.fused(%{{.*}}) {dt.offsets = [128]}
    // GPU: dt.fused(%{{.*}}) {dt.offsets = [128]}
    %a16 = dt.fused(%w) : (tensor<4x4xf32>) -> tensor<4x4xbf16> {
    ^bb0(%x: tensor<4x4xf32>):
      %c = dt.convert %x : tensor<4x4xf32> to tensor<4x4xbf16>
      dt.yield %c : tensor<4x4xbf16>
    }
    // CPU: dt.fused(%{{.*}}) {dt.offsets = [192]}
    // GPU: dt.fused(%{{.*}}) {dt.offsets = [192]}
    %b16 = dt.fused(%w) : (tensor<4x4xf32>) -> tensor<4x4xbf16> {
    ^bb0(%x: tensor<4x4xf32>):
      %e = dt.exp %x : tensor<4x4xf32>
      %c = dt.convert %e : tensor<4x4xf32> to tensor<4x4xbf16>
      dt.yield %c : tensor<4x4xbf16>
    }
    // CPU: dt.fused(%{{.*}}) {dt.offsets = [256]}
    // GPU: dt.fused(%{{.*}}) {dt.offsets = [256]}
    %a = dt.fused(%a16) : (tensor<4x4xbf16>) -> tensor<4x4xf32> {
    ^bb0(%x: tensor<4x4xbf16>):
      %c = dt.convert %x : tensor<4x4xbf16> to tensor<4x4xf32>
      dt.yield %c : tensor<4x4xf32>
    }
    // The CPU reuses %a16's block, which a GPU's product would still read.
    // CPU: dt.fused(%{{.*}}) {dt.offsets = [128]}
    // GPU: dt.fused(%{{.*}}) {dt.offsets = [320]}
    %b = dt.fused(%b16) : (tensor<4x4xbf16>) -> tensor<4x4xf32> {
    ^bb0(%x: tensor<4x4xbf16>):
      %c = dt.convert %x : tensor<4x4xbf16> to tensor<4x4xf32>
      dt.yield %c : tensor<4x4xf32>
    }
    // CPU: dt.matmul %{{.*}}, %{{.*}} {dt.offsets = [192]}
    // GPU: dt.matmul %{{.*}}, %{{.*}} {dt.offsets = [384]}
    %p = dt.matmul %a, %b : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    // The CPU's narrowing goes over %b, an operand of the product. A GPU's
    // may go over %a: the product reads %a16 instead, and never touches %a.
    // CPU: dt.fused(%{{.*}}) {dt.offsets = [128]}
    // GPU: dt.fused(%{{.*}}) {dt.offsets = [256]}
    %n = dt.fused(%p) : (tensor<4x4xf32>) -> tensor<4x4xbf16> {
    ^bb0(%x: tensor<4x4xf32>):
      %c = dt.convert %x : tensor<4x4xf32> to tensor<4x4xbf16>
      dt.yield %c : tensor<4x4xbf16>
    }
    %s = dt.fused(%n) {reduce_axes = array<i64: 0, 1>} : (tensor<4x4xbf16>) -> tensor<f32> {
    ^bb0(%x: tensor<4x4xbf16>):
      %c = dt.convert %x : tensor<4x4xbf16> to tensor<4x4xf32>
      dt.yield %c : tensor<4x4xf32>
    }
    dt.store %s, @out : tensor<f32>
    return
  }
}
