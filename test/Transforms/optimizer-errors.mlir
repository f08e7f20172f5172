// RUN: dt-opt %s -split-input-file -dt-optimizer -verify-diagnostics

// expected-error @+1 {{dt-optimizer needs the module attribute dt.optimizer}}
module {
}

// -----

// expected-error @+1 {{unknown optimizer 'lamb'}}
module attributes {dt.optimizer = {kind = "lamb", lr = 1.0 : f64}} {
}

// -----

// expected-error @+1 {{dt.optimizer needs 'lr'}}
module attributes {dt.optimizer = {kind = "sgd"}} {
}

// -----

module attributes {dt.optimizer = {kind = "sgd", lr = 1.0 : f64}} {
  // expected-error @+1 {{parameter has no gradient global; run dt-autodiff first}}
  dt.global param @w : tensor<3xf32> {init = {kind = "constant", value = 1.0 : f64}}
}
