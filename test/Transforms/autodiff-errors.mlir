// RUN: dt-opt %s -split-input-file -dt-autodiff -verify-diagnostics

// expected-error @+1 {{dt-autodiff needs a function @loss}}
module {
  func.func @other() {
    return
  }
}

// -----

// expected-error @+1 {{@loss must take no arguments, have one block and return one float scalar tensor}}
func.func @loss(%a: tensor<f32>) -> tensor<f32> {
  return %a : tensor<f32>
}

// -----

dt.global param @w : tensor<2xf32> {init = {kind = "constant", value = 1.0 : f64}}
func.func @loss() -> tensor<f32> {
  %w = dt.load @w : tensor<2xf32>
  %y = dt.constant dense<0> : tensor<1xi32>
  // count_correct has no derivative; the loss must not go through it.
  %l = dt.reshape %w : tensor<2xf32> -> tensor<1x2xf32>
  // expected-error @+1 {{cannot differentiate 'dt.count_correct'}}
  %c = dt.count_correct %l, %y : tensor<1x2xf32>, tensor<1xi32> -> tensor<f32>
  return %c : tensor<f32>
}

// -----

dt.global param @q : tensor<1x2x4x8xf32> {init = {kind = "constant", value = 1.0 : f64}}
func.func @loss() -> tensor<f32> {
  %q = dt.load @q : tensor<1x2x4x8xf32>
  // The log-sum-exp is a statistic for the gradient, not a value to train on.
  // expected-error @+1 {{the log-sum-exp of attention has no gradient rule}}
  %o, %lse = dt.attention %q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  %s = dt.reduce_sum %lse [0, 1, 2] : tensor<1x2x4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
