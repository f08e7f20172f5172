// RUN: dt-opt %s -split-input-file -dt-test-cost -verify-diagnostics

// A product counts 2 M N K; a fused region one FLOP per element and op of its
// body; bytes are the operands' and results' (here f32: 4 bytes each).
// expected-remark @below {{total: flops 1152, bytes 1472}}
func.func @linear_relu(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>)
    -> tensor<4x16xf32> {
  // 2 * 4 * 16 * 8; (32 + 128 + 64) * 4
  // expected-remark @below {{flops 1024, bytes 896}}
  %mm = dt.matmul %x, %w {transpose_rhs} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  // 2 ops x 64 elements; (64 + 16 + 64) * 4
  // expected-remark @below {{flops 128, bytes 576}}
  %f = dt.fused (%mm, %b) : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a: tensor<4x16xf32>, %c: tensor<4x16xf32>):
    %s = dt.add %a, %c : tensor<4x16xf32>
    %r = dt.relu %s : tensor<4x16xf32>
    dt.yield %r : tensor<4x16xf32>
  }
  return %f : tensor<4x16xf32>
}

// -----

// A transposed left operand contracts its first dimension; a transpose moves
// bytes and computes nothing; a reshape is its operand's buffer.
// expected-remark @below {{total: flops 768, bytes 1088}}
func.func @moves(%x: tensor<8x4xf32>, %w: tensor<8x12xf32>) -> tensor<12x4xf32> {
  // 2 * 4 * 12 * 8; (32 + 96 + 48) * 4
  // expected-remark @below {{flops 768, bytes 704}}
  %y = dt.matmul %x, %w {transpose_lhs} : tensor<8x4xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
  %r = dt.reshape %y : tensor<4x12xf32> -> tensor<48xf32>
  %s = dt.reshape %r : tensor<48xf32> -> tensor<4x12xf32>
  // expected-remark @below {{flops 0, bytes 384}}
  %t = dt.transpose %s [1, 0] : tensor<4x12xf32> -> tensor<12x4xf32>
  return %t : tensor<12x4xf32>
}

// -----

// Causal attention over 2 x 2 slices of T = 4, D = 8: 10 scores a slice, each
// 4 D FLOPs of products and 5 of softmax; the gradient 2.5 times that.
// expected-remark @below {{total: flops 5180, bytes 6272}}
func.func @attention(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>,
                     %g: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  // 4 * (4 * 10 * 8 + 5 * 10); 4 tensors of 128 floats and the log-sum-exp's 16
  // expected-remark @below {{flops 1480, bytes 2112}}
  %o, %lse = dt.attention %q, %k, %v {causal} : tensor<2x2x4x8xf32>, tensor<2x2x4xf32>
  // expected-remark @below {{flops 3700, bytes 4160}}
  %dq, %dk, %dv = dt.attention_grad %q, %k, %v, %o, %lse, %g {causal} : tensor<2x2x4x8xf32>, tensor<2x2x4xf32>
  return %dq : tensor<2x2x4x8xf32>
}
