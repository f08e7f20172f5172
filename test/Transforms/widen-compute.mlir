// RUN: dt-opt %s -split-input-file -dt-widen-compute | FileCheck %s

// 16-bit values are storage: each op that computes on them gets f32 operands,
// converted just before it, and narrows its results just after it, so kernels and
// arithmetic run in f32 while what is kept stays bf16. Each use widens on its own.

dt.global param @w : tensor<4x8xf32> {init = {kind = "constant", value = 0.5 : f64}}
dt.global input @"in/train.x" : tensor<2x8xf32>
// CHECK-LABEL: func.func @grad_step
func.func @grad_step() {
  // CHECK: %[[XL:.*]] = dt.convert %{{.*}} : tensor<2x8xf32> to tensor<2x8xbf16>
  // CHECK: %[[WL:.*]] = dt.convert %{{.*}} : tensor<4x8xf32> to tensor<4x8xbf16>
  %x = dt.load @"in/train.x" : tensor<2x8xf32>
  %xl = dt.convert %x : tensor<2x8xf32> to tensor<2x8xbf16>
  %w = dt.load @w : tensor<4x8xf32>
  %wl = dt.convert %w : tensor<4x8xf32> to tensor<4x8xbf16>
  // CHECK: %[[XW:.*]] = dt.convert %[[XL]] : tensor<2x8xbf16> to tensor<2x8xf32>
  // CHECK: %[[WW:.*]] = dt.convert %[[WL]] : tensor<4x8xbf16> to tensor<4x8xf32>
  // CHECK: %[[H:.*]] = dt.matmul %[[XW]], %[[WW]] {transpose_rhs} : tensor<2x8xf32>, tensor<4x8xf32> -> tensor<2x4xf32>
  // CHECK: %[[HL:.*]] = dt.convert %[[H]] : tensor<2x4xf32> to tensor<2x4xbf16>
  %h = dt.matmul %xl, %wl {transpose_rhs} : tensor<2x8xbf16>, tensor<4x8xbf16> -> tensor<2x4xbf16>
  // Moving data stays 16-bit.
  // CHECK: %[[T:.*]] = dt.transpose %[[HL]] [1, 0] : tensor<2x4xbf16> -> tensor<4x2xbf16>
  %t = dt.transpose %h [1, 0] : tensor<2x4xbf16> -> tensor<4x2xbf16>
  // A constant is used in f32 as it was written, not rounded to bf16 and back.
  // CHECK: %[[C:.*]] = dt.constant dense<1.000000e-01> : tensor<4x2xf32>
  // CHECK-NOT: dt.convert %[[C]]
  // CHECK: %[[TW:.*]] = dt.convert %[[T]] : tensor<4x2xbf16> to tensor<4x2xf32>
  // CHECK: %[[M:.*]] = dt.mul %[[TW]], %[[C]] : tensor<4x2xf32>
  // CHECK: %[[ML:.*]] = dt.convert %[[M]] : tensor<4x2xf32> to tensor<4x2xbf16>
  %c = dt.constant dense<0.1> : tensor<4x2xf32>
  %cl = dt.convert %c : tensor<4x2xf32> to tensor<4x2xbf16>
  %m = dt.mul %t, %cl : tensor<4x2xbf16>
  // Two uses of one value: two conversions, so neither f32 copy outlives its user.
  // CHECK: dt.convert %[[ML]] : tensor<4x2xbf16> to tensor<4x2xf32>
  // CHECK: dt.tanh
  // CHECK: dt.convert %[[ML]] : tensor<4x2xbf16> to tensor<4x2xf32>
  // CHECK: dt.exp
  %a = dt.tanh %m : tensor<4x2xbf16>
  %b = dt.exp %m : tensor<4x2xbf16>
  // f32 ops are untouched.
  // CHECK: %[[S:.*]] = dt.reduce_sum %{{.*}} [0] : tensor<2x8xf32> -> tensor<8xf32>
  // CHECK-NOT: dt.convert %[[S]]
  %s = dt.reduce_sum %x [0] : tensor<2x8xf32> -> tensor<8xf32>
  return
}
