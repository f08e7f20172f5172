// RUN: dt-opt %s -split-input-file -dt-plan-memory -verify-diagnostics

// A plan no 64-bit process can address is an error at the first buffer that
// outgrows it, not an offset that wraps.
module {
  dt.global param @w : tensor<1024xf32> {init = {kind = "constant", value = 1.0 : f64}}
  // expected-error @+1 {{the memory plan needs more than 256 TiB per rank here}}
  dt.global param @huge : tensor<70368744177664xf32> {init = {kind = "constant", value = 1.0 : f64}}
}

// -----

module {
  dt.global param @w : tensor<35184372088832xf32> {init = {kind = "constant", value = 1.0 : f64}}
  func.func @step() {
    %w = dt.load @w : tensor<35184372088832xf32>
    // expected-error @+1 {{the memory plan needs more than 256 TiB per rank here}}
    %n = dt.neg %w : tensor<35184372088832xf32>
    %m = dt.neg %n : tensor<35184372088832xf32>
    dt.store %m, @w : tensor<35184372088832xf32>
    return
  }
}
