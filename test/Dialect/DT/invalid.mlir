// RUN: dt-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{a parameter needs an initialiser}}
dt.global param @w : tensor<4xf32>

// -----

// expected-error @+1 {{unknown initialiser kind 'glorot'}}
dt.global param @w : tensor<4xf32> {init = {kind = "glorot"}}

// -----

// expected-error @+1 {{'normal' initialiser needs a float 'std'}}
dt.global param @w : tensor<4xf32> {init = {kind = "normal", mean = 0.0 : f64}}

// -----

// expected-error @+1 {{only parameters have an initialiser}}
dt.global input @x : tensor<4xf32> {init = {kind = "constant", value = 1.0 : f64}}

// -----

// expected-error @+1 {{offset 12 is not 64-byte aligned}}
dt.global state @s : tensor<4xf32> {offset = 12 : i64}

// -----

func.func @load_missing() {
  // expected-error @+1 {{'nowhere' does not name a dt.global}}
  %0 = dt.load @nowhere : tensor<4xf32>
  return
}

// -----

dt.global input @x : tensor<4xf32>
func.func @load_type() {
  // expected-error @+1 {{type 'tensor<5xf32>' does not match the global's type 'tensor<4xf32>'}}
  %0 = dt.load @x : tensor<5xf32>
  return
}

// -----

func.func @add_types(%a: tensor<4xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{all non-scalar operands/results must have the same shape and base type}}
  %0 = "dt.add"(%a, %b) : (tensor<4xf32>, tensor<5xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @relu_int(%a: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values}}
  %0 = dt.relu %a : tensor<4xi32>
  return
}

// -----

func.func @dynamic(%a: tensor<?xf32>) {
  // expected-error @+1 {{must be statically shaped tensor}}
  %0 = dt.neg %a : tensor<?xf32>
  return
}

// -----

func.func @broadcast(%a: tensor<3xf32>) {
  // expected-error @+1 {{operand shape does not broadcast to the result shape}}
  %0 = dt.broadcast_to %a : tensor<3xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @reshape(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{operand has 6 elements but the result 8}}
  %0 = dt.reshape %a : tensor<2x3xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @transpose(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'perm' is not a permutation}}
  %0 = dt.transpose %a [0, 0] : tensor<2x3xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @transpose_shape(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{result dimension 0 must be operand dimension 1}}
  %0 = dt.transpose %a [1, 0] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @split(%a: tensor<2x6xf32>) {
  // expected-error @+1 {{pieces add up to 5 along axis 1, not 6}}
  %0:2 = dt.split %a axis 1 : tensor<2x6xf32> -> tensor<2x2xf32>, tensor<2x3xf32>
  return
}

// -----

func.func @concat(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+1 {{operands may differ from the result only along the axis}}
  %0 = dt.concat %a, %b axis 1 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x6xf32>
  return
}

// -----

func.func @reduce(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{result shape must be the operand's without the reduced axes}}
  %0 = dt.reduce_sum %a [0] : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @reduce_axes(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axes must be strictly increasing}}
  %0 = dt.reduce_sum %a [1, 0] : tensor<2x3xf32> -> tensor<f32>
  return
}

// -----

func.func @matmul(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{contracting dimensions differ: 3 vs 4}}
  %0 = dt.matmul %a, %b : tensor<2x3xf32>, tensor<4x5xf32> -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x2x3xf32>, %b: tensor<3x3x5xf32>) {
  // expected-error @+1 {{batch dimensions differ}}
  %0 = dt.matmul %a, %b : tensor<2x2x3xf32>, tensor<3x3x5xf32> -> tensor<2x2x5xf32>
  return
}

// -----

func.func @softmax(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = dt.softmax %a axis 2 : tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm(%x: tensor<2x3xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{weight and bias must have shape [3]}}
  %0 = dt.layer_norm %x, %w, %w {eps = 1.0e-5 : f64} : tensor<2x3xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @rope(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{input must be [..., T, D] with D even}}
  %0 = dt.rope %x {theta = 1.0e+04 : f64} : tensor<2x3xf32>
  return
}

// -----

func.func @rope_scaling_size(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{scaling must be [factor, low_freq_factor, high_freq_factor, original]}}
  %0 = dt.rope %x {theta = 1.0e+04 : f64, scaling = array<f64: 8.0, 1.0>} : tensor<2x4xf32>
  return
}

// -----

func.func @rope_scaling_band(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{scaling needs 0 < low_freq_factor < high_freq_factor}}
  %0 = dt.rope %x {theta = 1.0e+04 : f64, scaling = array<f64: 8.0, 4.0, 1.0, 8192.0>} : tensor<2x4xf32>
  return
}

// -----

func.func @conv_groups(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>) {
  // expected-error @+1 {{groups (3) must divide the input's 4 and the output's 6 channels}}
  %0 = dt.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 3} : tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32> -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_size(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{result must be [1, 6, 4, 4]}}
  %0 = dt.conv2d %x, %w {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1} : tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32> -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @conv_window(%x: tensor<1x4x2x2xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{window of 3x3 does not fit the padded 2x2 input}}
  %0 = dt.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1} : tensor<1x4x2x2xf32>, tensor<6x4x3x3xf32> -> tensor<1x6x1x1xf32>
  return
}

// -----

func.func @conv_stride(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{stride must be two values of at least 1}}
  %0 = dt.conv2d %x, %w {stride = array<i64: 0, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1} : tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32> -> tensor<1x6x6x6xf32>
  return
}

// -----

func.func @pool_padding(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{padding must be at most half the window}}
  %0 = dt.max_pool2d %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 2, 0>} : tensor<1x4x8x8xf32> -> tensor<1x4x6x4xf32>
  return
}

// -----

func.func @pool_size(%x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{result must be [1, 4, 4, 4]}}
  %0 = dt.avg_pool2d %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @dropout_p(%x: tensor<2x4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{p must be in [0, 1), not 1}}
  %0 = dt.dropout %x step %s micro %s {p = 1.0 : f64, seed = 1 : i64, site = 0 : i64, shape = array<i64: 2, 4>} : tensor<2x4xf32>
  return
}

// -----

func.func @dropout_block(%x: tensor<2x4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{input is a block of shape but no firsts say where}}
  %0 = dt.dropout %x step %s micro %s {p = 0.5 : f64, seed = 1 : i64, site = 0 : i64, shape = array<i64: 4, 4>} : tensor<2x4xf32>
  return
}

// -----

func.func @dropout_firsts(%x: tensor<2x4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{needs no firsts or one per dimension, not 1}}
  %0 = dt.dropout %x step %s micro %s firsts(%s) {p = 0.5 : f64, seed = 1 : i64, site = 0 : i64, shape = array<i64: 4, 4>} : tensor<2x4xf32>
  return
}

// -----

func.func @rms_norm(%x: tensor<2x3xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{weight must have shape [3]}}
  %0 = dt.rms_norm %x, %w {eps = 1.0e-6 : f64} : tensor<2x3xf32>, tensor<4xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @embedding(%t: tensor<10x4xf32>, %i: tensor<3xi32>) {
  // expected-error @+1 {{result must have shape ids + [4]}}
  %0 = dt.embedding %t, %i : tensor<10x4xf32>, tensor<3xi32> -> tensor<3x5xf32>
  return
}

// -----

func.func @cross_entropy(%l: tensor<4x10xf32>, %y: tensor<5xi32>) {
  // expected-error @+1 {{labels must have the logits' shape without the class dimension}}
  %0 = dt.cross_entropy %l, %y : tensor<4x10xf32>, tensor<5xi32> -> tensor<f32>
  return
}

// -----

func.func @attention(%q: tensor<4x8xf32>) {
  // expected-error @+1 {{operands must be [..., heads, T, head_dim]}}
  %0:2 = dt.attention %q, %q, %q : tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @attention_lse(%q: tensor<1x2x4x8xbf16>) {
  // expected-error @+1 {{the log-sum-exp must be 'tensor<1x2x4xf32>'}}
  %0:2 = dt.attention %q, %q, %q : tensor<1x2x4x8xbf16>, tensor<1x2x4xbf16>
  return
}

// -----

func.func @attention_grad_lse(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x8xf32>) {
  // expected-error @+1 {{the log-sum-exp must be 'tensor<1x2x4xf32>'}}
  %0:3 = dt.attention_grad %q, %q, %q, %q, %lse, %q : tensor<1x2x4x8xf32>, tensor<1x2x8xf32>
  return
}

// -----

func.func @schedule(%s: tensor<i64>) {
  // expected-error @+1 {{unknown schedule 'exponential'}}
  %0 = dt.schedule %s, %s {kind = "exponential", lr = 1.0 : f64} : tensor<i64>, tensor<i64> -> tensor<f32>
  return
}

// -----

func.func @fused_shape(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{results must have the yielded values' types}}
  %0 = dt.fused(%a) : (tensor<2x3xf32>) -> tensor<2x3xf32> {
  ^bb0(%x: tensor<3xf32>):
    %n = dt.neg %x : tensor<3xf32>
    dt.yield %n : tensor<3xf32>
  }
  return
}

// -----

func.func @fused_body(%a: tensor<2x3xf32>) {
  %0 = dt.fused(%a) : (tensor<2x3xf32>) -> tensor<2x3xf32> {
  ^bb0(%x: tensor<2x3xf32>):
    // expected-error @+1 {{is not elementwise and cannot be part of a dt.fused region}}
    %s = dt.softmax %x axis 1 : tensor<2x3xf32>
    dt.yield %s : tensor<2x3xf32>
  }
  return
}

// -----

func.func @fused_reduce_axes(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{reduce_axes must be increasing axes of the iteration shape}}
  %0 = dt.fused(%a) {reduce_axes = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<f32> {
  ^bb0(%x: tensor<2x3xf32>):
    dt.yield %x : tensor<2x3xf32>
  }
  return
}

// -----

func.func @fused_reduce_shape(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{results must be the yielded values without the reduced axes}}
  %0 = dt.fused(%a) {reduce_axes = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<2xf32> {
  ^bb0(%x: tensor<2x3xf32>):
    dt.yield %x : tensor<2x3xf32>
  }
  return
}

// -----

func.func @shard_start() {
  // expected-error @+1 {{needs at least one mesh axis}}
  %f = dt.shard_start {axes = array<i16>, size = 8} : tensor<i64>
  return
}

// -----

func.func @embedding_shard(%t: tensor<8x4xf32>, %ids: tensor<6xi32>, %f: tensor<i64>) {
  // expected-error @+1 {{holds more rows than the table has}}
  %h = dt.embedding_shard %t, %ids, %f {rows = 4} : tensor<8x4xf32>, tensor<6xi32>, tensor<i64> -> tensor<6x4xf32>
  return
}

// -----

func.func @class_stats(%l: tensor<6x8xf32>, %y: tensor<6xi32>, %f: tensor<i64>) {
  // expected-error @+1 {{statistics must have shape [4, ...labels]}}
  %s = dt.class_stats %l, %y, %f {classes = 16} : tensor<6x8xf32>, tensor<6xi32>, tensor<i64> -> tensor<3x6xf32>
  return
}

// -----

func.func @cross_entropy_stats(%s: tensor<4x6xf32>, %y: tensor<6xi32>) {
  // expected-error @+1 {{statistics must have shape [blocks, 4, ...labels]}}
  %l = dt.cross_entropy_stats %s, %y : tensor<4x6xf32>, tensor<6xi32> -> tensor<f32>
  return
}

// -----

func.func @wait_for_nothing(%x: tensor<4xf32>) {
  // expected-error @+1 {{waits for a value that no asynchronous collective (a mesh collective marked dt.async) made}}
  %w = dt.wait %x : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

module {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["dp"]}
  func.func @wait_keeps_too_little(%x: tensor<4xf32>) {
    %a = mesh.all_reduce %x on @mesh mesh_axes = [0] {dt.async} : tensor<4xf32> -> tensor<4xf32>
    // expected-error @+1 {{must keep its collective's operands alive}}
    %w = dt.wait %a : tensor<4xf32> -> tensor<4xf32>
    return
  }
}
