// RUN: dt-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// #dt.shard round-trips: replicated, split, several axes, blocks, partial sums.
mesh.mesh @mesh(shape = 2x2) {dt.axes = ["dp", "tp"]}
// CHECK-LABEL: dt.global param @a
// CHECK-SAME: sharding = #dt.shard<[_, _]>
dt.global param @a : tensor<4x4xf32> {init = {kind = "constant", value = 0.0 : f64}, sharding = #dt.shard<[_, _]>}
// CHECK-LABEL: dt.global param @b
// CHECK-SAME: sharding = #dt.shard<[dp, tp]>
dt.global param @b : tensor<4x4xf32> {init = {kind = "constant", value = 0.0 : f64}, sharding = #dt.shard<[dp, tp]>}
// CHECK-LABEL: dt.global param @c
// CHECK-SAME: sharding = #dt.shard<[(tp, dp), _]>
dt.global param @c : tensor<4x4xf32> {init = {kind = "constant", value = 0.0 : f64}, sharding = #dt.shard<[(tp, dp), _]>}
// CHECK-LABEL: dt.global param @d
// CHECK-SAME: sharding = #dt.shard<[3 x tp]>
dt.global param @d : tensor<12xf32> {init = {kind = "constant", value = 0.0 : f64}, sharding = #dt.shard<[3 x tp]>}
// CHECK-LABEL: dt.global grad @e
// CHECK-SAME: sharding = #dt.shard<[_], partial = (dp)>
dt.global grad @e : tensor<12xf32> {sharding = #dt.shard<[_], partial = (dp)>}
// CHECK-LABEL: dt.global state @f
// CHECK-SAME: sharding = #dt.shard<[]>
dt.global state @f : tensor<i64> {sharding = #dt.shard<[]>}

// -----

// expected-error @+1 {{#dt.shard uses axis 'dp' twice}}
dt.global grad @g : tensor<4x4xf32> {sharding = #dt.shard<[dp, _], partial = (dp)>}

// -----

// expected-error @+1 {{#dt.shard: block counts are positive}}
dt.global grad @g : tensor<4xf32> {sharding = #dt.shard<[0 x dp]>}
