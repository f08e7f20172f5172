// RUN: dt-opt %s -split-input-file -convert-dt-to-kernels -verify-diagnostics

// expected-error @+1 {{convert-dt-to-kernels needs dt-plan-memory's offsets}}
module {
}

// -----

module attributes {dt.arena_bytes = 1024 : i64} {
  func.func @f64_kernel() {
    %a = dt.constant {dt.offsets = [0]} dense<1.0> : tensor<2x2xf64>
    // expected-error @+1 {{has 'f64' data; the CPU backend's kernels take f32 only}}
    %m = dt.matmul %a, %a {dt.offsets = [64]} : tensor<2x2xf64>, tensor<2x2xf64> -> tensor<2x2xf64>
    return
  }
}

// -----

module attributes {dt.arena_bytes = 1024 : i64} {
  func.func @unfused() {
    %a = dt.constant {dt.offsets = [0]} dense<1.0> : tensor<4xf32>
    // expected-error @+1 {{cannot be lowered by convert-dt-to-kernels (was the module fused and planned?)}}
    %n = dt.neg %a {dt.offsets = [64]} : tensor<4xf32>
    return
  }
}
