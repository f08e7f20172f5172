// RUN: dt-opt %s -split-input-file -dt-shard-globals | FileCheck %s

// ZeRO-0: data parallelism only. Parameters and optimizer state are whole on every
// rank; with several micro-batches per step (dt.accumulation), gradients are partial
// sums over the data axis until the optimizer sums them; batches are split by sample,
// scalars are whole.
// CHECK-LABEL: module @zero0
module @zero0 attributes {dt.accumulation = 2 : i64, dt.parallel = {data = ["dp"], zero = 0 : i64}} {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  // CHECK: dt.global param @w {{.*}}sharding = #dt.shard<[_, _]>
  dt.global param @w : tensor<10x8xf32> {init = {kind = "constant", value = 0.0 : f64}}
  // CHECK: dt.global grad @"grad/w" {{.*}}sharding = #dt.shard<[_, _], partial = (dp)>
  dt.global grad @"grad/w" : tensor<10x8xf32> {dt.param = @w}
  // CHECK: dt.global state @"adamw.m/w" {{.*}}sharding = #dt.shard<[_, _]>
  dt.global state @"adamw.m/w" : tensor<10x8xf32> {dt.param = @w}
  // CHECK: dt.global input @"in/train.x" {{.*}}sharding = #dt.shard<[dp, _]>
  dt.global input @"in/train.x" : tensor<64x8xf32> {dt.batch}
  // CHECK: dt.global state @step {{.*}}sharding = #dt.shard<[]>
  dt.global state @step : tensor<i64>
  // CHECK: dt.global input @"in/total_steps" {{.*}}sharding = #dt.shard<[]>
  dt.global input @"in/total_steps" : tensor<i64>
}

// -----

// ZeRO-1 splits the optimizer state's first dimension over the data axis (10 rows
// on 4 ranks: padded shards, not an error).
// CHECK-LABEL: module @zero1
module @zero1 attributes {dt.accumulation = 2 : i64, dt.parallel = {data = ["dp"], zero = 1 : i64}} {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  // CHECK: dt.global param @w {{.*}}sharding = #dt.shard<[_, _]>
  dt.global param @w : tensor<10x8xf32> {init = {kind = "constant", value = 0.0 : f64}}
  // CHECK: dt.global grad @"grad/w" {{.*}}sharding = #dt.shard<[_, _], partial = (dp)>
  dt.global grad @"grad/w" : tensor<10x8xf32> {dt.param = @w}
  // CHECK: dt.global state @"adamw.m/w" {{.*}}sharding = #dt.shard<[dp, _]>
  dt.global state @"adamw.m/w" : tensor<10x8xf32> {dt.param = @w}
}

// -----

// With one micro-batch per step the gradients are summed where backward stores
// them (as DDP does, so that the sum can travel while backward goes on): whole under
// ZeRO-0, split under ZeRO-1 (a reduce-scatter; the rank keeps its shard, as under
// ZeRO-2).
// CHECK-LABEL: module @zero0_one_micro_batch
module @zero0_one_micro_batch attributes {dt.accumulation = 1 : i64, dt.parallel = {data = ["dp"], zero = 0 : i64}} {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  dt.global param @w : tensor<10x8xf32> {init = {kind = "constant", value = 0.0 : f64}}
  // CHECK: dt.global grad @"grad/w" {{.*}}sharding = #dt.shard<[_, _]>}
  dt.global grad @"grad/w" : tensor<10x8xf32> {dt.param = @w}
}

// -----

// CHECK-LABEL: module @zero1_one_micro_batch
module @zero1_one_micro_batch attributes {dt.parallel = {data = ["dp"], zero = 1 : i64}} {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  dt.global param @w : tensor<10x8xf32> {init = {kind = "constant", value = 0.0 : f64}}
  // CHECK: dt.global grad @"grad/w" {{.*}}sharding = #dt.shard<[dp, _]>}
  dt.global grad @"grad/w" : tensor<10x8xf32> {dt.param = @w}
  // CHECK: dt.global state @"adamw.m/w" {{.*}}sharding = #dt.shard<[dp, _]>}
  dt.global state @"adamw.m/w" : tensor<10x8xf32> {dt.param = @w}
}

// -----

// ZeRO-2 also splits the gradients; ZeRO-3 the parameters too.
// CHECK-LABEL: module @zero2
module @zero2 attributes {dt.parallel = {data = ["dp"], zero = 2 : i64}} {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  // CHECK: dt.global param @b {{.*}}sharding = #dt.shard<[_]>
  dt.global param @b : tensor<10xf32> {init = {kind = "constant", value = 0.0 : f64}}
  // CHECK: dt.global grad @"grad/b" {{.*}}sharding = #dt.shard<[dp]>
  dt.global grad @"grad/b" : tensor<10xf32> {dt.param = @b}
}

// -----

// CHECK-LABEL: module @zero3
module @zero3 attributes {dt.parallel = {data = ["dp"], zero = 3 : i64}} {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  // CHECK: dt.global param @b {{.*}}sharding = #dt.shard<[dp]>
  dt.global param @b : tensor<10xf32> {init = {kind = "constant", value = 0.0 : f64}}
  // CHECK: dt.global grad @"grad/b" {{.*}}sharding = #dt.shard<[dp]>
  dt.global grad @"grad/b" : tensor<10xf32> {dt.param = @b}
  // CHECK: dt.global state @"sgd.momentum/b" {{.*}}sharding = #dt.shard<[dp]>
  dt.global state @"sgd.momentum/b" : tensor<10xf32> {dt.param = @b}
}

// -----

// On a 2-D mesh a tensor-parallel parameter (dt.tensor_dim) splits over the tensor
// axis; ZeRO then splits its first dimension over the data axis as well, inside the
// tensor axis's pieces. An explicit layout (dt.layout, the program's `shard`) wins
// over the annotation. An axis of one rank splits nothing.
// CHECK-LABEL: module @mesh2d
module @mesh2d attributes {dt.accumulation = 4 : i64, dt.parallel = {data = ["dp", "one"], zero = 1 : i64, tensor = "tp"}} {
  mesh.mesh @mesh(shape = 2x1x2) {dt.axes = ["dp", "one", "tp"]}
  // CHECK: dt.global param @up {{.*}}sharding = #dt.shard<[tp, _]>
  dt.global param @up : tensor<16x8xf32> {dt.tensor_dim = 0 : i64, init = {kind = "constant", value = 0.0 : f64}}
  // CHECK: dt.global state @"adamw.m/up" {{.*}}sharding = #dt.shard<[(tp, dp), _]>
  dt.global state @"adamw.m/up" : tensor<16x8xf32> {dt.param = @up}
  // CHECK: dt.global grad @"grad/up" {{.*}}sharding = #dt.shard<[tp, _], partial = (dp)>
  dt.global grad @"grad/up" : tensor<16x8xf32> {dt.param = @up}
  // CHECK: dt.global param @down {{.*}}sharding = #dt.shard<[_, tp]>
  dt.global param @down : tensor<8x16xf32> {dt.layout = #dt.shard<[_, tp]>, dt.tensor_dim = 0 : i64, init = {kind = "constant", value = 0.0 : f64}}
}

// -----

// Without a mesh there is nothing to lay out.
// CHECK-LABEL: module @single
// CHECK-NOT: sharding
module @single {
  dt.global param @w : tensor<4xf32> {init = {kind = "constant", value = 0.0 : f64}}
}

// -----

// A column-parallel projection whose output is split into q, k and v splits each
// of the three blocks over the tensor axis (Megatron's per-head layout): the
// split is found by following the weight's rows (and the bias) to the dt.split.
// CHECK-LABEL: module @qkv
module @qkv attributes {dt.parallel = {data = [], zero = 0 : i64, tensor = "tp"}} {
  mesh.mesh @mesh(shape = 2) {dt.axes = ["tp"]}
  // CHECK: dt.global param @w {{.*}}sharding = #dt.shard<[3 x tp, _]>
  dt.global param @w : tensor<48x16xf32> {dt.tensor_dim = 0 : i64, init = {kind = "constant", value = 0.0 : f64}}
  // CHECK: dt.global param @b {{.*}}sharding = #dt.shard<[3 x tp]>
  dt.global param @b : tensor<48xf32> {dt.tensor_dim = 0 : i64, init = {kind = "constant", value = 0.0 : f64}}
  // A plain column layer stays contiguous.
  // CHECK: dt.global param @up {{.*}}sharding = #dt.shard<[tp, _]>
  dt.global param @up : tensor<32x16xf32> {dt.tensor_dim = 0 : i64, init = {kind = "constant", value = 0.0 : f64}}
  dt.global input @"in/x" : tensor<8x16xf32> {dt.batch}
  func.func @loss() {
    %x = dt.load @"in/x" : tensor<8x16xf32>
    %w = dt.load @w : tensor<48x16xf32>
    %y = dt.matmul %x, %w {transpose_rhs} : tensor<8x16xf32>, tensor<48x16xf32> -> tensor<8x48xf32>
    %r = dt.reshape %y : tensor<8x48xf32> -> tensor<2x4x48xf32>
    %b = dt.load @b : tensor<48xf32>
    %bb = dt.broadcast_to %b : tensor<48xf32> -> tensor<2x4x48xf32>
    %s = dt.add %r, %bb : tensor<2x4x48xf32>
    %q, %k, %v = dt.split %s axis 2 : tensor<2x4x48xf32> -> tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>
    %u = dt.load @up : tensor<32x16xf32>
    %h = dt.matmul %x, %u {transpose_rhs} : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
    return
  }
}
