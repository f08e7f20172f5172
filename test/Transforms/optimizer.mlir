// RUN: dt-opt %s -split-input-file -dt-optimizer | FileCheck %s

// AdamW with a cosine schedule and clipping: PyTorch's formulas, weight decay on the
// matrix only.
module attributes {dt.optimizer = {kind = "adamw", lr = 1.0e-3 : f64, beta1 = 0.9 : f64,
                                   beta2 = 0.95 : f64, weight_decay = 0.1 : f64},
                   dt.schedule = {kind = "cosine", warmup = 10 : i64, min = 1.0e-4 : f64},
                   dt.clip = 1.0 : f64} {
  dt.global param @w : tensor<4x8xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.1 : f64}}
  dt.global param @b : tensor<4xf32> {init = {kind = "constant", value = 0.0 : f64}}
  dt.global grad @"grad/w" : tensor<4x8xf32>
  dt.global grad @"grad/b" : tensor<4xf32>

  // CHECK-DAG: dt.global state @step : tensor<i64>
  // CHECK-DAG: dt.global input @"in/total_steps" : tensor<i64>
  // CHECK-DAG: dt.global output @"out/lr" : tensor<f32>
  // CHECK-DAG: dt.global output @"out/grad_norm" : tensor<f32>
  // CHECK-DAG: dt.global state @"adamw.m/w" : tensor<4x8xf32>
  // CHECK-DAG: dt.global state @"adamw.v/b" : tensor<4xf32>

  // CHECK-LABEL: func.func @apply_step()
  // CHECK: %[[STEP:.*]] = dt.load @step
  // CHECK: %[[T:.*]] = dt.add %[[STEP]], %{{.*}} : tensor<i64>
  // CHECK: %[[LR:.*]] = dt.schedule %[[T]], %{{.*}} {kind = "cosine", lr = 1.000000e-03 : f64, min = 1.000000e-04 : f64, warmup = 10 : i64}
  // CHECK: dt.store %[[LR]], @"out/lr"
  // The global norm over both gradients, stored before clipping scales them.
  // CHECK: %[[NORM:.*]] = dt.sqrt
  // CHECK: dt.store %[[NORM]], @"out/grad_norm"
  // CHECK: %[[COEF:.*]] = dt.minimum
  // Decoupled weight decay for the matrix: w * (1 - lr * wd).
  // CHECK: %[[W:.*]] = dt.load @w
  // CHECK: %[[DECAY:.*]] = dt.sub %{{.*}}, %{{.*}} : tensor<f32>
  // CHECK: %[[DECAYB:.*]] = dt.broadcast_to %[[DECAY]] : tensor<f32> -> tensor<4x8xf32>
  // CHECK: dt.mul %[[W]], %[[DECAYB]]
  // CHECK: dt.store %{{.*}}, @w
  // CHECK: dt.store %{{.*}}, @"adamw.m/w"
  // CHECK: dt.store %{{.*}}, @"adamw.v/w"
  // The bias is not decayed: its update starts from its own load.
  // CHECK: %[[B:.*]] = dt.load @b
  // CHECK-NOT: dt.mul %[[B]]
  // CHECK: dt.store %{{.*}}, @b
  // CHECK: dt.store %[[T]], @step
  // CHECK: return
}

// -----

// SGD with Nesterov momentum, gradient accumulation over 2 micro-batches.
module attributes {dt.optimizer = {kind = "sgd", lr = 0.05 : f64, momentum = 0.9 : f64, nesterov = true},
                   dt.accumulation = 2 : i64} {
  dt.global param @w : tensor<3xf32> {init = {kind = "constant", value = 1.0 : f64}}
  dt.global grad @"grad/w" : tensor<3xf32>
  // CHECK-LABEL: func.func @apply_step()
  // CHECK: dt.schedule {{.*}}kind = "constant"
  // Accumulated gradients are averaged.
  // CHECK: %[[G:.*]] = dt.load @"grad/w"
  // CHECK: %[[HALF:.*]] = dt.constant dense<5.000000e-01> : tensor<3xf32>
  // CHECK: %[[AVG:.*]] = dt.mul %[[G]], %[[HALF]]
  // buf = momentum * buf + g; d = g + momentum * buf
  // CHECK: %[[BUF:.*]] = dt.add %{{.*}}, %[[AVG]]
  // CHECK: dt.store %[[BUF]], @"sgd.momentum/w"
  // CHECK: dt.add %[[AVG]], %{{.*}}
  // CHECK: dt.store %{{.*}}, @w
  // Gradients are zeroed for the next accumulation.
  // CHECK: %[[ZERO:.*]] = dt.constant dense<0.000000e+00> : tensor<3xf32>
  // CHECK: dt.store %[[ZERO]], @"grad/w"
}


// -----

// Dynamic loss scaling (f16): gradients are divided by the scale 1024 * 2^e; a step
// whose squared gradient norm is not finite keeps every parameter and moment (a
// select, which an inf in the update cannot leak through), lowers e by one and counts
// the skip; growth_interval clean steps in a row raise e by one.
module attributes {dt.optimizer = {kind = "adam", lr = 1.0e-3 : f64},
                   dt.loss_scale = {init = 1024.0 : f64, growth_interval = 100 : i64}} {
  dt.global param @w : tensor<3xf32> {init = {kind = "constant", value = 1.0 : f64}}
  dt.global grad @"grad/w" : tensor<3xf32>
  // CHECK-DAG: dt.global state @"amp/scale_exp" : tensor<f32>
  // CHECK-DAG: dt.global state @"amp/clean_steps" : tensor<f32>
  // CHECK-DAG: dt.global state @"amp/skipped_steps" : tensor<f32>
  // CHECK-DAG: dt.global output @"out/loss_scale" : tensor<f32>
  // CHECK-DAG: dt.global output @"out/skipped_steps" : tensor<f32>
  // CHECK-LABEL: func.func @apply_step()
  // CHECK: %[[E:.*]] = dt.load @"amp/scale_exp"
  // CHECK: %[[POW:.*]] = dt.pow %{{.*}}, %[[E]]
  // CHECK: %[[S:.*]] = dt.mul %{{.*}}, %[[POW]]
  // CHECK: %[[INV:.*]] = dt.div %{{.*}}, %[[S]]
  // CHECK: %[[G:.*]] = dt.load @"grad/w"
  // CHECK: %[[INVB:.*]] = dt.broadcast_to %[[INV]]
  // CHECK: %[[UNSCALED:.*]] = dt.mul %[[G]], %[[INVB]]
  // CHECK: %[[NORMSQ:.*]] = dt.add
  // CHECK: dt.store %{{.*}}, @"out/grad_norm"
  // CHECK: %[[MAX:.*]] = dt.constant dense<3.40282347E+38> : tensor<f32>
  // CHECK: %[[HEAD:.*]] = dt.sub %[[MAX]], %[[NORMSQ]]
  // CHECK: %[[FINITE:.*]] = dt.step %[[HEAD]]
  // CHECK: %[[W0:.*]] = dt.load @w
  // CHECK: %[[M0:.*]] = dt.load @"adam.m/w"
  // CHECK: %[[KEEP:.*]] = dt.broadcast_to %[[FINITE]] : tensor<f32> -> tensor<3xf32>
  // CHECK: %[[W:.*]] = dt.select %[[KEEP]], %{{.*}}, %[[W0]] : tensor<3xf32>
  // CHECK: dt.store %[[W]], @w
  // CHECK: dt.select %{{.*}}, %{{.*}}, %[[M0]] : tensor<3xf32>
  // CHECK: dt.store %{{.*}}, @"adam.m/w"
  // CHECK: dt.store %{{.*}}, @"adam.v/w"
  // CHECK: %[[OVER:.*]] = dt.sub %{{.*}}, %[[FINITE]]
  // CHECK: dt.constant dense<9.950000e+01> : tensor<f32>
  // CHECK: dt.store %{{.*}}, @"amp/scale_exp"
  // CHECK: dt.store %{{.*}}, @"amp/clean_steps"
  // CHECK: dt.store %{{.*}}, @"amp/skipped_steps"
  // CHECK: dt.store %{{.*}}, @"out/loss_scale"
  // CHECK: dt.store %{{.*}}, @"out/skipped_steps"
  // CHECK: dt.store %{{.*}}, @step
}

// -----

// A frozen parameter has no gradient and no state: the update leaves it alone.
module attributes {dt.optimizer = {kind = "adamw", lr = 1.0e-3 : f64, beta1 = 0.9 : f64,
                                   beta2 = 0.95 : f64, weight_decay = 0.1 : f64}} {
  dt.global param @frozen : tensor<4x8xf32> {dt.frozen, init = {kind = "normal", mean = 0.0 : f64, std = 0.1 : f64}}
  dt.global param @b : tensor<4xf32> {init = {kind = "constant", value = 0.0 : f64}}
  dt.global grad @"grad/b" : tensor<4xf32>
  // CHECK-NOT: @"adamw.m/frozen"
  // CHECK: dt.global state @"adamw.m/b"
  // CHECK-NOT: @"adamw.m/frozen"
  // CHECK-LABEL: func.func @apply_step()
  // CHECK-NOT: @frozen
  // CHECK: dt.store %{{.*}}, @b
  // CHECK-NOT: @frozen
  // CHECK: return
}

// -----

// `no_decay` (dt.no_decay) exempts a matrix from weight decay; other matrices
// still decay.
module attributes {dt.optimizer = {kind = "adamw", lr = 1.0e-3 : f64, beta1 = 0.9 : f64,
                                   beta2 = 0.95 : f64, weight_decay = 0.1 : f64}} {
  dt.global param @emb : tensor<4x8xf32> {dt.no_decay, init = {kind = "normal", mean = 0.0 : f64, std = 0.1 : f64}}
  dt.global param @w : tensor<4x8xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.1 : f64}}
  dt.global grad @"grad/emb" : tensor<4x8xf32>
  dt.global grad @"grad/w" : tensor<4x8xf32>
  // CHECK-LABEL: func.func @apply_step()
  // CHECK: %[[E:.*]] = dt.load @emb
  // CHECK-NOT: dt.mul %[[E]]
  // CHECK: dt.store %{{.*}}, @emb
  // CHECK: %[[W:.*]] = dt.load @w
  // CHECK: dt.mul %[[W]]
  // CHECK: dt.store %{{.*}}, @w
}
