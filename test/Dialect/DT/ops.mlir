// RUN: dt-opt %s | dt-opt | FileCheck %s
// RUN: dt-opt %s --mlir-print-op-generic | dt-opt | FileCheck %s

// Every op of the dt dialect prints and parses back to itself.

// CHECK: dt.global param @w : tensor<4x3xf32> {init = {high = 1.000000e-01 : f64, kind = "uniform", low = -1.000000e-01 : f64}}
dt.global param @w : tensor<4x3xf32> {init = {kind = "uniform", low = -0.1 : f64, high = 0.1 : f64}}
// CHECK: dt.global input @"in/x" : tensor<2x3xf32>
dt.global input @"in/x" : tensor<2x3xf32>
// CHECK: dt.global state @step : tensor<i64> {offset = 128 : i64}
dt.global state @step : tensor<i64> {offset = 128 : i64}

// CHECK-LABEL: func.func @state
func.func @state() {
  // CHECK: %[[W:.*]] = dt.load @w : tensor<4x3xf32>
  %w = dt.load @w : tensor<4x3xf32>
  // CHECK: dt.store %[[W]], @w : tensor<4x3xf32>
  dt.store %w, @w : tensor<4x3xf32>
  return
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %i: tensor<2x3xi64>) {
  // CHECK: dt.constant dense<5.000000e-01> : tensor<2x3xf32>
  %c = dt.constant dense<0.5> : tensor<2x3xf32>
  // CHECK: dt.neg %{{.*}} : tensor<2x3xf32>
  %0 = dt.neg %a : tensor<2x3xf32>
  // CHECK: dt.relu
  %1 = dt.relu %a : tensor<2x3xf32>
  // CHECK: dt.gelu
  %2 = dt.gelu %a : tensor<2x3xf32>
  // CHECK: dt.tanh
  %3 = dt.tanh %a : tensor<2x3xf32>
  // CHECK: dt.sigmoid
  %4 = dt.sigmoid %a : tensor<2x3xf32>
  // CHECK: dt.exp
  %5 = dt.exp %a : tensor<2x3xf32>
  // CHECK: dt.log
  %6 = dt.log %a : tensor<2x3xf32>
  // CHECK: dt.sqrt
  %7 = dt.sqrt %a : tensor<2x3xf32>
  // CHECK: dt.step
  %8 = dt.step %a : tensor<2x3xf32>
  // CHECK: dt.gelu_deriv
  %9 = dt.gelu_deriv %a : tensor<2x3xf32>
  // CHECK: dt.convert %{{.*}} : tensor<2x3xi64> to tensor<2x3xf32>
  %10 = dt.convert %i : tensor<2x3xi64> to tensor<2x3xf32>
  // CHECK: dt.add %{{.*}}, %{{.*}} : tensor<2x3xf32>
  %11 = dt.add %a, %b : tensor<2x3xf32>
  // CHECK: dt.sub
  %12 = dt.sub %a, %b : tensor<2x3xf32>
  // CHECK: dt.mul
  %13 = dt.mul %a, %b : tensor<2x3xf32>
  // CHECK: dt.div
  %14 = dt.div %a, %b : tensor<2x3xf32>
  // CHECK: dt.pow
  %15 = dt.pow %a, %b : tensor<2x3xf32>
  // CHECK: dt.maximum
  %16 = dt.maximum %a, %b : tensor<2x3xf32>
  // CHECK: dt.minimum
  %17 = dt.minimum %a, %b : tensor<2x3xf32>
  return
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%a: tensor<3xf32>, %b: tensor<2x3x4xf32>) {
  // CHECK: dt.broadcast_to %{{.*}} : tensor<3xf32> -> tensor<2x3xf32>
  %0 = dt.broadcast_to %a : tensor<3xf32> -> tensor<2x3xf32>
  // CHECK: dt.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = dt.reshape %b : tensor<2x3x4xf32> -> tensor<6x4xf32>
  // CHECK: dt.transpose %{{.*}} [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %2 = dt.transpose %b [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  // CHECK: dt.split %{{.*}} axis 2 : tensor<2x3x4xf32> -> tensor<2x3x1xf32>, tensor<2x3x3xf32>
  %3:2 = dt.split %b axis 2 : tensor<2x3x4xf32> -> tensor<2x3x1xf32>, tensor<2x3x3xf32>
  // CHECK: dt.concat %{{.*}}, %{{.*}} axis 2 : tensor<2x3x3xf32>, tensor<2x3x1xf32> -> tensor<2x3x4xf32>
  %4 = dt.concat %3#1, %3#0 axis 2 : tensor<2x3x3xf32>, tensor<2x3x1xf32> -> tensor<2x3x4xf32>
  // CHECK: dt.reduce_sum %{{.*}} [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
  %5 = dt.reduce_sum %b [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
  // CHECK: dt.iota : tensor<8xi32>
  %6 = dt.iota : tensor<8xi32>
  return
}

// CHECK-LABEL: func.func @nn
func.func @nn(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %t: tensor<16x8xf32>, %ids: tensor<4xi32>,
              %l: tensor<4x16xf32>, %q: tensor<1x2x4x8xf32>, %s: tensor<i64>, %g: tensor<f32>) {
  // CHECK: dt.matmul %{{.*}}, %{{.*}} {transpose_rhs} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %0 = dt.matmul %x, %t {transpose_rhs} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  // CHECK: dt.softmax %{{.*}} axis 1 : tensor<4x16xf32>
  %1 = dt.softmax %0 axis 1 : tensor<4x16xf32>
  // CHECK: dt.layer_norm {{.*}} {eps = 1.000000e-05 : f64}
  %2 = dt.layer_norm %x, %w, %w {eps = 1.0e-5 : f64} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  // CHECK: dt.layer_norm_grad
  %3:3 = dt.layer_norm_grad %x, %w, %x {eps = 1.0e-5 : f64} : tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  // CHECK: dt.rms_norm {{.*}} {eps = 9.9999999999999995E-7 : f64} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %r = dt.rms_norm %x, %w {eps = 1.0e-6 : f64} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  // CHECK: dt.rope %{{.*}} {inverse, theta = 1.000000e+04 : f64} : tensor<1x2x4x8xf32>
  %ro = dt.rope %q {inverse, theta = 1.0e+04 : f64} : tensor<1x2x4x8xf32>
  // CHECK: dt.rope %{{.*}} {scaling = array<f64: 3.200000e+01, 1.000000e+00, 4.000000e+00, 8.192000e+03>, theta = 5.000000e+05 : f64} : tensor<1x2x4x8xf32>
  %rs = dt.rope %q {theta = 5.0e+05 : f64, scaling = array<f64: 32.0, 1.0, 4.0, 8192.0>} : tensor<1x2x4x8xf32>
  // CHECK: dt.dropout %{{.*}} step %{{.*}} micro %{{.*}} {p = 1.000000e-01 : f64, seed = 7 : i64, shape = array<i64: 4, 8>, site = 0 : i64} : tensor<4x8xf32>
  %dr = dt.dropout %x step %s micro %s {p = 1.0e-01 : f64, seed = 7 : i64, site = 0 : i64, shape = array<i64: 4, 8>} : tensor<4x8xf32>
  // CHECK: dt.dropout %{{.*}} step %{{.*}} micro %{{.*}} firsts(%{{.*}}, %{{.*}}) {{.*}} : tensor<4x8xf32>
  %db = dt.dropout %x step %s micro %s firsts(%s, %s) {p = 1.0e-01 : f64, seed = 7 : i64, site = 1 : i64, shape = array<i64: 8, 8>} : tensor<4x8xf32>
  // CHECK: dt.rms_norm_grad
  %rg:2 = dt.rms_norm_grad %x, %w, %x {eps = 1.0e-6 : f64} : tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>, tensor<8xf32>
  // CHECK: dt.embedding %{{.*}}, %{{.*}} : tensor<16x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
  %4 = dt.embedding %t, %ids : tensor<16x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
  // CHECK: dt.embedding_grad
  %5 = dt.embedding_grad %ids, %4 : tensor<4xi32>, tensor<4x8xf32> -> tensor<16x8xf32>
  // CHECK: dt.cross_entropy %{{.*}}, %{{.*}} : tensor<4x16xf32>, tensor<4xi32> -> tensor<f32>
  %6 = dt.cross_entropy %l, %ids : tensor<4x16xf32>, tensor<4xi32> -> tensor<f32>
  // CHECK: dt.cross_entropy_grad
  %7 = dt.cross_entropy_grad %l, %ids, %g : tensor<4x16xf32>, tensor<4xi32>, tensor<f32> -> tensor<4x16xf32>
  // CHECK: dt.count_correct
  %8 = dt.count_correct %l, %ids : tensor<4x16xf32>, tensor<4xi32> -> tensor<f32>
  // CHECK: %result, %lse = dt.attention %{{.*}}, %{{.*}}, %{{.*}} {causal} : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  %9:2 = dt.attention %q, %q, %q {causal} : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  // CHECK: dt.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %result, %lse, %{{.*}} {causal} : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  %10:3 = dt.attention_grad %q, %q, %q, %9#0, %9#1, %q {causal} : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  // CHECK: dt.schedule %{{.*}}, %{{.*}} {kind = "cosine", lr = 1.000000e-03 : f64, warmup = 10 : i64}
  %11 = dt.schedule %s, %s {kind = "cosine", lr = 1.0e-3 : f64, warmup = 10 : i64} : tensor<i64>, tensor<i64> -> tensor<f32>
  return
}

// CHECK-LABEL: func.func @fused
func.func @fused(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  // CHECK: dt.fused(%{{.*}}, %{{.*}}) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> {
  // CHECK: ^bb0(%[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<2x3xf32>):
  // CHECK:   %[[S:.*]] = dt.add %[[A]], %[[B]]
  // CHECK:   dt.yield %[[S]] : tensor<2x3xf32>
  %0 = dt.fused(%a, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> {
  ^bb0(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>):
    %s = dt.add %x, %y : tensor<2x3xf32>
    dt.yield %s : tensor<2x3xf32>
  }
  return %0 : tensor<2x3xf32>
}

// Vocabulary parallelism (ops of partitioned programs).
// CHECK-LABEL: func.func @vocab
func.func @vocab(%t: tensor<8x4xf32>, %ids: tensor<6xi32>, %l: tensor<6x8xf32>,
                 %g: tensor<f32>) {
  // CHECK: %[[F:.*]] = dt.shard_start {axes = array<i16: 1>, size = 8 : i64} : tensor<i64>
  %f = dt.shard_start {axes = array<i16: 1>, size = 8} : tensor<i64>
  // CHECK: dt.embedding_shard %{{.*}}, %{{.*}}, %[[F]] {rows = 16 : i64} : tensor<8x4xf32>, tensor<6xi32>, tensor<i64> -> tensor<6x4xf32>
  %h = dt.embedding_shard %t, %ids, %f {rows = 16} : tensor<8x4xf32>, tensor<6xi32>, tensor<i64> -> tensor<6x4xf32>
  // CHECK: dt.embedding_grad_shard %{{.*}}, %{{.*}}, %[[F]] {rows = 16 : i64} : tensor<6xi32>, tensor<6x4xf32>, tensor<i64> -> tensor<8x4xf32>
  %dt = dt.embedding_grad_shard %ids, %h, %f {rows = 16} : tensor<6xi32>, tensor<6x4xf32>, tensor<i64> -> tensor<8x4xf32>
  // CHECK: %[[S:.*]] = dt.class_stats %{{.*}}, %{{.*}}, %[[F]] {classes = 16 : i64} : tensor<6x8xf32>, tensor<6xi32>, tensor<i64> -> tensor<4x6xf32>
  %s = dt.class_stats %l, %ids, %f {classes = 16} : tensor<6x8xf32>, tensor<6xi32>, tensor<i64> -> tensor<4x6xf32>
  %all = dt.reshape %s : tensor<4x6xf32> -> tensor<1x4x6xf32>
  // CHECK: dt.cross_entropy_stats %{{.*}}, %{{.*}} : tensor<1x4x6xf32>, tensor<6xi32> -> tensor<f32>
  %loss = dt.cross_entropy_stats %all, %ids : tensor<1x4x6xf32>, tensor<6xi32> -> tensor<f32>
  // CHECK: dt.count_correct_stats %{{.*}}, %{{.*}} : tensor<1x4x6xf32>, tensor<6xi32> -> tensor<f32>
  %n = dt.count_correct_stats %all, %ids : tensor<1x4x6xf32>, tensor<6xi32> -> tensor<f32>
  // CHECK: dt.cross_entropy_grad_shard %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[F]] {classes = 16 : i64} : tensor<6x8xf32>, tensor<6xi32>, tensor<1x4x6xf32>, tensor<f32>, tensor<i64> -> tensor<6x8xf32>
  %d = dt.cross_entropy_grad_shard %l, %ids, %all, %g, %f {classes = 16} : tensor<6x8xf32>, tensor<6xi32>, tensor<1x4x6xf32>, tensor<f32>, tensor<i64> -> tensor<6x8xf32>
  return
}

// -----

// CHECK-LABEL: func.func @conv
func.func @conv(%x: tensor<2x4x9x9xf32>, %w: tensor<6x2x3x3xf32>, %dy: tensor<2x6x4x9xf32>) {
  // CHECK: dt.conv2d %{{.*}}, %{{.*}} {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 1>} : tensor<2x4x9x9xf32>, tensor<6x2x3x3xf32> -> tensor<2x6x5x9xf32>
  %y = dt.conv2d %x, %w {stride = array<i64: 2, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2} : tensor<2x4x9x9xf32>, tensor<6x2x3x3xf32> -> tensor<2x6x5x9xf32>
  // CHECK: dt.conv2d_input_grad {{.*}} -> tensor<2x4x9x9xf32>
  %dx = dt.conv2d_input_grad %dy, %w {stride = array<i64: 2, 1>, padding = array<i64: 0, 1>, dilation = array<i64: 1, 1>, groups = 2} : tensor<2x6x4x9xf32>, tensor<6x2x3x3xf32> -> tensor<2x4x9x9xf32>
  // CHECK: dt.conv2d_weight_grad {{.*}} -> tensor<6x2x3x3xf32>
  %dw = dt.conv2d_weight_grad %x, %dy {stride = array<i64: 2, 1>, padding = array<i64: 0, 1>, dilation = array<i64: 1, 1>, groups = 2} : tensor<2x4x9x9xf32>, tensor<2x6x4x9xf32> -> tensor<6x2x3x3xf32>
  // CHECK: dt.max_pool2d %{{.*}} {kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<2x4x9x9xf32> -> tensor<2x4x5x5xf32>
  %mp = dt.max_pool2d %x {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>} : tensor<2x4x9x9xf32> -> tensor<2x4x5x5xf32>
  // CHECK: dt.max_pool2d_grad {{.*}} -> tensor<2x4x9x9xf32>
  %mg = dt.max_pool2d_grad %x, %mp {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>} : tensor<2x4x9x9xf32>, tensor<2x4x5x5xf32> -> tensor<2x4x9x9xf32>
  // CHECK: dt.avg_pool2d {{.*}} -> tensor<2x4x3x3xf32>
  %ap = dt.avg_pool2d %x {kernel = array<i64: 3, 3>, stride = array<i64: 3, 3>, padding = array<i64: 0, 0>} : tensor<2x4x9x9xf32> -> tensor<2x4x3x3xf32>
  // CHECK: dt.avg_pool2d_grad {{.*}} -> tensor<2x4x9x9xf32>
  %ag = dt.avg_pool2d_grad %ap {kernel = array<i64: 3, 3>, stride = array<i64: 3, 3>, padding = array<i64: 0, 0>} : tensor<2x4x3x3xf32> -> tensor<2x4x9x9xf32>
  return
}
