// RUN: dt-opt %s -split-input-file -dt-spmd-partition -verify-diagnostics

// The padding of an uneven shard must stay zero where it is stored: exp(0) is not.
module {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  dt.global state @m : tensor<10xf32> {sharding = #dt.shard<[dp]>}
  func.func @apply_step() {
    %m = dt.load @m {dt.sharding = [#dt.shard<[dp]>]} : tensor<10xf32>
    %e = dt.exp %m {dt.sharding = [#dt.shard<[dp]>]} : tensor<10xf32>
    // expected-error @+1 {{internal error: dt-spmd-partition would store non-zero padding into 'm', whose shards are uneven}}
    dt.store %e, @m : tensor<10xf32>
    return
  }
}

// -----

// ... and where it is summed.
module {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  dt.global state @m : tensor<10xf32> {sharding = #dt.shard<[dp]>}
  dt.global output @"out/s" : tensor<f32> {sharding = #dt.shard<[]>}
  func.func @apply_step() {
    %m = dt.load @m {dt.sharding = [#dt.shard<[dp]>]} : tensor<10xf32>
    %e = dt.exp %m {dt.sharding = [#dt.shard<[dp]>]} : tensor<10xf32>
    // expected-error @+1 {{internal error: dt-spmd-partition would sum the padding of an uneven shard}}
    %s = dt.reduce_sum %e [0] {dt.sharding = [#dt.shard<[], partial = (dp)>]} : tensor<10xf32> -> tensor<f32>
    dt.store %s, @"out/s" : tensor<f32>
    return
  }
}

// -----

// ... and where a matmul contracts over it: exp(0) on both sides.
module {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["tp"]}
  dt.global state @a : tensor<3x10xf32> {sharding = #dt.shard<[_, tp]>}
  dt.global state @b : tensor<10x2xf32> {sharding = #dt.shard<[tp, _]>}
  dt.global output @"out/c" : tensor<3x2xf32> {sharding = #dt.shard<[_, _]>}
  func.func @apply_step() {
    %a = dt.load @a {dt.sharding = [#dt.shard<[_, tp]>]} : tensor<3x10xf32>
    %b = dt.load @b {dt.sharding = [#dt.shard<[tp, _]>]} : tensor<10x2xf32>
    %ea = dt.exp %a {dt.sharding = [#dt.shard<[_, tp]>]} : tensor<3x10xf32>
    %eb = dt.exp %b {dt.sharding = [#dt.shard<[tp, _]>]} : tensor<10x2xf32>
    // expected-error @+1 {{internal error: dt-spmd-partition would contract over the padding of uneven shards}}
    %c = dt.matmul %ea, %eb {dt.sharding = [#dt.shard<[_, _], partial = (tp)>]} : tensor<3x10xf32>, tensor<10x2xf32> -> tensor<3x2xf32>
    dt.store %c, @"out/c" : tensor<3x2xf32>
    return
  }
}

// -----

// A layout that names an axis the mesh lacks is reported at the global.
module {
  mesh.mesh @mesh(shape = 4) {dt.axes = ["dp"]}
  // expected-error @+1 {{the layout names axis 'tp', which the mesh does not have}}
  dt.global state @m : tensor<8xf32> {sharding = #dt.shard<[tp]>}
}
